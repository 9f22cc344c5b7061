/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The walk of one connection through iptables mode's chains, as render/
 * ipt-port.c writes them (docs/reference/iptables-mode.md §2, §4, §7): the
 * rule that matched in each chain, with its comment, and the endpoints'
 * KUBE-SEP- chains.
 */
#include "explain/explain-ipt.h"

#include <stdio.h>
#include <string.h>

#include "explain/explain-ctx.h"
#include "model/model.h"
#include "render/chain.h"
#include "render/render.h"

struct names {
        char svc[CHAIN_NAME_MAX], svl[CHAIN_NAME_MAX], ext[CHAIN_NAME_MAX], fw[CHAIN_NAME_MAX];
        char dest[INET_ADDR_STRLEN + 64];      /* "-m tcp -p tcp -d 10.0.0.1 --dport 80" */
        char dst[INET_ADDR_STRLEN];
};

static void names_init(const struct explain_ctx *c, struct names *n) {
        char hash[CHAIN_HASH_LEN + 1];
        chain_hash(c->spn, c->proto, NULL, hash);
        snprintf(n->svc, sizeof n->svc, "KUBE-SVC-%s", hash);
        snprintf(n->svl, sizeof n->svl, "KUBE-SVL-%s", hash);
        snprintf(n->ext, sizeof n->ext, "KUBE-EXT-%s", hash);
        snprintf(n->fw, sizeof n->fw, "KUBE-FW-%s", hash);
        inet_addr_format(&c->q->dst, n->dst);
        snprintf(n->dest, sizeof n->dest, "-m %s -p %s -d %s --dport %u", c->proto, c->proto, n->dst, c->port->port);
}

/* "! -s 10.0.0.0/8", "-i br0": the detector's match (local or not). */
static void detector_match(const struct render_params *p, bool local, char *out, size_t len) {
        snprintf(out, len, "%s%s %s", local ? "" : "! ", p->detector == DETECTOR_INTERFACE ? "-i" : "-s",
                 p->detector_arg);
}

/* The chain of the endpoints the connection goes to, then its DNAT, then
 * masquerading on the way out. */
static void endpoints_walk(struct explain_ctx *c, const char *chain) {
        struct explain_result *r = c->r;
        const struct render_params *p = c->n->p;
        size_t n = 0;

        for (size_t i = 0; i < r->n_eps; i++) {
                struct explain_endpoint *e = &r->eps[i];
                char hash[CHAIN_HASH_LEN + 1];
                if (!e->selected)
                        continue;
                chain_hash(c->spn, c->proto, e->addr, hash);
                snprintf(e->chain, sizeof e->chain, "KUBE-SEP-%s", hash);
                n++;
        }
        if (n == 0)
                return;
        if (r->affinity_timeout)
                explain_step(c, "nat", chain,
                             "-m comment --comment \"%s -> …\" -m recent --name KUBE-SEP-… --rcheck --seconds %u "
                             "--reap -j KUBE-SEP-… (a client seen within %u s goes back to its endpoint)",
                             c->spn, r->affinity_timeout, r->affinity_timeout);
        if (n > 1)
                explain_step(c, "nat", chain,
                             "-m comment --comment \"%s -> …\" -m statistic --mode random --probability … -j "
                             "KUBE-SEP-… (one of %zu, equal chances: see the endpoints)",
                             c->spn, n);
        else
                explain_step(c, "nat", chain, "-m comment --comment \"%s -> %s\" -j %s", c->spn, r->eps[0].addr,
                             r->eps[0].chain);
        explain_step(c, "nat", "KUBE-SEP-…", "-m comment --comment %s%s -m %s -p %s -j DNAT --to-destination <endpoint>",
                     c->spn, r->affinity_timeout ? " -m recent --name KUBE-SEP-… --set" : "", c->proto, c->proto);
        bool hairpin = false;
        for (size_t i = 0; i < r->n_eps; i++)
                hairpin |= r->eps[i].selected && r->eps[i].masquerade && !r->masquerade;
        if (hairpin)
                explain_step(c, "nat", "KUBE-SEP-…", "-m comment --comment %s -s <endpoint IP> -j KUBE-MARK-MASQ "
                             "(hairpin: only when the source is the endpoint itself)", c->spn);
        if (r->masquerade || hairpin)
                explain_step(c, "nat", "KUBE-POSTROUTING",
                             "-m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE%s "
                             "(packets marked %s)",
                             p->random_fully ? " --random-fully" : "", p->mark);
}

