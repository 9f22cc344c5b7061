/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Stale UDP conntrack entries, from the model's side: after a sync, every
 * UDP frontend of a family (cluster IP, external and load-balancer IPs,
 * node port) with its serving endpoints goes to apply/conntrack.h, which
 * deletes the entries DNAT-ed elsewhere.
 *
 * A frontend without any serving endpoint is reconciled too, with none
 * valid: the flows DNAT-ed to its last endpoint are deleted, so their next
 * packet is new and meets the rule that rejects it (upstream skipped such
 * services until kubernetes/kubernetes#139629: one-way UDP senders stayed
 * black-holed for as long as they sent). So are the frontends of service
 * versions replaced or deleted since the last reconcile, which the model no
 * longer has (the black hole upstream fixed after 1.34 in #141371): a
 * remembered frontend still in the service keeps its endpoints (frontends
 * merge as a union).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ct_frontend;
struct model;
struct svc;
struct udp_stale;

/* What deletes the stale entries: conntrack_reconcile_udp()
 * (apply/conntrack.h), unless a test gives its own. */
typedef int (*udp_stale_fn)(uint8_t family, const struct ct_frontend *frontends, size_t n);

struct udp_stale *udp_stale_new(void);
struct udp_stale *udp_stale_free(struct udp_stale *u);
void udp_stale_set_reconciler(struct udp_stale *u, udp_stale_fn fn);

/* Whether s has a UDP port (so a change to it may leave stale entries). */
bool udp_stale_applies(const struct svc *s);
/* s is about to be replaced or deleted: its UDP frontends are reconciled
 * once more, whatever the model then says. */
void udp_stale_remember(struct udp_stale *u, const struct svc *s);
/* Reconciles the family's frontends in the current network namespace.
 * Returns the number of entries deleted, or -errno (logged). */
int udp_stale_reconcile(struct udp_stale *u, const struct model *m, uint8_t family, const char *node_name);
/* Every family was reconciled: the remembered frontends are done with. */
void udp_stale_clear(struct udp_stale *u);
