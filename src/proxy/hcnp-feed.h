/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Health-check node ports from the model: one per LoadBalancer service
 * with externalTrafficPolicy Local, reporting how many of its endpoints
 * (distinct IPs) are ready on this node, listening on the nodePortAddresses
 * of the family's parameters, or everywhere (http/hcnp.h serves them).
 */
struct hcnp;
struct model;
struct render_params;

/* Makes h's listeners match m. Failures are logged by hcnp_sync(). */
void hcnp_feed(struct hcnp *h, const struct model *m, const struct render_params *rp, const char *node_name);