static void internal(struct explain_ctx *c, const struct names *n) {
        const struct render_params *p = c->n->p;
        const char *chain = c->plan.internal_policy_local ? n->svl : n->svc;
        char det[96];

        explain_step(c, "nat", "KUBE-SERVICES", "-m comment --comment \"%s cluster IP\" %s -j %s", c->spn, n->dest,
                     chain);
        if (c->r->masquerade) {
                if (p->masquerade_all)
                        det[0] = '\0';
                else
                        detector_match(p, false, det, sizeof det);
                explain_step(c, "nat", chain, "-m comment --comment \"%s cluster IP\" %s%s%s -j KUBE-MARK-MASQ", c->spn,
                             n->dest, det[0] ? " " : "", det);
        }
        endpoints_walk(c, chain);
}

/* Into KUBE-EXT-x (or KUBE-FW-x for a load-balancer IP with ranges). */
static void external_entry(struct explain_ctx *c, const struct names *n) {
        const struct render_params *p = c->n->p;
        const char *to = c->plan.uses_firewall_chain ? n->fw : n->ext;

        switch (c->r->entry) {
        case EXPLAIN_ENTRY_EXTERNAL_IP:
                explain_step(c, "nat", "KUBE-SERVICES", "-m comment --comment \"%s external IP\" %s -j %s", c->spn,
                             n->dest, n->ext);
                break;
        case EXPLAIN_ENTRY_LOAD_BALANCER_IP:
                explain_step(c, "nat", "KUBE-SERVICES", "-m comment --comment \"%s loadbalancer IP\" %s -j %s", c->spn,
                             n->dest, to);
                break;
        default:
                if (p->nodeports_match_all)
                        explain_step(c, "nat", "KUBE-SERVICES",
                                     "-m comment --comment \"kubernetes service nodeports; NOTE: this must be the last "
                                     "rule in this chain\" -m addrtype --dst-type LOCAL%s -j KUBE-NODEPORTS",
                                     p->family == 6 ? " ! -d ::1/128" : !p->localhost_nodeports ? " ! -d 127.0.0.0/8" : "");
                else
                        explain_step(c, "nat", "KUBE-SERVICES",
                                     "-m comment --comment \"kubernetes service nodeports; NOTE: this must be the last "
                                     "rule in this chain\" -d %s -j KUBE-NODEPORTS", n->dst);
                explain_step(c, "nat", "KUBE-NODEPORTS", "-m comment --comment %s -m %s -p %s%s --dport %u%s -j %s",
                             c->spn, c->proto, c->proto, inet_addr_is_loopback(&c->q->dst) ? " -d 127.0.0.0/8" : "",
                             c->port->node_port,
                             inet_addr_is_loopback(&c->q->dst) && p->nfacct
                                     ? " -m nfacct --nfacct-name localhost_nps_accepted_pkts"
                                     : "",
                             n->ext);
        }
        if (c->plan.uses_firewall_chain && c->r->entry == EXPLAIN_ENTRY_LOAD_BALANCER_IP) {
                if (c->route == ROUTE_FIREWALL_DROP) {
                        explain_step(c, "nat", n->fw,
                                     "-m comment --comment \"other traffic to %s will be dropped by "
                                     "KUBE-PROXY-FIREWALL\" (no -s range matches)",
                                     c->spn);
                        explain_step(c, "filter", "KUBE-PROXY-FIREWALL",
                                     "-m comment --comment \"%s traffic not accepted by %s\" %s -j DROP", c->spn, n->fw,
                                     n->dest);
                } else {
                        explain_step(c, "nat", n->fw, "-m comment --comment \"%s loadbalancer IP\" -s <a source range "
                                     "that holds the source> -j %s", c->spn, n->ext);
                }
        }
}

static void external(struct explain_ctx *c, const struct names *n) {
        const struct render_params *p = c->n->p;
        char det[96];

        external_entry(c, n);
        switch (c->route) {
        case ROUTE_EXT_CLUSTER:
                explain_step(c, "nat", n->ext,
                             "-m comment --comment \"masquerade traffic for %s external destinations\" -j KUBE-MARK-MASQ",
                             c->spn);
                explain_step(c, "nat", n->ext, "-j %s", n->svc);
                endpoints_walk(c, n->svc);
                break;
        case ROUTE_EXT_POD:
                detector_match(p, true, det, sizeof det);
                explain_step(c, "nat", n->ext, "-m comment --comment \"pod traffic for %s external destinations\" %s -j %s",
                             c->spn, det, n->svc);
                endpoints_walk(c, n->svc);
                break;
        case ROUTE_EXT_NODE:
                explain_step(c, "nat", n->ext,
                             "-m comment --comment \"masquerade LOCAL traffic for %s external destinations\" -m addrtype "
                             "--src-type LOCAL -j KUBE-MARK-MASQ", c->spn);
                explain_step(c, "nat", n->ext,
                             "-m comment --comment \"route LOCAL traffic for %s external destinations\" -m addrtype "
                             "--src-type LOCAL -j %s", c->spn, n->svc);
                endpoints_walk(c, n->svc);
                break;
        case ROUTE_EXT_LOCAL:
                explain_step(c, "nat", n->ext, "-j %s", n->svl);
                endpoints_walk(c, n->svl);
                break;
        case ROUTE_EXT_NO_LOCAL:
                explain_step(c, "nat", n->ext, "(no rule matches: the chain ends without a jump, nothing is DNATed)");
                break;
        default:
                break;
        }
}

