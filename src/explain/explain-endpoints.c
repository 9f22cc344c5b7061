/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The endpoints of an answer (explain-endpoints.h): each with its chance,
 * its node and zone, its conditions, and why it is in the set or left out.
 */
#include "explain/explain-endpoints.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "explain/explain-ctx.h"
#include "model/model.h"
#include "render/render.h"
#include "util/cleanup.h"

/* The node and zone of endpoint e, from the service's slices. */
static void endpoint_place(const struct slice *const *slices, size_t n, const struct endpoint *e,
                           struct explain_endpoint *x) {
        for (size_t i = 0; i < n; i++) {
                const struct slice *s = slices[i];
                if (s->family != e->addr.family)
                        continue;
                for (size_t k = 0; k < s->n_endpoints; k++) {
                        struct inet_addr a = slice_endpoint_addr(s, k);
                        if (inet_addr_equal(&a, &e->addr)) {
                                x->node = slice_endpoint_node(&s->endpoints[k]);
                                x->zone = slice_endpoint_zone(s, &s->endpoints[k]);
                                return;
                        }
                }
        }
}

static bool in_list(struct endpoint *const *v, size_t n, const struct endpoint *e) {
        for (size_t i = 0; i < n; i++)
                if (v[i] == e)
                        return true;
        return false;
}

static void endpoint_why(const struct explain_ctx *c, const struct endpoint *e, bool picked, bool topology,
                         char *out, size_t len) {
        const struct render_params *p = c->n->p;
        const char *state = e->ready                        ? "ready"
                            : e->serving && e->terminating ? "serving and terminating"
                            : e->terminating               ? "terminating, not serving"
                                                           : "not ready";
        if (!picked) {
                const char *left = !(e->ready || (e->serving && e->terminating)) ? "not usable"
                                   : c->chain_local && !e->local                ? "on another node, and the policy is Local"
                                   : !e->ready                                   ? "a ready endpoint is preferred"
                                   : topology ? "its topology hints are for another zone or node"
                                              : "not in this chain";
                snprintf(out, len, "%s: left out, %s", state, left);
                return;
        }
        if (!e->ready)
                snprintf(out, len, "%s: no ready endpoint%s, so terminating ones serve", state,
                         c->chain_local ? " on this node" : "");
        else if (c->chain_local)
                snprintf(out, len, "%s, on this node (%s)", state, c->r->policy);
        else if (topology && e->hints && e->hints->n_nodes > 0 && p->prefer_same_node)
                snprintf(out, len, "%s, hinted for this node (topology)", state);
        else if (topology)
                snprintf(out, len, "%s, hinted for this node's zone %s (topology)", state,
                         p->node_zone ? p->node_zone : "");
        else
                snprintf(out, len, "%s (%s)", state, c->r->policy);
}

/* Fills r->eps: the chosen chain's endpoints first, with their chances,
 * then the port's other endpoints, left out. */
int explain_fill_endpoints(struct explain_ctx *c) {
        struct explain_result *r = c->r;
        const struct svc_port_endpoints *e = &c->eps;
        struct endpoint *const *list = c->chain_local ? e->local : e->cluster;
        size_t n = c->chain_local ? e->n_local : e->n_cluster;
        bool topology = false;

        for (size_t i = 0; !c->chain_local && i < e->n_all; i++)
                if (e->all[i].ready && !in_list(list, n, &e->all[i]) && n > 0 && list[0]->ready)
                        topology = true;
        size_t n_slices;
        _cleanup_free_ const struct slice **slices = model_service_slices(c->m, c->svc->key, &n_slices);
        if (!slices && n_slices > 0)
                return -ENOMEM;
        r->eps = calloc(e->n_all ? e->n_all : 1, sizeof *r->eps);
        if (!r->eps)
                return -ENOMEM;
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < e->n_all; i++) {
                        const struct endpoint *ep = &e->all[i];
                        bool picked = false;
                        size_t k = 0;
                        for (; k < n; k++)
                                if (list[k] == ep) {
                                        picked = true;
                                        break;
                                }
                        if (picked != (pass == 0))
                                continue;
                        struct explain_endpoint *x = &r->eps[r->n_eps++];
                        memcpy(x->addr, ep->str, sizeof x->addr);
                        x->node = x->zone = NULL;
                        endpoint_place(slices, n_slices, ep, x);
                        x->ready = ep->ready;
                        x->serving = ep->serving;
                        x->terminating = ep->terminating;
                        x->local = ep->local;
                        x->selected = picked;
                        if (picked) {
                                x->probability = 1.0 / (double) n;
                                if (k + 1 < n)
                                        snprintf(x->rule_probability, sizeof x->rule_probability, "%.10f",
                                                 1.0 / (double) (n - k));
                                x->masquerade = r->masquerade || inet_addr_equal(&ep->addr, &c->q->src);
                        }
                        endpoint_why(c, ep, picked, topology, x->why, sizeof x->why);
                }
        return 0;
}
