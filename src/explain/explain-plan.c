/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode and socket load balancing answer from their plan
 * (userspace/plan.h), which is what they serve: the frontend (or the map
 * entry) for the destination, its endpoints, its source ranges. A
 * destination without one is closed in userspace mode, and left to the
 * rules with socket load balancing.
 */
#include "explain/explain-plan.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "explain/explain-ctx.h"
#include "explain/explain-endpoints.h"
#include "model/model.h"
#include "userspace/plan.h"
#include "util/hmap.h"

static const struct userspace_frontend *find_frontend(const struct userspace_plan *pl, const struct explain_query *q) {
        const struct userspace_frontend *wild = NULL;
        if (q->proto == L4_SCTP)
                return NULL;    /* neither has SCTP */
        for (size_t i = 0; i < pl->n_fe; i++) {
                const struct userspace_frontend *fe = &pl->fe[i];
                if (fe->addr.port != q->dst_port || fe->proto != (q->proto == L4_UDP ? IPPROTO_UDP : IPPROTO_TCP) ||
                    fe->addr.ip.family != q->dst.family)
                        continue;
                if (inet_addr_equal(&fe->addr.ip, &q->dst))
                        return fe;
                if (inet_addr_is_unspecified(&fe->addr.ip))
                        wild = fe;
        }
        return wild;
}

static bool frontend_admits(const struct userspace_frontend *fe, const struct inet_addr *src) {
        for (size_t i = 0; i < fe->n_sources; i++)
                if (inet_cidr_contains(&fe->sources[i], src))
                        return true;
        return fe->n_sources == 0;
}

/* Puts fe's endpoints first in r->eps, in its order, with equal chances;
 * the port's others follow, left out. */
static int frontend_endpoints(struct explain_ctx *c, const struct userspace_frontend *fe, bool masquerade) {
        struct explain_result *r = c->r;
        int k = explain_fill_endpoints(c);
        if (k < 0)
                return k;
        for (size_t i = 0; i < r->n_eps; i++) {
                struct explain_endpoint *x = &r->eps[i];
                x->selected = false;
                x->rule_probability[0] = '\0';
                for (size_t j = 0; j < fe->n_eps; j++) {
                        char s[FWD_ADDR_STRLEN];
                        if (strcmp(fwd_addr_format(&fe->eps[j], s), x->addr) == 0)
                                x->selected = true;
                }
                x->probability = x->selected ? 1.0 / (double) fe->n_eps : 0;
                x->masquerade = x->selected && masquerade;
        }
        return 0;
}

int explain_plan(struct explain_ctx *c, bool local_plan, bool *ret_found) {
        struct explain_result *r = c->r;
        struct userspace_plan pl;
        struct hmap only = HMAP_INIT;
        char key[FWD_ADDR_STRLEN + 8];
        int k;

        *ret_found = false;
        hmap_put(&only, c->svc->key, (void *) c->svc);
        k = local_plan ? userspace_plan_build_local(c->m, c->n->p, &only, &pl)
                       : userspace_plan_build(c->m, c->n->p, &only, &pl);
        hmap_done(&only);
        if (k < 0)
                return k;
        const struct userspace_frontend *fe = find_frontend(&pl, c->q);
        if (fe && !frontend_admits(fe, &c->q->src)) {
                r->verdict = EXPLAIN_DROP;
                explain_say(r->reason, "the source is outside %s's loadBalancerSourceRanges: the frontend's socket filter "
                               "drops it", c->svc->key);
                explain_step(c, "userspace", fe->key, "socket filter: sources %zu CIDR%s", fe->n_sources,
                             fe->n_sources == 1 ? "" : "s");
                *ret_found = true;
        } else if (fe) {
                *ret_found = true;
                r->verdict = EXPLAIN_FORWARD;
                r->socket_lb = local_plan;
                /* Userspace mode keeps the rules' policies (but the
                 * short circuits); socket load balancing sends the node's
                 * own clients to the cluster's endpoints for external
                 * destinations, as the rules' short circuits do. */
                c->chain_local = fe->external ? !local_plan && c->plan.external_policy_local
                                              : c->plan.internal_policy_local;
                snprintf(r->policy, sizeof r->policy, "%s %s%s", fe->external ? "externalTrafficPolicy" : "internalTrafficPolicy",
                         c->chain_local ? "Local" : "Cluster",
                         fe->external && local_plan && c->plan.external_policy_local ? ", short-circuited for the node's clients" : "");
                k = frontend_endpoints(c, fe, !local_plan);
                if (k < 0)
                        goto out;
                r->masquerade = !local_plan;
                explain_say(r->masquerade_why, local_plan ? "socket load balancing: no NAT; the socket connects to the "
                                                    "endpoint itself, from the client's own address"
                                                  : "userspace mode: kproxy connects to the endpoint from the "
                                                    "node's address");
                if (fe->n_eps == 1)
                        explain_say(r->reason, "to the one endpoint of %s%s", c->spn, local_plan ? ", at connect()" : "");
                else
                        explain_say(r->reason, "to one of %zu endpoints of %s, at random%s", fe->n_eps, c->spn,
                            local_plan ? ", at connect()" : "");
                snprintf(key, sizeof key, "%s", fe->key);
                if (local_plan)
                        explain_step(c, "socket-lb", "socklb_services",
                                     "connect()/sendmsg() to %s: %zu slot%s in socklb_slots%s", key, fe->n_eps,
                                     fe->n_eps == 1 ? "" : "s",
                                     fe->affinity_timeout ? ", ClientIP affinity per network namespace" : "");
                else
                        explain_step(c, "userspace", key, "frontend %s %s -> %zu endpoint%s", c->spn,
                                     fe->external ? "external" : "internal", fe->n_eps, fe->n_eps == 1 ? "" : "s");
        }
        k = 0;
out:
        userspace_plan_done(&pl);
        return k;
}