/* The filter table's REJECT or DROP of a service port with nothing to go to. */
static void blocked(struct explain_ctx *c, const struct names *n, bool internal) {
        const char *target = c->r->verdict == EXPLAIN_REJECT ? "REJECT" : "DROP";
        const char *hook = c->dst_local ? "INPUT" : c->src_node ? "OUTPUT" : "FORWARD";
        char comment[400];
        snprintf(comment, sizeof comment, "%s has no %sendpoints", c->spn, c->r->verdict == EXPLAIN_REJECT ? "" : "local ");
        if (internal) {
                hook = c->src_node ? "OUTPUT" : "FORWARD";
                explain_step(c, "filter", hook, "-m conntrack --ctstate NEW -m comment --comment \"kubernetes service "
                             "portals\" -j KUBE-SERVICES");
                explain_step(c, "filter", "KUBE-SERVICES", "-m comment --comment \"%s\" %s -j %s", comment, n->dest,
                             target);
                return;
        }
        if (c->r->verdict == EXPLAIN_NONE) {
                explain_step(c, "filter", "OUTPUT", "(KUBE-EXTERNAL-SERVICES is on INPUT and FORWARD only)");
                return;
        }
        explain_step(c, "filter", hook, "-m conntrack --ctstate NEW -m comment --comment \"kubernetes "
                     "externally-visible service portals\" -j KUBE-EXTERNAL-SERVICES");
        if (c->r->entry == EXPLAIN_ENTRY_NODE_PORT)
                explain_step(c, "filter", "KUBE-EXTERNAL-SERVICES",
                             "-m comment --comment \"%s\" -m addrtype --dst-type LOCAL -m %s -p %s --dport %u -j %s",
                             comment, c->proto, c->proto, c->port->node_port, target);
        else
                explain_step(c, "filter", "KUBE-EXTERNAL-SERVICES", "-m comment --comment \"%s\" %s -j %s",
                             comment, n->dest, target);
}

void explain_walk_iptables(struct explain_ctx *c) {
        struct names n;

        switch (c->route) {
        case ROUTE_CT_INVALID:
                explain_step(c, "filter", "FORWARD", "-m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD");
                explain_step(c, "filter", "KUBE-FORWARD", "-m conntrack --ctstate INVALID%s -j DROP",
                             c->n->p->nfacct ? " -m nfacct --nfacct-name ct_state_invalid_dropped_pkts" : "");
                return;
        case ROUTE_HEALTH_CHECK:
                explain_step(c, "filter", "INPUT",
                             "-m comment --comment \"kubernetes health check service ports\" -j KUBE-NODEPORTS");
                explain_step(c, "filter", "KUBE-NODEPORTS",
                             "-m comment --comment \"%s health check node port\" -m tcp -p tcp --dport %u -j ACCEPT",
                             c->svc->key, c->q->dst_port);
                return;
        case ROUTE_NONE:
        case ROUTE_INVALID_PORT:
        case ROUTE_UNALLOCATED:
                explain_step(c, "nat", c->r->from == EXPLAIN_FROM_NODE ? "OUTPUT" : "PREROUTING",
                             "-m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES");
                explain_step(c, "nat", "KUBE-SERVICES", "(no rule matches: not DNATed)");
                return;
        default:
                break;
        }
        names_init(c, &n);
        if (c->route == ROUTE_INTERNAL_BLOCK) {
                blocked(c, &n, true);
                return;
        }
        if (c->route == ROUTE_EXTERNAL_BLOCK) {
                blocked(c, &n, false);
                return;
        }
        explain_step(c, "nat", c->r->from == EXPLAIN_FROM_NODE ? "OUTPUT" : "PREROUTING",
                     "-m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES");
        if (c->route == ROUTE_INTERNAL)
                internal(c, &n);
        else
                external(c, &n);
        if (c->route == ROUTE_EXT_NO_LOCAL)
                blocked(c, &n, false);
}
