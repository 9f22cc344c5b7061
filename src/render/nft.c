/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the nftables renderer: upstream kube-proxy's nftables layout
 * (reference/nftables-mode.md, v1.34: table "kube-proxy", its base chains,
 * sets, verdict maps and per-service chain names) with one deliberate
 * difference: a service chain picks its endpoint with one rule per
 * endpoint ("numgen random mod K == 0 goto endpoint-…", K = N, N-1, …, then
 * a plain goto), as iptables' statistic rules do, instead of upstream's one
 * anonymous verdict map per chain. Each anonymous map is a set the kernel
 * binds on commit, and N of them in one transaction cost O(N²) (4 s at 5k
 * services, minutes at 20k, measured in reference/performance.md); the
 * per-rule form has the same distribution and loads linearly.
 *
 * Output order: table, sets and maps, every chain, then rules, then
 * elements, so each object exists before anything refers to it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/endpoints.h"
#include "model/model.h"
#include "render/chain.h"
#include "render/render.h"
#include "util/buf.h"

#define BODY_MAX 241            /* 240 characters and NUL: upstream's budget */

struct nft {
        const struct render_params *p;
        const char *fam;        /* "ip" / "ip6" */
        const char *addr;       /* "ipv4_addr" / "ipv6_addr" */
        struct buf objs, chains, rules, elems;
};

/* upstream's hashAndTruncate(): "<8 base32 chars of SHA-256>-<base>", cut
 * to 237 characters and "..." beyond 240. */
static void name_body(const char *base, char out[BODY_MAX]) {
        char h[9];
        chain_hash_str(base, 8, h);
        snprintf(out, BODY_MAX, "%s-%s", h, base);
        if (strlen(h) + 1 + strlen(base) > BODY_MAX - 1)
                memcpy(out + 237, "...", 4);
}

static void chain_decl(struct nft *t, const char *prefix, const char *body) {
        buf_printf(&t->chains, "add chain %s kube-proxy %s%s\n", t->fam, prefix, body);
}

