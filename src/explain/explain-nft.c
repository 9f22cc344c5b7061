/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The walk of one connection through nftables mode's table, as render/
 * nft.c describes it (docs/reference/nftables-mode.md §3, §4, §6): the
 * base chains it passes, the map elements that dispatch it, the service's
 * chains and the endpoints' endpoint- chains.
 */
#include "explain/explain-nft.h"

#include <stdio.h>
#include <string.h>

#include "explain/explain-ctx.h"
#include "model/model.h"
#include "render/chain.h"
#include "render/render.h"

struct nnames {
        char table[24];                         /* "ip kube-proxy" */
        char base[300];                         /* "ns/name/tcp/port" */
        char body[CHAIN_NFT_BODY_MAX];
        char ipx[4];                            /* "ip", "ip6" */
        char dst[INET_ADDR_STRLEN];
        char chain[CHAIN_NFT_BODY_MAX + 16];    /* scratch */
};

static void nnames_init(const struct explain_ctx *c, struct nnames *n) {
        snprintf(n->ipx, sizeof n->ipx, "%s", c->n->p->family == 6 ? "ip6" : "ip");
        snprintf(n->table, sizeof n->table, "%s kube-proxy", n->ipx);
        inet_addr_format(&c->q->dst, n->dst);
        if (!c->port)
                return;
        snprintf(n->base, sizeof n->base, "%s/%s/%s", c->svc->key, c->proto, c->port->name);
        chain_nft_body(n->base, false, n->body);
}

static const char *named(struct nnames *n, const char *prefix) {
        snprintf(n->chain, sizeof n->chain, "%s%s", prefix, n->body);
        return n->chain;
}

/* "10.0.0.1:80" -> "<base>__10.0.0.1/80"; IPv6 "[fd00::1]:80" -> "<base>__fd00..1/80". */
static void endpoint_chain(const struct nnames *n, const char *addr, char *out, size_t len) {
        char base[400], ip[INET_ADDR_STRLEN];
        const char *colon = strrchr(addr, ':');
        const char *a = addr[0] == '[' ? addr + 1 : addr;
        size_t ip_len = (size_t) (colon - a) - (addr[0] == '[');
        char body[CHAIN_NFT_BODY_MAX];

        if (!colon || ip_len >= sizeof ip) {
                snprintf(out, len, "endpoint-?");
                return;
        }
        memcpy(ip, a, ip_len);
        ip[ip_len] = '\0';
        for (char *p = ip; *p; p++)
                if (*p == ':')
                        *p = '.';
        snprintf(base, sizeof base, "%s__%s/%s", n->base, ip, colon + 1);
        chain_nft_body(base, false, body);
        snprintf(out, len, "endpoint-%s", body);
}

static void detector_match(const struct explain_ctx *c, const struct nnames *n, bool local, char *out, size_t len) {
        const struct render_params *p = c->n->p;
        size_t a = strlen(p->detector_arg);
        if (p->detector == DETECTOR_INTERFACE)
                snprintf(out, len, "iifname %s%.*s%s", local ? "" : "!= ", (int) (a && p->detector_arg[a - 1] == '+' ? a - 1 : a),
                         p->detector_arg, a && p->detector_arg[a - 1] == '+' ? "*" : "");
        else
                snprintf(out, len, "%s saddr %s%s", n->ipx, local ? "" : "!= ", p->detector_arg);
}

