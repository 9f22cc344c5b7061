/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Service ports whose traffic policy is Local and which have endpoints but
 * none on this node, per policy (internal, external): upstream's
 * kubeproxy_sync_proxy_rules_no_local_endpoints_total, counted as
 * upstream's syncProxyRules counts them. iptables mode's renderer counts
 * them as it writes the top-level chains; nftables mode's partial sync
 * renders only the changed services, so this tally keeps the share of each
 * service that has any and recounts the changed ones (a full pass over
 * every endpoint costs about 100 ms at 50k services).
 */
#include <stddef.h>

struct hmap;
struct model;
struct render_params;
struct nolocal;

struct nolocal *nolocal_new(void);
struct nolocal *nolocal_free(struct nolocal *t);

/* Recounts the services in changed (service keys "ns/name"; a key no
 * longer in the model counts 0), or every service of m when changed is
 * NULL, for p's family and node. */
void nolocal_update(struct nolocal *t, const struct model *m, const struct render_params *p,
                    const struct hmap *changed);
/* The totals as of the last update. */
void nolocal_totals(const struct nolocal *t, size_t *ret_internal, size_t *ret_external);
