/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Health-check node ports from the model: one per LoadBalancer service
 * with externalTrafficPolicy Local, reporting how many of its endpoints
 * (distinct IPs) are ready on this node, listening on the nodePortAddresses
 * of the family's parameters, or everywhere (http/hcnp.h serves them).
 */
#include <stddef.h>
#include <stdint.h>

struct hcnp;
struct hcnp_service;
struct model;
struct render_params;

/* The health-check node ports m asks for on this node (pure). */
struct hcnp_feed_plan {
        struct hcnp_service *svcs;      /* in service key order */
        char **ns;                      /* their namespaces, which svcs[i].ns points at */
        size_t n;
};

void hcnp_feed_plan(const struct model *m, uint8_t family, const char *node_name, struct hcnp_feed_plan *ret);
void hcnp_feed_plan_done(struct hcnp_feed_plan *p);

/* Makes h's listeners match m (h may be NULL: none). Failures are logged
 * by hcnp_sync(). */
void hcnp_feed(struct hcnp *h, const struct model *m, const struct render_params *rp, const char *node_name);