static void endpoints_walk(struct explain_ctx *c, struct nnames *n, const char *chain) {
        struct explain_result *r = c->r;
        size_t k = 0;
        for (size_t i = 0; i < r->n_eps; i++)
                if (r->eps[i].selected) {
                        endpoint_chain(n, r->eps[i].addr, r->eps[i].chain, sizeof r->eps[i].chain);
                        k++;
                }
        if (k == 0)
                return;
        if (r->affinity_timeout)
                explain_step(c, n->table, chain,
                             "%s saddr @affinity-… goto endpoint-… (a client seen within %u s goes back to its endpoint)",
                             n->ipx, r->affinity_timeout);
        explain_step(c, n->table, chain, "numgen random mod %zu vmap { 0 : goto %s%s }", k, r->eps[0].chain,
                     k > 1 ? " , … (equal chances: see the endpoints)" : "");
        bool hairpin = false;
        for (size_t i = 0; i < r->n_eps; i++)
                hairpin |= r->eps[i].selected && r->eps[i].masquerade && !r->masquerade;
        if (hairpin)
                explain_step(c, n->table, "endpoint-…",
                             "%s saddr <endpoint IP> jump mark-for-masquerade (hairpin: only when the source is the "
                             "endpoint itself)", n->ipx);
        if (r->affinity_timeout)
                explain_step(c, n->table, "endpoint-…", "update @affinity-… { %s saddr }", n->ipx);
        explain_step(c, n->table, "endpoint-…", "meta l4proto %s dnat to <endpoint>", c->proto);
        if (r->masquerade || hairpin) {
                explain_step(c, n->table, "nat-postrouting", "jump masquerading");
                explain_step(c, n->table, "masquerading", "masquerade fully-random (packets marked %s)", c->n->p->mark);
        }
}

static void dispatch(struct explain_ctx *c, struct nnames *n, const char *to) {
        const struct render_params *p = c->n->p;
        if (c->r->entry == EXPLAIN_ENTRY_NODE_PORT) {
                if (p->nodeports_match_all)
                        explain_step(c, n->table, "services",
                                     "fib daddr type local %s daddr != %s meta l4proto . th dport vmap @service-nodeports: "
                                     "%s . %u : goto %s",
                                     n->ipx, p->family == 6 ? "::1" : "127.0.0.0/8", c->proto, c->port->node_port, to);
                else
                        explain_step(c, n->table, "services",
                                     "%s daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports: %s . %u : "
                                     "goto %s", n->ipx, c->proto, c->port->node_port, to);
                return;
        }
        explain_step(c, n->table, "services", "%s daddr . meta l4proto . th dport vmap @service-ips: %s . %s . %u : goto %s",
                     n->ipx, n->dst, c->proto, c->port->port, to);
}

static void firewall(struct explain_ctx *c, struct nnames *n) {
        bool node = c->r->from == EXPLAIN_FROM_NODE;
        explain_step(c, n->table, node ? "filter-output-pre-dnat" : "filter-prerouting-pre-dnat",
                     "ct state new jump firewall-check");
        explain_step(c, n->table, "firewall-check", "%s daddr . meta l4proto . th dport vmap @firewall-ips: %s . %s . %u : "
                     "goto %s", n->ipx, n->dst, c->proto, c->port->port, named(n, "firewall-"));
        explain_step(c, n->table, n->chain, "%s saddr != { <the source ranges> } drop%s", n->ipx,
                     c->route == ROUTE_FIREWALL_DROP ? "" : " (the source is in a range: back to firewall-check)");
}

static void blocked(struct explain_ctx *c, struct nnames *n) {
        bool np = c->r->entry == EXPLAIN_ENTRY_NODE_PORT;
        const char *hook = c->dst_local ? "filter-input" : c->r->from == EXPLAIN_FROM_NODE ? "filter-output" : "filter-forward";
        const char *verdict = c->r->verdict == EXPLAIN_REJECT ? "goto reject-chain" : "drop";
        if (np) {
                explain_step(c, n->table, "filter-input", "ct state new jump nodeport-endpoints-check");
                explain_step(c, n->table, "nodeport-endpoints-check",
                             "meta l4proto . th dport vmap @no-endpoint-nodeports: %s . %u comment \"%s\" : %s", c->proto,
                             c->port->node_port, c->spn, verdict);
        } else {
                explain_step(c, n->table, hook, "ct state new jump service-endpoints-check");
                explain_step(c, n->table, "service-endpoints-check",
                             "%s daddr . meta l4proto . th dport vmap @no-endpoint-services: %s . %s . %u comment \"%s\" : %s",
                             n->ipx, n->dst, c->proto, c->port->port, c->spn, verdict);
        }
        if (c->r->verdict == EXPLAIN_REJECT)
                explain_step(c, n->table, "reject-chain", "reject");
}

