/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Endpoint choice for one userspace-mode frontend, as upstream's rules
 * choose: each new connection (TCP) or session (UDP) goes to one of the
 * endpoints with equal probability (iptables' statistic 1/n, 1/(n-1), ...
 * chain gives each 1/n), and with ClientIP session affinity a client
 * keeps the endpoint it last got for as long as it comes back within the
 * timeout of its last connection (the recent module's --rcheck --seconds
 * on a list that each connection --sets), while that endpoint is still
 * in the list. The endpoint lists themselves (policy Local, terminating
 * fallback) are model/endpoints.c's, chosen by the backend. The clients'
 * table may be shared by every frontend of a service port (its cluster
 * IP, node port, external IPs), as the rules' per-endpoint lists are.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "userspace/fwd-addr.h"

struct picker;
struct affinity;

struct picker *picker_new(void);
struct picker *picker_free(struct picker *p);

/* A table of clients and their endpoints, counted: NULL on out of memory. */
struct affinity *affinity_new(void);
struct affinity *affinity_ref(struct affinity *a);
/* Accepts NULL; returns NULL. */
struct affinity *affinity_unref(struct affinity *a);
size_t affinity_n_clients(const struct affinity *a);
/* Whether the caller's is the only reference left. */
bool affinity_unshared(const struct affinity *a);

/* Replaces the endpoints (copied) and the affinity timeout (seconds; 0:
 * no affinity, and the picker lets go of its table). With a timeout,
 * shared is the table to use (referenced), or NULL for one of the
 * picker's own. A client whose endpoint is not in this picker's list
 * picks afresh among it. Returns 0 or -ENOMEM (p unchanged). */
int picker_set(struct picker *p, const struct fwd_addr *eps, size_t n, uint32_t affinity_timeout_s,
               struct affinity *shared);
size_t picker_n(const struct picker *p);
/* endpoint i (i < picker_n()). */
const struct fwd_addr *picker_endpoint(const struct picker *p, size_t i);

/* The endpoint for client's new connection at now_ms (monotonic): failed
 * is NULL, or an endpoint that did not answer (chosen among the others,
 * and no longer the client's affinity). Returns 0 with ret set, or
 * -ENOENT when there is no endpoint (to pick). */
int picker_pick(struct picker *p, const struct inet_addr *client, const struct fwd_addr *failed, uint64_t now_ms,
                struct fwd_addr *ret);
/* Clients with an affinity entry (for tests and metrics). */
size_t picker_n_clients(const struct picker *p);

/* Seeds the choice (tests); otherwise it is seeded from getrandom(). */
void picker_seed(uint64_t seed);
