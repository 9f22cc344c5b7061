/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The sync loop, with upstream kube-proxy's semantics: API objects come in
 * (already parsed) and only mark services changed; syncs run no faster than
 * min-sync-period, write only the chains of changed services (partial
 * syncs), and turn into full syncs when needed (first sync, after a failed
 * one, a flush seen by the canary, a node label change, once an hour).
 * Nothing is written before every initial list has completed.
 */
#include <stdbool.h>
#include <stdint.h>

typedef struct json_t json_t;
struct ev_loop;
struct kproxy_config;
struct host_facts;
struct health_server;
struct metrics;
struct hcnp;
struct proxier;

enum proxier_source {
        PROXIER_SERVICES,
        PROXIER_SLICES,
        PROXIER_NODE,
        PROXIER_SERVICE_CIDRS,
        _PROXIER_SOURCE_MAX,
};

struct proxier_opts {
        const struct kproxy_config *config;
        const struct host_facts *host;          /* probed; nfacct is refreshed per full sync */
        const char *node_name;
        struct health_server *health;           /* may be NULL */
        struct metrics *metrics;                /* may be NULL */
        struct hcnp *hcnp;                      /* may be NULL */
        bool ipv6;                              /* also program ip6tables */
        bool service_cidrs;                     /* ServiceCIDRs are watched (else never waited for) */
};

int proxier_new(struct ev_loop *l, const struct proxier_opts *o, struct proxier **ret);
struct proxier *proxier_free(struct proxier *p);

/* An object now looks like obj (upsert), or is gone (obj NULL). An object
 * that fails validation is logged and ignored: its previous good version,
 * if any, stays in effect. */
void proxier_object(struct proxier *p, enum proxier_source src, const char *key, const json_t *obj);
/* Calls each(key, ctx) for every object of src the proxier holds (after a
 * relist, those not listed are gone). */
void proxier_keys(struct proxier *p, enum proxier_source src, void (*each)(const char *key, void *ctx), void *ctx);
/* The initial list of src has completed. */
void proxier_synced(struct proxier *p, enum proxier_source src);

/* Counters, for logs and tests. */
uint64_t proxier_syncs(const struct proxier *p);
uint64_t proxier_failures(const struct proxier *p);