static void cluster_ips_check(struct explain_ctx *c, struct nnames *n) {
        bool node = c->r->from == EXPLAIN_FROM_NODE;
        explain_step(c, n->table, "services", "(no element matches: not DNATed)");
        if (c->route == ROUTE_NONE || c->route == ROUTE_HEALTH_CHECK)
                return;
        explain_step(c, n->table, node ? "filter-output" : "filter-forward", "ct state new jump cluster-ips-check");
        if (c->route == ROUTE_INVALID_PORT)
                explain_step(c, n->table, "cluster-ips-check",
                             "%s daddr @cluster-ips reject comment \"Reject traffic to invalid ports of ClusterIPs\"", n->ipx);
        else
                explain_step(c, n->table, "cluster-ips-check",
                             "%s daddr { <the ServiceCIDRs> } drop comment \"Drop traffic to unallocated ClusterIPs\"",
                             n->ipx);
}

static void external(struct explain_ctx *c, struct nnames *n) {
        char ext[CHAIN_NFT_BODY_MAX + 16], svc[CHAIN_NFT_BODY_MAX + 16], loc[CHAIN_NFT_BODY_MAX + 16], det[96];
        snprintf(ext, sizeof ext, "%s", named(n, "external-"));
        snprintf(svc, sizeof svc, "%s", named(n, "service-"));
        snprintf(loc, sizeof loc, "%s", named(n, "local-"));
        dispatch(c, n, ext);
        switch (c->route) {
        case ROUTE_EXT_CLUSTER:
                explain_step(c, n->table, ext, "jump mark-for-masquerade");
                explain_step(c, n->table, ext, "goto %s", svc);
                endpoints_walk(c, n, svc);
                break;
        case ROUTE_EXT_POD:
                detector_match(c, n, true, det, sizeof det);
                explain_step(c, n->table, ext, "%s goto %s comment \"short-circuit pod traffic\"", det, svc);
                endpoints_walk(c, n, svc);
                break;
        case ROUTE_EXT_NODE:
                explain_step(c, n->table, ext, "fib saddr type local jump mark-for-masquerade comment \"masquerade local traffic\"");
                explain_step(c, n->table, ext, "fib saddr type local goto %s comment \"short-circuit local traffic\"", svc);
                endpoints_walk(c, n, svc);
                break;
        case ROUTE_EXT_LOCAL:
                explain_step(c, n->table, ext, "goto %s", loc);
                endpoints_walk(c, n, loc);
                break;
        default:
                explain_step(c, n->table, ext, "(no rule matches: the chain ends, nothing is DNATed)");
                blocked(c, n);
        }
}

void explain_walk_nftables(struct explain_ctx *c) {
        struct nnames n;
        bool node = c->r->from == EXPLAIN_FROM_NODE;
        char det[96];

        nnames_init(c, &n);
        if (c->port && c->r->entry == EXPLAIN_ENTRY_LOAD_BALANCER_IP && c->plan.filters_sources)
                firewall(c, &n);
        if (c->route == ROUTE_FIREWALL_DROP)
                return;
        if (c->route == ROUTE_INTERNAL_BLOCK || c->route == ROUTE_EXTERNAL_BLOCK) {
                blocked(c, &n);
                return;
        }
        explain_step(c, n.table, node ? "nat-output" : "nat-prerouting", "jump services");
        if (!c->port) {
                cluster_ips_check(c, &n);
                return;
        }
        if (c->route != ROUTE_INTERNAL) {
                external(c, &n);
                return;
        }
        const char *chain = c->plan.internal_policy_local ? "local-" : "service-";
        char to[CHAIN_NFT_BODY_MAX + 16];
        snprintf(to, sizeof to, "%s", named(&n, chain));
        dispatch(c, &n, to);
        if (c->r->masquerade) {
                if (c->n->p->masquerade_all)
                        det[0] = '\0';
                else
                        detector_match(c, &n, false, det, sizeof det);
                explain_step(c, n.table, to, "%s daddr %s%s%s jump mark-for-masquerade", n.ipx, n.dst, det[0] ? " " : "",
                             det);
        }
        endpoints_walk(c, &n, to);
}
