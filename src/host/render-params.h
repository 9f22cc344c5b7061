/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A family's render parameters (render/render.h's struct render_params),
 * decided from the configuration, the Node and the host's facts
 * (host/host.h), once per family, as upstream's proxier constructor
 * decides them.
 */
#include <stdint.h>

struct buf;
struct host_facts;
struct kproxy_config;
struct node;
struct render_params;

/* Derives one family's parameters from the configuration, this node's Node
 * object (may be NULL) and the host's facts. Problems that upstream logs
 * and tolerates (no cluster CIDR of this family, a NodePort address that is
 * loopback) are written, one per line, to *warnings (may be NULL). Returns
 * 0 or -EINVAL for configuration the caller should have refused (message in
 * warnings). p->nodeport_ips is owned: release with render_params_done(). */
int render_params_init(struct render_params *p, uint8_t family, const struct kproxy_config *c,
                       const char *node_name, const struct node *node, const struct host_facts *h,
                       struct buf *warnings);
void render_params_done(struct render_params *p);
