/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What this node's proxy does with one connection, and why: `kproxy
 * explain` and the daemon's /debug/explain. From the model and the node's
 * parameters, the same decisions the renderers take (model/endpoints.h's
 * plan; userspace/plan.h for userspace mode and socket load balancing):
 * the verdict, the endpoints with their chances, masquerading, session
 * affinity, and the walk through the mode's own chains. Pure: no I/O, no
 * logging.
 *
 *   explain_query_set()  a query from its fields as text (flags, URL query)
 *   explain_connection() the answer, as a struct
 *   explain_to_json()    the answer as JSON (docs/explain.md's schema)
 *   explain_print()      the JSON for people
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "explain/explain-query.h"
#include "explain/explain-types.h"

/* Explains q on node n with model m. Returns 0 or -ENOMEM (ret is then
 * empty). */
int explain_connection(const struct model *m, const struct explain_node *n, const struct explain_query *q,
                       struct explain_result *ret);
void explain_result_done(struct explain_result *r);

/* The answer as JSON (a new reference; NULL: out of memory). */
json_t *explain_to_json(const struct explain_query *q, const struct explain_result *r);
/* JSON as explain_to_json() makes it, for people. Returns 0 or -EINVAL
 * when it does not have that form. */
int explain_print(const json_t *j, FILE *out);

struct kproxy_config;
struct host_facts;
/* The mode explain follows for configuration c (iptables, nftables or
 * userspace). Returns 0, or -EINVAL for another mode or userspace with
 * --socket-lb, said on why (may be NULL). */
int explain_mode_of_config(const struct kproxy_config *c, enum explain_mode *ret, FILE *why);
/* The answer as JSON for q against model m, on the node that c, node_name
 * and host describe (socket_lb: socket load balancing runs beside the
 * rules; cidrs: the ServiceCIDRs). Returns 0 or -errno. */
int explain_answer(const struct model *m, const struct kproxy_config *c, bool socket_lb, const char *node_name,
                   const struct host_facts *host, const struct inet_cidr *cidrs, size_t n_cidrs,
                   const struct explain_query *q, json_t **ret);
