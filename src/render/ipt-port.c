/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One service port's iptables rules (docs/reference/iptables-mode.md §7): its
 * rules in the top-level chains, rewritten on every sync (§7.1-7.5), and
 * its own chains, written when the service changed (§7.6-7.10). What it
 * gets is decided once, by the port's plan (model/endpoints.h:
 * endpoints_plan()); this file writes it down, one function per section
 * of the reference. Every service port goes through here on a full sync,
 * so its common rules are written without printf.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model/endpoints.h"
#include "model/model.h"
#include "render/chain.h"
#include "render/ipt-port.h"
#include "render/render.h"
#include "util/buf.h"

static void comment(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void comment(struct buf *b, const char *fmt, ...) {
        char text[RENDER_IPT_SPN_MAX + 128];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        buf_puts(b, " -m comment --comment");
        buf_arg(b, text);
}

/* The comment "<pre><spn><post>" without printf: most rules carry one. */
static void comment_spn(struct buf *b, const char *pre, const char *spn, const char *post) {
        char text[RENDER_IPT_SPN_MAX + 128];
        size_t a = strlen(pre), n = strlen(spn), z = strlen(post);
        if (a + n + z >= sizeof text)
                n = sizeof text - 1 - a - z;    /* cannot happen: names are bounded */
        memcpy(text, pre, a);
        memcpy(text + a, spn, n);
        memcpy(text + a + n, post, z + 1);
        buf_puts(b, " -m comment --comment");
        buf_arg(b, text);
}

static void rule_start(struct buf *b, const char *chain) {
        buf_puts(b, "-A ");
        buf_puts(b, chain);
}

/* " -m tcp -p tcp -d 10.0.0.1 --dport 80" */
static void match_dest(struct buf *b, const char *proto, const char *ip, unsigned port) {
        buf_puts(b, " -m ");
        buf_puts(b, proto);
        buf_puts(b, " -p ");
        buf_puts(b, proto);
        buf_puts(b, " -d ");
        buf_puts(b, ip);
        buf_puts(b, " --dport ");
        buf_put_uint(b, port);
}

/* " -m tcp -p tcp --dport 30080" */
static void match_port(struct buf *b, const char *proto, unsigned port) {
        buf_puts(b, " -m ");
        buf_puts(b, proto);
        buf_puts(b, " -p ");
        buf_puts(b, proto);
        buf_puts(b, " --dport ");
        buf_put_uint(b, port);
}

/* " -j TARGET" and the end of the rule. */
static void jump(struct buf *b, const char *target) {
        buf_puts(b, " -j ");
        buf_puts(b, target);
        buf_putc(b, '\n');
}

/* 1/n with ten decimals, as upstream prints it; cached per render since
 * every SVC chain asks for the same few values. */
static const char *probability(struct render_ipt *t, size_t n) {
        if (n < RENDER_IPT_PROB_CACHE) {
                if (!t->prob[n][0])
                        snprintf(t->prob[n], sizeof t->prob[n], "%.10f", 1.0 / (double) n);
                return t->prob[n];
        }
        snprintf(t->prob[0], sizeof t->prob[0], "%.10f", 1.0 / (double) n);
        return t->prob[0];
}

static const char *sep_name(const struct render_ipt_port *c, const struct endpoint *e) {
        return c->sep_names + (size_t) (e - c->eps->all) * CHAIN_NAME_MAX;
}

/* §7: where internal (cluster IP) traffic goes, where the external chain
 * sends it on, and where load-balancer IPs' traffic goes first. */
static const char *internal_chain(const struct render_ipt_port *c) {
        return c->plan.internal_policy_local ? c->svl_chain : c->svc_chain;
}

static const char *external_policy_chain(const struct render_ipt_port *c) {
        return c->plan.external_policy_local ? c->svl_chain : c->svc_chain;
}

static const char *lb_chain(const struct render_ipt_port *c) {
        return c->plan.uses_firewall_chain ? c->fw_chain : c->ext_chain;
}

/* A filter rule for traffic with no endpoint to go to: "-A CHAIN" and its
 * comment; the caller writes the match, then block_target(). */
static void block_rule_start(struct buf *b, const char *chain, const struct render_ipt_port *c,
                             enum endpoints_block k) {
        rule_start(b, chain);
        comment_spn(b, "", c->spn, k == ENDPOINTS_REJECT ? " has no endpoints" : " has no local endpoints");
}

static const char *block_target(enum endpoints_block k) {
        return k == ENDPOINTS_REJECT ? "REJECT" : "DROP";
}

/* --- a service port's rules in the top-level chains (§7.1-7.5) --- */

/* §7.1 */
static void write_cluster_ip(struct render_ipt *t, const struct render_ipt_port *c) {
        const struct endpoints_plan *pl = &c->plan;
        unsigned port = c->port->port;

        if (pl->has_internal) {
                buf_puts(&t->nat_rules, "-A KUBE-SERVICES");
                comment_spn(&t->nat_rules, "", c->spn, " cluster IP");
                match_dest(&t->nat_rules, c->proto, c->cip, port);
                jump(&t->nat_rules, internal_chain(c));
        } else {
                block_rule_start(&t->filter_rules, "KUBE-SERVICES", c, pl->internal_block);
                match_dest(&t->filter_rules, c->proto, c->cip, port);
                jump(&t->filter_rules, block_target(pl->internal_block));
        }
}

/* §7.2 */
static void write_external_ips(struct render_ipt *t, const struct render_ipt_port *c) {
        const struct endpoints_plan *pl = &c->plan;
        const struct svc *s = c->svc;
        unsigned port = c->port->port;
        char ip[INET_ADDR_STRLEN];

        for (size_t i = 0; pl->n_external_ips > 0 && i < s->n_external_ips; i++) {
                if (s->external_ips[i].family != t->p->family)
                        continue;
                inet_addr_format(&s->external_ips[i], ip);
                if (pl->has_any) {
                        buf_puts(&t->nat_rules, "-A KUBE-SERVICES");
                        comment_spn(&t->nat_rules, "", c->spn, " external IP");
                        match_dest(&t->nat_rules, c->proto, ip, port);
                        jump(&t->nat_rules, c->ext_chain);
                }
                if (!pl->has_external) {
                        block_rule_start(&t->filter_rules, "KUBE-EXTERNAL-SERVICES", c, pl->external_block);
                        match_dest(&t->filter_rules, c->proto, ip, port);
                        jump(&t->filter_rules, block_target(pl->external_block));
                }
        }
}

/* §7.3 */
static void write_lb_ips(struct render_ipt *t, const struct render_ipt_port *c) {
        const struct endpoints_plan *pl = &c->plan;
        const struct svc *s = c->svc;
        unsigned port = c->port->port;
        char ip[INET_ADDR_STRLEN];

        if (pl->n_lb_ips == 0)
                return;
        for (size_t i = 0; i < s->n_lb_ips; i++) {
                if (s->lb_ips[i].family != t->p->family)
                        continue;
                inet_addr_format(&s->lb_ips[i], ip);
                if (pl->has_any) {
                        buf_puts(&t->nat_rules, "-A KUBE-SERVICES");
                        comment_spn(&t->nat_rules, "", c->spn, " loadbalancer IP");
                        match_dest(&t->nat_rules, c->proto, ip, port);
                        jump(&t->nat_rules, lb_chain(c));
                }
                if (pl->uses_firewall_chain) {
                        buf_puts(&t->filter_rules, "-A KUBE-PROXY-FIREWALL");
                        comment(&t->filter_rules, "%s traffic not accepted by %s", c->spn, c->fw_chain);
                        match_dest(&t->filter_rules, c->proto, ip, port);
                        buf_puts(&t->filter_rules, " -j DROP\n");
                }
        }
        if (!pl->has_external)
                for (size_t i = 0; i < s->n_lb_ips; i++) {
                        if (s->lb_ips[i].family != t->p->family)
                                continue;
                        block_rule_start(&t->filter_rules, "KUBE-EXTERNAL-SERVICES", c, pl->external_block);
                        match_dest(&t->filter_rules, c->proto, inet_addr_format(&s->lb_ips[i], ip), port);
                        jump(&t->filter_rules, block_target(pl->external_block));
                }
}

/* §7.4 */
static void write_node_port(struct render_ipt *t, const struct render_ipt_port *c) {
        const struct render_params *p = t->p;
        const struct endpoints_plan *pl = &c->plan;
        unsigned np = c->port->node_port;
        const char *proto = c->proto;

        if (np == 0)
                return;
        if (pl->has_any) {
                if (p->family == 4 && p->localhost_nodeports && p->nfacct) {
                        buf_puts(&t->nat_rules, "-A KUBE-NODEPORTS");
                        comment(&t->nat_rules, "%s", c->spn);
                        buf_printf(&t->nat_rules,
                                   " -m %s -p %s -d 127.0.0.0/8 --dport %u -m nfacct --nfacct-name "
                                   "localhost_nps_accepted_pkts -j %s\n",
                                   proto, proto, np, c->ext_chain);
                }
                buf_puts(&t->nat_rules, "-A KUBE-NODEPORTS");
                comment_spn(&t->nat_rules, "", c->spn, "");
                match_port(&t->nat_rules, proto, np);
                jump(&t->nat_rules, c->ext_chain);
        }
        if (!pl->has_external) {
                block_rule_start(&t->filter_rules, "KUBE-EXTERNAL-SERVICES", c, pl->external_block);
                buf_puts(&t->filter_rules, " -m addrtype --dst-type LOCAL");
                match_port(&t->filter_rules, proto, np);
                jump(&t->filter_rules, block_target(pl->external_block));
        }
}

/* §7.5 */
static void write_health_check(struct render_ipt *t, const struct render_ipt_port *c) {
        unsigned hcnp = c->svc->health_check_node_port;

        if (hcnp == 0)
                return;
        buf_puts(&t->filter_rules, "-A KUBE-NODEPORTS");
        comment(&t->filter_rules, "%s health check node port", c->spn);
        buf_printf(&t->filter_rules, " -m tcp -p tcp --dport %u -j ACCEPT\n", hcnp);
}

/* --- a service port's own chains (§7.6-7.10) --- */

static void note_owned(struct render_ipt *t, const char *chain) {
        if (t->sync) {
                buf_put(&t->cur, chain, strlen(chain) + 1);
                t->cur_names++;
        }
}

/* The port's chains: remembered as the service's, and declared. */
static void declare_own_chains(struct render_ipt *t, const struct render_ipt_port *c) {
        const struct endpoints_plan *pl = &c->plan;
        const struct svc_port_endpoints *e = c->eps;

        if (pl->uses_cluster_chain)
                note_owned(t, c->svc_chain);
        if (pl->uses_local_chain)
                note_owned(t, c->svl_chain);
        if (pl->uses_external_chain)
                note_owned(t, c->ext_chain);
        if (pl->uses_firewall_chain)
                note_owned(t, c->fw_chain);
        for (size_t i = 0; i < e->n_reachable; i++)
                note_owned(t, sep_name(c, e->reachable[i]));

        if (pl->uses_cluster_chain)
                render_ipt_chain_line(&t->nat_chains, c->svc_chain);
        if (pl->uses_local_chain)
                render_ipt_chain_line(&t->nat_chains, c->svl_chain);
        if (pl->uses_external_chain)
                render_ipt_chain_line(&t->nat_chains, c->ext_chain);
        if (pl->uses_firewall_chain)
                render_ipt_chain_line(&t->nat_chains, c->fw_chain);
}

/* §7.6: the internal chain's first rule. */
static void write_masq_internal(struct render_ipt *t, const struct render_ipt_port *c) {
        const struct render_params *p = t->p;

        if (!c->plan.masq_internal)
                return;
        rule_start(&t->nat_rules, internal_chain(c));
        comment_spn(&t->nat_rules, "", c->spn, " cluster IP");
        match_dest(&t->nat_rules, c->proto, c->cip, c->port->port);
        if (!p->masquerade_all) {
                buf_puts(&t->nat_rules, p->detector == DETECTOR_INTERFACE ? " ! -i " : " ! -s ");
                buf_puts(&t->nat_rules, p->detector_arg);
        }
        buf_puts(&t->nat_rules, " -j KUBE-MARK-MASQ\n");
}

/* §7.7 */
static void write_ext_chain(struct render_ipt *t, const struct render_ipt_port *c) {
        const struct render_params *p = t->p;
        const struct endpoints_plan *pl = &c->plan;
        struct buf *b = &t->nat_rules;

        if (!pl->uses_external_chain)
                return;
        if (pl->masq_external) {
                rule_start(b, c->ext_chain);
                comment_spn(b, "masquerade traffic for ", c->spn, " external destinations");
                buf_puts(b, " -j KUBE-MARK-MASQ\n");
        } else {
                if (pl->short_circuit_pods) {
                        rule_start(b, c->ext_chain);
                        comment_spn(b, "pod traffic for ", c->spn, " external destinations");
                        buf_puts(b, p->detector == DETECTOR_INTERFACE ? " -i " : " -s ");
                        buf_puts(b, p->detector_arg);
                        jump(b, c->svc_chain);
                }
                rule_start(b, c->ext_chain);
                comment_spn(b, "masquerade LOCAL traffic for ", c->spn, " external destinations");
                buf_puts(b, " -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ\n");
                rule_start(b, c->ext_chain);
                comment_spn(b, "route LOCAL traffic for ", c->spn, " external destinations");
                buf_puts(b, " -m addrtype --src-type LOCAL");
                jump(b, c->svc_chain);
        }
        if (pl->has_external) {
                rule_start(b, c->ext_chain);
                jump(b, external_policy_chain(c));
        }
}

/* §7.8 */
static void write_fw_chain(struct render_ipt *t, const struct render_ipt_port *c) {
        const struct render_params *p = t->p;
        const struct svc *s = c->svc;
        struct buf *b = &t->nat_rules;
        char ip[INET_ADDR_STRLEN], cidr[INET_CIDR_STRLEN];

        if (!c->plan.uses_firewall_chain)
                return;
        for (size_t i = 0; i < s->n_source_ranges; i++) {
                const struct inet_cidr *range = &s->source_ranges[i];
                if (range->addr.family != p->family)
                        continue;
                buf_printf(b, "-A %s", c->fw_chain);
                comment(b, "%s loadbalancer IP", c->spn);
                buf_printf(b, " -s %s -j %s\n", inet_cidr_format(range, cidr), c->ext_chain);
        }
        /* Traffic from the node to its own LB IP arrives with the LB IP
         * as source (it is a local address); let it through. */
        if (endpoints_lb_admits_node(s, p->family, &p->node_ip))
                for (size_t i = 0; i < s->n_lb_ips; i++) {
                        if (s->lb_ips[i].family != p->family)
                                continue;
                        buf_printf(b, "-A %s", c->fw_chain);
                        comment(b, "%s loadbalancer IP", c->spn);
                        buf_printf(b, " -s %s -j %s\n", inet_addr_format(&s->lb_ips[i], ip), c->ext_chain);
                }
        buf_printf(b, "-A %s", c->fw_chain);
        comment(b, "other traffic to %s will be dropped by KUBE-PROXY-FIREWALL", c->spn);
        buf_putc(b, '\n');
}

/* §7.9: the endpoint-selection rules of one SVC or SVL chain. */
static void write_lb_chain(struct render_ipt *t, const struct render_ipt_port *c, const char *chain,
                           struct endpoint *const *list, size_t n) {
        struct buf *b = &t->nat_rules;

        if (c->svc->affinity_client_ip)
                for (size_t i = 0; i < n; i++) {
                        const char *sep = sep_name(c, list[i]);
                        rule_start(b, chain);
                        if (!t->large) {
                                char text[RENDER_IPT_SPN_MAX + ENDPOINT_STRLEN + 8];
                                snprintf(text, sizeof text, "%s -> %s", c->spn, list[i]->str);
                                comment_spn(b, "", text, "");
                        }
                        buf_puts(b, " -m recent --name ");
                        buf_puts(b, sep);
                        buf_puts(b, " --rcheck --seconds ");
                        buf_put_uint(b, c->svc->affinity_timeout);
                        buf_puts(b, " --reap -j ");
                        buf_puts(b, sep);
                        buf_putc(b, '\n');
                }
        for (size_t i = 0; i < n; i++) {
                rule_start(b, chain);
                if (!t->large) {
                        char arrow[ENDPOINT_STRLEN + 8] = " -> ";
                        memcpy(arrow + 4, list[i]->str, strlen(list[i]->str) + 1);
                        comment_spn(b, "", c->spn, arrow);
                }
                if (i + 1 < n) {
                        buf_puts(b, " -m statistic --mode random --probability ");
                        buf_puts(b, probability(t, n - i));
                }
                buf_puts(b, " -j ");
                buf_puts(b, sep_name(c, list[i]));
                buf_putc(b, '\n');
        }
}

/* §7.10: one KUBE-SEP chain: hairpin masquerade, then DNAT. */
static void write_sep_chain(struct render_ipt *t, const struct render_ipt_port *c, const struct endpoint *e) {
        struct buf *b = &t->nat_rules;
        const char *sep = sep_name(c, e);

        render_ipt_chain_line(&t->nat_chains, sep);
        rule_start(b, sep);
        if (!t->large)
                comment_spn(b, "", c->spn, "");
        buf_puts(b, " -s ");
        buf_put(b, e->str + e->ip_off, e->ip_len);
        buf_puts(b, " -j KUBE-MARK-MASQ\n");
        rule_start(b, sep);
        if (!t->large)
                comment_spn(b, "", c->spn, "");
        if (c->svc->affinity_client_ip) {
                buf_puts(b, " -m recent --name ");
                buf_puts(b, sep);
                buf_puts(b, " --set");
        }
        buf_puts(b, " -m ");
        buf_puts(b, c->proto);
        buf_puts(b, " -p ");
        buf_puts(b, c->proto);
        buf_puts(b, " -j DNAT --to-destination ");
        buf_puts(b, e->str);
        buf_putc(b, '\n');
}

/* §7.6-7.10, counted as the service's. */
static void write_own_chains(struct render_ipt *t, const struct render_ipt_port *c) {
        const struct endpoints_plan *pl = &c->plan;
        const struct svc_port_endpoints *e = c->eps;
        size_t rules_from = t->nat_rules.len;

        declare_own_chains(t, c);
        write_masq_internal(t, c);
        write_ext_chain(t, c);
        write_fw_chain(t, c);
        if (pl->uses_cluster_chain)
                write_lb_chain(t, c, c->svc_chain, e->cluster, e->n_cluster);
        if (pl->uses_local_chain)
                write_lb_chain(t, c, c->svl_chain, e->local, e->n_local);
        for (size_t i = 0; i < e->n_reachable; i++)
                write_sep_chain(t, c, e->reachable[i]);

        size_t n = render_ipt_count_rules(&t->nat_rules, rules_from);
        t->own_rules += n;
        t->cur_rules += (uint32_t) n;
}

/* A partial sync leaves the own chains of unchanged services alone
 * (!own_chains): as the kernel holds them, and as the owned list remembers
 * them (names and rule count). */
void render_ipt_port(struct render_ipt *t, const struct render_ipt_port *c, bool own_chains) {
        t->no_local_internal += c->plan.internal_block == ENDPOINTS_DROP;
        t->no_local_external += c->plan.external_block == ENDPOINTS_DROP;
        write_cluster_ip(t, c);
        write_external_ips(t, c);
        write_lb_ips(t, c);
        write_node_port(t, c);
        write_health_check(t, c);
        if (own_chains)
                write_own_chains(t, c);
}

void render_ipt_port_init(const struct render_ipt *t, struct render_ipt_port *c, const struct svc *s,
                          const struct svc_port *port, const struct svc_port_endpoints *eps,
                          const struct inet_addr *cip, bool own_chains) {
        c->svc = s;
        c->port = port;
        c->eps = eps;
        endpoints_plan(s, t->p->family, eps, &t->masq, &c->plan);
        if (port->name[0])
                snprintf(c->spn, sizeof c->spn, "%s:%s", s->key, port->name);
        else
                snprintf(c->spn, sizeof c->spn, "%s", s->key);
        c->proto = l4_proto_to_lower(port->proto);
        inet_addr_format(cip, c->cip);
        chain_hash(c->spn, c->proto, NULL, c->hash);
        snprintf(c->svc_chain, CHAIN_NAME_MAX, "KUBE-SVC-%s", c->hash);
        snprintf(c->svl_chain, CHAIN_NAME_MAX, "KUBE-SVL-%s", c->hash);
        snprintf(c->ext_chain, CHAIN_NAME_MAX, "KUBE-EXT-%s", c->hash);
        snprintf(c->fw_chain, CHAIN_NAME_MAX, "KUBE-FW-%s", c->hash);
        /* SEP names only for endpoints that get chains (reachable); the
         * cluster and local lists are subsets of those; the top-level
         * rules need none. */
        for (size_t i = 0; own_chains && i < eps->n_reachable; i++) {
                char h[CHAIN_HASH_LEN + 1];
                const struct endpoint *e = eps->reachable[i];
                chain_hash(c->spn, c->proto, e->str, h);
                memcpy(c->sep_names + (size_t) (e - eps->all) * CHAIN_NAME_MAX, "KUBE-SEP-", 9);
                memcpy(c->sep_names + (size_t) (e - eps->all) * CHAIN_NAME_MAX + 9, h, CHAIN_HASH_LEN + 1);
        }
}