static void rule(struct nft *t, const char *chain, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void rule(struct nft *t, const char *chain, const char *fmt, ...) {
        va_list ap;
        buf_printf(&t->rules, "add rule %s kube-proxy %s ", t->fam, chain);
        va_start(ap, fmt);
        buf_vprintf(&t->rules, fmt, ap);
        va_end(ap);
        buf_putc(&t->rules, '\n');
}

static void element(struct nft *t, const char *set, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void element(struct nft *t, const char *set, const char *fmt, ...) {
        va_list ap;
        buf_printf(&t->elems, "add element %s kube-proxy %s { ", t->fam, set);
        va_start(ap, fmt);
        buf_vprintf(&t->elems, fmt, ap);
        va_end(ap);
        buf_puts(&t->elems, " }\n");
}

/* The detector's match in nft syntax (§6.3); "" when not implemented. */
static void detector_match(const struct nft *t, bool local, char *out, size_t len) {
        const struct render_params *p = t->p;
        if (p->detector == DETECTOR_SOURCE_CIDR) {
                snprintf(out, len, "%s saddr %s%s", t->fam, local ? "" : "!= ", p->detector_arg);
        } else if (p->detector == DETECTOR_INTERFACE) {
                /* iptables spells an interface prefix "veth+", nft "veth*". */
                char arg[sizeof p->detector_arg];
                snprintf(arg, sizeof arg, "%s", p->detector_arg);
                size_t n = strlen(arg);
                if (n > 0 && arg[n - 1] == '+')
                        arg[n - 1] = '*';
                snprintf(out, len, "iifname %s%s", local ? "" : "!= ", arg);
        } else {
                out[0] = '\0';
        }
}

static void fixed_part(struct nft *t, const struct inet_cidr *cidrs, size_t n_cidrs) {
        const struct render_params *p = t->p;
        const char *f = t->fam;
        static const struct {
                const char *name, *type, *hook;
                int prio;
        } base[] = {
                {"filter-prerouting-pre-dnat", "filter", "prerouting", -110},
                {"filter-output-pre-dnat", "filter", "output", -110},
                {"filter-forward", "filter", "forward", 0},
                {"filter-input", "filter", "input", 0},
                {"filter-output", "filter", "output", 0},
                {"nat-prerouting", "nat", "prerouting", -100},
                {"nat-output", "nat", "output", -100},
                {"nat-postrouting", "nat", "postrouting", 100},
        };
        static const char *const regular[] = {"cluster-ips-check", "firewall-check", "mark-for-masquerade",
                                              "masquerading", "nodeport-endpoints-check", "services",
                                              "service-endpoints-check"};

        buf_printf(&t->objs, "add table %s kube-proxy { comment \"rules for kube-proxy\" ; }\n", f);
        buf_printf(&t->objs, "add set %s kube-proxy cluster-ips { type %s ; comment \"Active ClusterIPs\" ; }\n", f,
                   t->addr);
        if (!p->nodeports_match_all)
                buf_printf(&t->objs,
                           "add set %s kube-proxy nodeport-ips { type %s ; comment \"IPs that accept NodePort "
                           "traffic\" ; }\n",
                           f, t->addr);
        buf_printf(&t->objs,
                   "add map %s kube-proxy firewall-ips { type %s . inet_proto . inet_service : verdict ; comment "
                   "\"destinations that are subject to LoadBalancerSourceRanges\" ; }\n",
                   f, t->addr);
        buf_printf(&t->objs,
                   "add map %s kube-proxy no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "
                   "\"vmap to drop or reject packets to service nodeports with no endpoints\" ; }\n",
                   f);
        buf_printf(&t->objs,
                   "add map %s kube-proxy no-endpoint-services { type %s . inet_proto . inet_service : verdict ; "
                   "comment \"vmap to drop or reject packets to services with no endpoints\" ; }\n",
                   f, t->addr);
        buf_printf(&t->objs,
                   "add map %s kube-proxy service-ips { type %s . inet_proto . inet_service : verdict ; comment "
                   "\"ClusterIP, ExternalIP and LoadBalancer IP traffic\" ; }\n",
                   f, t->addr);
        buf_printf(&t->objs,
                   "add map %s kube-proxy service-nodeports { type inet_proto . inet_service : verdict ; comment "
                   "\"NodePort traffic\" ; }\n",
                   f);

        for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
                buf_printf(&t->chains, "add chain %s kube-proxy %s { type %s hook %s priority %d ; }\n", f,
                           base[i].name, base[i].type, base[i].hook, base[i].prio);
        for (size_t i = 0; i < sizeof regular / sizeof regular[0]; i++)
                buf_printf(&t->chains, "add chain %s kube-proxy %s\n", f, regular[i]);
        buf_printf(&t->chains,
                   "add chain %s kube-proxy reject-chain { comment \"helper for @no-endpoint-services / "
                   "@no-endpoint-nodeports\" ; }\n",
                   f);

        /* §3.1 jumps, in upstream's order. */
        rule(t, "filter-prerouting-pre-dnat", "ct state new jump firewall-check");
        rule(t, "filter-output-pre-dnat", "ct state new jump firewall-check");
        rule(t, "filter-input", "ct state new jump nodeport-endpoints-check");
        rule(t, "filter-input", "ct state new jump service-endpoints-check");
        rule(t, "filter-forward", "ct state new jump service-endpoints-check");
        rule(t, "filter-forward", "ct state new jump cluster-ips-check");
        rule(t, "filter-output", "ct state new jump service-endpoints-check");
        rule(t, "filter-output", "ct state new jump cluster-ips-check");
        rule(t, "nat-prerouting", "jump services");
        rule(t, "nat-output", "jump services");
        rule(t, "nat-postrouting", "jump masquerading");

        /* §3.3 fixed chains. */
        rule(t, "cluster-ips-check", "%s daddr @cluster-ips reject comment \"Reject traffic to invalid ports of ClusterIPs\"",
             f);
        if (n_cidrs > 0) {
                struct buf list = BUF_INIT;
                char c[INET_CIDR_STRLEN];
                for (size_t i = 0; i < n_cidrs; i++)
                        if (cidrs[i].addr.family == p->family)
                                buf_printf(&list, "%s%s", list.len ? ", " : "", inet_cidr_format(&cidrs[i], c));
                if (list.len)
                        rule(t, "cluster-ips-check", "%s daddr { %s } drop comment \"Drop traffic to unallocated ClusterIPs\"",
                             f, list.data);
                buf_done(&list);
        }
        rule(t, "firewall-check", "%s daddr . meta l4proto . th dport vmap @firewall-ips", f);
        rule(t, "mark-for-masquerade", "mark set mark or %s", p->mark);
        rule(t, "masquerading", "mark and %s == 0 return", p->mark);
        rule(t, "masquerading", "mark set mark xor %s", p->mark);
        rule(t, "masquerading", "masquerade fully-random");
        rule(t, "reject-chain", "reject");
        rule(t, "services", "%s daddr . meta l4proto . th dport vmap @service-ips", f);
        rule(t, "service-endpoints-check", "%s daddr . meta l4proto . th dport vmap @no-endpoint-services", f);

        /* §3.4 NodePorts; localhost NodePorts do not exist in this mode. */
        const char *loop = p->family == 6 ? "::1" : "127.0.0.0/8";
        if (p->nodeports_match_all) {
                rule(t, "services", "fib daddr type local %s daddr != %s meta l4proto . th dport vmap @service-nodeports",
                     f, loop);
                rule(t, "nodeport-endpoints-check", "%s daddr != %s meta l4proto . th dport vmap @no-endpoint-nodeports",
                     f, loop);
        } else {
                char ip[INET_ADDR_STRLEN];
                rule(t, "services", "%s daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports", f);
                rule(t, "nodeport-endpoints-check", "%s daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports",
                     f);
                for (size_t i = 0; i < p->n_nodeport_ips; i++)
                        if (!inet_addr_is_loopback(&p->nodeport_ips[i]))
                                element(t, "nodeport-ips", "%s", inet_addr_format(&p->nodeport_ips[i], ip));
        }
}

/* The endpoint part of a base name: "IP/port", IPv6 colons as dots. */
static void endpoint_base(const char *svc_base, const struct endpoint *e, char *out, size_t len) {
        char ip[INET_ADDR_STRLEN];
        inet_addr_format(&e->addr, ip);
        for (char *c = ip; *c; c++)
                if (*c == ':')
                        *c = '.';
        snprintf(out, len, "%s__%s/%u", svc_base, ip, e->port);
}

static void lb_chain(struct nft *t, const char *chain, const char *cip, bool masq_rule, bool affinity,
                     struct endpoint *const *list, size_t n, char (*ep_bodies)[BODY_MAX], const struct endpoint *all) {
        char not_local[96];
        if (masq_rule) {
                detector_match(t, false, not_local, sizeof not_local);
                if (t->p->masquerade_all)
                        rule(t, chain, "%s daddr %s jump mark-for-masquerade", t->fam, cip);
                else
                        rule(t, chain, "%s daddr %s %s jump mark-for-masquerade", t->fam, cip, not_local);
        }
        if (affinity)
                for (size_t i = 0; i < n; i++) {
                        const char *b = ep_bodies[list[i] - all];
                        rule(t, chain, "%s saddr @affinity-%s goto endpoint-%s", t->fam, b, b);
                }
        for (size_t i = 0; i < n; i++) {
                const char *b = ep_bodies[list[i] - all];
                if (i + 1 < n)
                        rule(t, chain, "numgen random mod %zu == 0 goto endpoint-%s", n - i, b);
                else
                        rule(t, chain, "goto endpoint-%s", b);
        }
}

static int render_port(struct nft *t, const struct svc *s, const struct svc_port *port,
                       const struct svc_port_endpoints *e, const struct inet_addr *cip_addr, bool first_port) {
        const struct render_params *p = t->p;
        const char *f = t->fam, *proto = l4_proto_to_lower(port->proto);
        char base[300], body[BODY_MAX], spn[340], cip[INET_ADDR_STRLEN], ip[INET_ADDR_STRLEN];
        unsigned pt = port->port, np = port->node_port;

        snprintf(base, sizeof base, "%s/%s/%s", s->key, proto, port->name);
        name_body(base, body);
        if (port->name[0])
                snprintf(spn, sizeof spn, "%s:%s", s->key, port->name);
        else
                snprintf(spn, sizeof spn, "%s", s->key);
        inet_addr_format(cip_addr, cip);

        size_t n_lb = 0, n_ranges = 0;
        for (size_t i = 0; i < s->n_lb_ips; i++)
                n_lb += s->lb_ips[i].family == p->family;
        for (size_t i = 0; i < s->n_source_ranges; i++)
                n_ranges += s->source_ranges[i].addr.family == p->family;
        bool has_any = e->has_any;
        bool has_internal = has_any && !(e->internal_policy_local && e->n_local == 0);
        bool has_external = has_any && !(e->external_policy_local && e->n_local == 0);
        bool uses_svc = e->n_cluster > 0 && e->uses_cluster;
        bool uses_svl = e->n_local > 0 && e->uses_local;
        bool uses_ext = has_any && e->externally_accessible;
        bool uses_fw = n_lb > 0 && n_ranges > 0;        /* no endpoint condition in this mode */
        const char *internal = e->internal_policy_local ? "local" : "service";
        const char *int_verdict = has_any ? "drop" : "goto reject-chain";
        const char *ext_verdict = int_verdict;

        /* §6.1 elements */
        if (first_port)
                element(t, "cluster-ips", "%s", cip);
        if (has_internal)
                element(t, "service-ips", "%s . %s . %u : goto %s-%s", cip, proto, pt, internal, body);
        else
                element(t, "no-endpoint-services", "%s . %s . %u comment \"%s\" : %s", cip, proto, pt, spn, int_verdict);
        for (size_t i = 0; i < s->n_external_ips; i++) {
                if (s->external_ips[i].family != p->family)
                        continue;
                inet_addr_format(&s->external_ips[i], ip);
                if (has_any)
                        element(t, "service-ips", "%s . %s . %u : goto external-%s", ip, proto, pt, body);
                if (!has_external)
                        element(t, "no-endpoint-services", "%s . %s . %u comment \"%s\" : %s", ip, proto, pt, spn,
                                ext_verdict);
        }
        for (size_t i = 0; i < s->n_lb_ips; i++) {
                if (s->lb_ips[i].family != p->family)
                        continue;
                inet_addr_format(&s->lb_ips[i], ip);
                if (has_any)
                        element(t, "service-ips", "%s . %s . %u : goto external-%s", ip, proto, pt, body);
                if (uses_fw)
                        element(t, "firewall-ips", "%s . %s . %u : goto firewall-%s", ip, proto, pt, body);
        }
        if (!has_external)
                for (size_t i = 0; i < s->n_lb_ips; i++)
                        if (s->lb_ips[i].family == p->family)
                                element(t, "no-endpoint-services", "%s . %s . %u comment \"%s\" : %s",
                                        inet_addr_format(&s->lb_ips[i], ip), proto, pt, spn, ext_verdict);
        if (np) {
                if (has_any)
                        element(t, "service-nodeports", "%s . %u : goto external-%s", proto, np, body);
                if (!has_external)
                        element(t, "no-endpoint-nodeports", "%s . %u comment \"%s\" : %s", proto, np, spn, ext_verdict);
        }

        /* §6.2 chains */
        char (*ep_bodies)[BODY_MAX] = NULL;
        if (e->n_all > 0) {
                ep_bodies = calloc(e->n_all, sizeof *ep_bodies);
                if (!ep_bodies)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < e->n_reachable; i++) {
                char eb[400];
                endpoint_base(base, e->reachable[i], eb, sizeof eb);
                name_body(eb, ep_bodies[e->reachable[i] - e->all]);
        }
        char chain[BODY_MAX + 16];
        bool masq = has_internal && (p->masquerade_all || p->detector != DETECTOR_NONE);
        if (uses_svc) {
                chain_decl(t, "service-", body);
                snprintf(chain, sizeof chain, "service-%s", body);
                lb_chain(t, chain, cip, masq && !e->internal_policy_local, s->affinity_client_ip, e->cluster,
                         e->n_cluster, ep_bodies, e->all);
        }
        if (uses_svl) {
                chain_decl(t, "local-", body);
                snprintf(chain, sizeof chain, "local-%s", body);
                lb_chain(t, chain, cip, masq && e->internal_policy_local, s->affinity_client_ip, e->local,
                         e->n_local, ep_bodies, e->all);
        }
        if (uses_ext) {
                chain_decl(t, "external-", body);
                snprintf(chain, sizeof chain, "external-%s", body);
                if (!e->external_policy_local) {
                        rule(t, chain, "jump mark-for-masquerade");
                        rule(t, chain, "goto service-%s", body);
                } else {
                        char local[96];
                        detector_match(t, true, local, sizeof local);
                        if (local[0])
                                rule(t, chain, "%s goto service-%s comment \"short-circuit pod traffic\"", local, body);
                        rule(t, chain, "fib saddr type local jump mark-for-masquerade comment \"masquerade local traffic\"");
                        rule(t, chain, "fib saddr type local goto service-%s comment \"short-circuit local traffic\"",
                             body);
                        if (has_external)
                                rule(t, chain, "goto local-%s", body);
                }
        }
        if (uses_fw) {
                struct buf list = BUF_INIT;
                char c[INET_CIDR_STRLEN];
                bool from_node = false;
                for (size_t i = 0; i < s->n_source_ranges; i++) {
                        const struct inet_cidr *r = &s->source_ranges[i];
                        if (r->addr.family != p->family)
                                continue;
                        buf_printf(&list, "%s%s", list.len ? " , " : "", inet_cidr_format(r, c));
                        from_node = from_node || inet_cidr_contains(r, &p->node_ip);
                }
                for (size_t i = 0; from_node && i < s->n_lb_ips; i++)
                        if (s->lb_ips[i].family == p->family)
                                buf_printf(&list, " , %s", inet_addr_format(&s->lb_ips[i], ip));
                chain_decl(t, "firewall-", body);
                snprintf(chain, sizeof chain, "firewall-%s", body);
                rule(t, chain, "%s saddr != { %s } drop", f, list.data);
                buf_done(&list);
        }
        for (size_t i = 0; i < e->n_reachable; i++) {
                const struct endpoint *ep = e->reachable[i];
                const char *b = ep_bodies[ep - e->all];
                if (s->affinity_client_ip)
                        buf_printf(&t->objs, "add set %s kube-proxy affinity-%s { type %s ; flags dynamic,timeout ; timeout %us ; }\n",
                                   f, b, t->addr, s->affinity_timeout);
                chain_decl(t, "endpoint-", b);
                snprintf(chain, sizeof chain, "endpoint-%s", b);
                rule(t, chain, "%s saddr %.*s jump mark-for-masquerade", f, (int) ep->ip_len, ep->str + ep->ip_off);
                if (s->affinity_client_ip)
                        rule(t, chain, "update @affinity-%s { %s saddr }", b, f);
                rule(t, chain, "meta l4proto %s dnat to %s", proto, ep->str);
        }
        free(ep_bodies);
        return 0;
}

int render_nftables(const struct model *m, const struct render_params *p, const struct inet_cidr *service_cidrs,
                    size_t n_service_cidrs, struct buf *out) {
        struct nft t = {
                .p = p,
                .fam = p->family == 6 ? "ip6" : "ip",
                .addr = p->family == 6 ? "ipv6_addr" : "ipv4_addr",
        };
        struct endpoint_filter f = {.node_name = p->node_name, .zone = p->node_zone,
                                    .prefer_same_node = p->prefer_same_node};
        size_t n_svcs;
        const struct svc **svcs = model_services_sorted(m, &n_svcs);
        int r = 0;

        fixed_part(&t, service_cidrs, n_service_cidrs);
        for (size_t i = 0; i < n_svcs && r == 0; i++) {
                const struct svc *s = svcs[i];
                const struct inet_addr *cip = NULL;
                size_t n_slices;
                for (size_t k = 0; k < s->n_cluster_ips; k++)
                        if (s->cluster_ips[k].family == p->family)
                                cip = &s->cluster_ips[k];
                if (!cip)
                        continue;
                const struct slice **slices = model_service_slices(m, s->key, &n_slices);
                for (size_t j = 0; j < s->n_ports && r == 0; j++) {
                        struct svc_port_endpoints e = {0};
                        r = endpoints_collect(s, &s->ports[j], p->family, slices, n_slices, &f, &e);
                        if (r == 0)
                                r = render_port(&t, s, &s->ports[j], &e, cip, j == 0);
                        endpoints_done(&e);
                }
                free(slices);
        }
        if (r == 0) {
                buf_put(out, t.objs.data, t.objs.len);
                buf_put(out, t.chains.data, t.chains.len);
                buf_put(out, t.rules.data, t.rules.len);
                buf_put(out, t.elems.data, t.elems.len);
        }
        free(svcs);
        buf_done(&t.objs);
        buf_done(&t.chains);
        buf_done(&t.rules);
        buf_done(&t.elems);
        return r;
}
