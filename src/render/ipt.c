/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the iptables renderer: write exactly what upstream
 * kube-proxy's iptables proxier writes (reference/iptables-mode.md §4-§9),
 * rule for rule and comment for comment, in a deterministic order: services
 * by namespace/name, ports in spec order. Chain declarations and rules are
 * collected in separate buffers per table, because iptables-restore wants
 * every ":CHAIN" line before the rules that use it.
 *
 * Every string written here is either a constant, a number, an address
 * formatted from its binary form, or a name validated by kube/decode.c, so
 * no escaping beyond the comment quoting of buf_arg() is ever needed.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/endpoints.h"
#include "model/model.h"
#include "render/chain.h"
#include "render/render.h"
#include "util/buf.h"
#include "util/hmap.h"

#define SPN_MAX 340
#define PROB_CACHE 128

struct ipt {
        const struct render_params *p;
        struct buf filter_chains, filter_rules;
        struct buf nat_chains, nat_rules;
        bool large;             /* large-cluster mode: no per-endpoint comments */
        struct render_ipt_sync *sync;   /* may be NULL */
        /* With sync: what each service rendered now owns. */
        struct hmap fresh;              /* service key -> struct owned_svc */
        struct buf cur;                 /* the service being rendered: key, names */
        uint32_t cur_rules, cur_names;
        size_t own_rules;               /* rules of the services' own chains, all written now */
        size_t no_local_internal, no_local_external;
        char prob[PROB_CACHE][16];
};

/* One service port being rendered, with the names its rules share. */
struct port_ctx {
        const struct svc *svc;
        const struct svc_port *port;
        const struct svc_port_endpoints *eps;
        char spn[SPN_MAX];      /* "ns/name:port" or "ns/name" */
        const char *proto;      /* "tcp" */
        char cip[INET_ADDR_STRLEN];
        char hash[CHAIN_HASH_LEN + 1];
        char svc_chain[CHAIN_NAME_MAX], svl_chain[CHAIN_NAME_MAX];
        char ext_chain[CHAIN_NAME_MAX], fw_chain[CHAIN_NAME_MAX];
        char *sep_names;        /* KUBE-SEP names, CHAIN_NAME_MAX apart, one per eps->all */
};

/* One service's own chains: its key, then the chain names, each
 * NUL-terminated, in one allocation. */
struct owned_svc {
        uint32_t n_rules, n_names;
        char data[];
};

struct ipt_owned {
        struct hmap svcs;       /* service key (in the entry) -> struct owned_svc */
        size_t n_chains, n_rules;
};

static const char *owned_names(const struct owned_svc *o) {
        return o->data + strlen(o->data) + 1;
}

struct ipt_owned *ipt_owned_new(void) {
        return calloc(1, sizeof(struct ipt_owned));
}

static void owned_clear(struct hmap *svcs) {
        void *v;
        for (size_t i = 0; hmap_next(svcs, &i, NULL, &v);)
                free(v);
        hmap_done(svcs);
}

void ipt_owned_free(struct ipt_owned *o) {
        if (!o)
                return;
        owned_clear(&o->svcs);
        free(o);
}

size_t ipt_owned_chains(const struct ipt_owned *o) {
        return o ? o->n_chains : 0;
}

size_t ipt_owned_rules(const struct ipt_owned *o) {
        return o ? o->n_rules : 0;
}

static void comment(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void comment(struct buf *b, const char *fmt, ...) {
        char text[SPN_MAX + 128];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        buf_puts(b, " -m comment --comment");
        buf_arg(b, text);
}

/* The comment "<pre><spn><post>" without printf: most rules carry one. */
static void comment_spn(struct buf *b, const char *pre, const char *spn, const char *post) {
        char text[SPN_MAX + 128];
        size_t a = strlen(pre), n = strlen(spn), z = strlen(post);
        if (a + n + z >= sizeof text)
                n = sizeof text - 1 - a - z;    /* cannot happen: names are bounded */
        memcpy(text, pre, a);
        memcpy(text + a, spn, n);
        memcpy(text + a + n, post, z + 1);
        buf_puts(b, " -m comment --comment");
        buf_arg(b, text);
}

static void chain_line(struct buf *b, const char *chain) {
        buf_putc(b, ':');
        buf_puts(b, chain);
        buf_puts(b, " - [0:0]\n");
}

static void rule_start(struct buf *b, const char *chain) {
        buf_puts(b, "-A ");
        buf_puts(b, chain);
}

/* "-m tcp -p tcp -d 10.0.0.1 --dport 80" */
static void match_dest(struct buf *b, const char *proto, const char *ip, unsigned port) {
        buf_printf(b, " -m %s -p %s -d %s --dport %u", proto, proto, ip, port);
}

/* 1/n with ten decimals, as upstream prints it; cached per render since
 * every SVC chain asks for the same few values. */
static const char *probability(struct ipt *t, size_t n) {
        if (n < PROB_CACHE) {
                if (!t->prob[n][0])
                        snprintf(t->prob[n], sizeof t->prob[n], "%.10f", 1.0 / (double) n);
                return t->prob[n];
        }
        snprintf(t->prob[0], sizeof t->prob[0], "%.10f", 1.0 / (double) n);
        return t->prob[0];
}

static size_t family_count(const struct inet_addr *in, size_t n, uint8_t family) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                k += in[i].family == family;
        return k;
}

static const char *sep_name(const struct port_ctx *c, const struct endpoint *e) {
        return c->sep_names + (size_t) (e - c->eps->all) * CHAIN_NAME_MAX;
}

/* Writes the endpoint-selection rules of one SVC or SVL chain (§7.9). */
static void write_lb_chain(struct ipt *t, const struct port_ctx *c, const char *chain,
                           struct endpoint *const *list, size_t n) {
        struct buf *b = &t->nat_rules;

        if (c->svc->affinity_client_ip)
                for (size_t i = 0; i < n; i++) {
                        const char *sep = sep_name(c, list[i]);
                        rule_start(b, chain);
                        if (!t->large) {
                                char text[SPN_MAX + ENDPOINT_STRLEN + 8];
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
static void write_sep_chain(struct ipt *t, const struct port_ctx *c, const struct endpoint *e) {
        struct buf *b = &t->nat_rules;
        const char *sep = sep_name(c, e);

        chain_line(&t->nat_chains, sep);
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

static size_t count_rules(const struct buf *b, size_t from);

static void note_owned(struct ipt *t, const char *chain) {
        if (t->sync) {
                buf_put(&t->cur, chain, strlen(chain) + 1);
                t->cur_names++;
        }
}

static void render_port(struct ipt *t, struct port_ctx *c, bool own_chains) {
        const struct render_params *p = t->p;
        const struct svc_port_endpoints *e = c->eps;
        const struct svc *s = c->svc;
        size_t n_lb = family_count(s->lb_ips, s->n_lb_ips, p->family);
        size_t n_ranges = 0;
        char ip[INET_ADDR_STRLEN], cidr[INET_CIDR_STRLEN];
        unsigned port = c->port->port, np = c->port->node_port;
        const char *proto = c->proto;

        for (size_t i = 0; i < s->n_source_ranges; i++)
                n_ranges += s->source_ranges[i].addr.family == p->family;

        bool has_any = e->has_any;
        bool has_internal = has_any && !(e->internal_policy_local && e->n_local == 0);
        bool has_external = has_any && !(e->external_policy_local && e->n_local == 0);
        bool uses_svc = e->n_cluster > 0 && e->uses_cluster;
        bool uses_svl = e->n_local > 0 && e->uses_local;
        bool uses_ext = has_any && e->externally_accessible;
        bool uses_fw = has_any && n_lb > 0 && n_ranges > 0;
        const char *internal_chain = e->internal_policy_local ? c->svl_chain : c->svc_chain;
        const char *external_policy_chain = e->external_policy_local ? c->svl_chain : c->svc_chain;
        const char *lb_chain = uses_fw ? c->fw_chain : c->ext_chain;
        const char *int_target = NULL, *ext_target = NULL;
        char int_comment[SPN_MAX + 32], ext_comment[SPN_MAX + 32];

        if (!has_any) {
                int_target = ext_target = "REJECT";
                snprintf(int_comment, sizeof int_comment, "%s has no endpoints", c->spn);
                snprintf(ext_comment, sizeof ext_comment, "%s has no endpoints", c->spn);
        } else {
                if (!has_internal) {
                        t->no_local_internal++;
                        int_target = "DROP";
                        snprintf(int_comment, sizeof int_comment, "%s has no local endpoints", c->spn);
                }
                if (!has_external) {
                        t->no_local_external++;
                        ext_target = "DROP";
                        snprintf(ext_comment, sizeof ext_comment, "%s has no local endpoints", c->spn);
                }
        }

        /* §7.1 cluster IP */
        if (has_internal) {
                buf_puts(&t->nat_rules, "-A KUBE-SERVICES");
                comment(&t->nat_rules, "%s cluster IP", c->spn);
                match_dest(&t->nat_rules, proto, c->cip, port);
                buf_printf(&t->nat_rules, " -j %s\n", internal_chain);
        } else {
                buf_puts(&t->filter_rules, "-A KUBE-SERVICES");
                comment(&t->filter_rules, "%s", int_comment);
                match_dest(&t->filter_rules, proto, c->cip, port);
                buf_printf(&t->filter_rules, " -j %s\n", int_target);
        }

        /* §7.2 external IPs */
        for (size_t i = 0; i < s->n_external_ips; i++) {
                if (s->external_ips[i].family != p->family)
                        continue;
                inet_addr_format(&s->external_ips[i], ip);
                if (has_any) {
                        buf_puts(&t->nat_rules, "-A KUBE-SERVICES");
                        comment(&t->nat_rules, "%s external IP", c->spn);
                        match_dest(&t->nat_rules, proto, ip, port);
                        buf_printf(&t->nat_rules, " -j %s\n", c->ext_chain);
                }
                if (!has_external) {
                        buf_puts(&t->filter_rules, "-A KUBE-EXTERNAL-SERVICES");
                        comment(&t->filter_rules, "%s", ext_comment);
                        match_dest(&t->filter_rules, proto, ip, port);
                        buf_printf(&t->filter_rules, " -j %s\n", ext_target);
                }
        }

        /* §7.3 load-balancer IPs */
        for (size_t i = 0; i < s->n_lb_ips; i++) {
                if (s->lb_ips[i].family != p->family)
                        continue;
                inet_addr_format(&s->lb_ips[i], ip);
                if (has_any) {
                        buf_puts(&t->nat_rules, "-A KUBE-SERVICES");
                        comment(&t->nat_rules, "%s loadbalancer IP", c->spn);
                        match_dest(&t->nat_rules, proto, ip, port);
                        buf_printf(&t->nat_rules, " -j %s\n", lb_chain);
                }
                if (uses_fw) {
                        buf_puts(&t->filter_rules, "-A KUBE-PROXY-FIREWALL");
                        comment(&t->filter_rules, "%s traffic not accepted by %s", c->spn, c->fw_chain);
                        match_dest(&t->filter_rules, proto, ip, port);
                        buf_puts(&t->filter_rules, " -j DROP\n");
                }
        }
        if (!has_external)
                for (size_t i = 0; i < s->n_lb_ips; i++) {
                        if (s->lb_ips[i].family != p->family)
                                continue;
                        buf_puts(&t->filter_rules, "-A KUBE-EXTERNAL-SERVICES");
                        comment(&t->filter_rules, "%s", ext_comment);
                        match_dest(&t->filter_rules, proto, inet_addr_format(&s->lb_ips[i], ip), port);
                        buf_printf(&t->filter_rules, " -j %s\n", ext_target);
                }

        /* §7.4 NodePort */
        if (np != 0) {
                if (has_any) {
                        if (p->family == 4 && p->localhost_nodeports && p->nfacct) {
                                buf_puts(&t->nat_rules, "-A KUBE-NODEPORTS");
                                comment(&t->nat_rules, "%s", c->spn);
                                buf_printf(&t->nat_rules,
                                           " -m %s -p %s -d 127.0.0.0/8 --dport %u -m nfacct --nfacct-name "
                                           "localhost_nps_accepted_pkts -j %s\n",
                                           proto, proto, np, c->ext_chain);
                        }
                        buf_puts(&t->nat_rules, "-A KUBE-NODEPORTS");
                        comment(&t->nat_rules, "%s", c->spn);
                        buf_printf(&t->nat_rules, " -m %s -p %s --dport %u -j %s\n", proto, proto, np,
                                   c->ext_chain);
                }
                if (!has_external) {
                        buf_puts(&t->filter_rules, "-A KUBE-EXTERNAL-SERVICES");
                        comment(&t->filter_rules, "%s", ext_comment);
                        buf_printf(&t->filter_rules, " -m addrtype --dst-type LOCAL -m %s -p %s --dport %u -j %s\n",
                                   proto, proto, np, ext_target);
                }
        }

        /* §7.5 health-check node port */
        if (s->health_check_node_port != 0) {
                buf_puts(&t->filter_rules, "-A KUBE-NODEPORTS");
                comment(&t->filter_rules, "%s health check node port", c->spn);
                buf_printf(&t->filter_rules, " -m tcp -p tcp --dport %u -j ACCEPT\n", s->health_check_node_port);
        }

        /* §7.6-7.10: the service port's own chains. A partial sync leaves
         * those of unchanged services alone: as the kernel holds them, and
         * as the owned list remembers them (names and rule count). */
        if (!own_chains)
                return;
        size_t rules_from = t->nat_rules.len;
        if (uses_svc)
                note_owned(t, c->svc_chain);
        if (uses_svl)
                note_owned(t, c->svl_chain);
        if (uses_ext)
                note_owned(t, c->ext_chain);
        if (uses_fw)
                note_owned(t, c->fw_chain);
        for (size_t i = 0; i < e->n_reachable; i++)
                note_owned(t, sep_name(c, e->reachable[i]));

        if (uses_svc)
                chain_line(&t->nat_chains, c->svc_chain);
        if (uses_svl)
                chain_line(&t->nat_chains, c->svl_chain);
        if (uses_ext)
                chain_line(&t->nat_chains, c->ext_chain);
        if (uses_fw)
                chain_line(&t->nat_chains, c->fw_chain);

        if (has_internal && (p->masquerade_all || p->detector != DETECTOR_NONE)) {
                buf_printf(&t->nat_rules, "-A %s", internal_chain);
                comment(&t->nat_rules, "%s cluster IP", c->spn);
                match_dest(&t->nat_rules, proto, c->cip, port);
                if (!p->masquerade_all)
                        buf_printf(&t->nat_rules, " ! %s %s", p->detector == DETECTOR_INTERFACE ? "-i" : "-s",
                                   p->detector_arg);
                buf_puts(&t->nat_rules, " -j KUBE-MARK-MASQ\n");
        }

        if (uses_ext) {
                struct buf *b = &t->nat_rules;
                if (!e->external_policy_local) {
                        buf_printf(b, "-A %s", c->ext_chain);
                        comment(b, "masquerade traffic for %s external destinations", c->spn);
                        buf_puts(b, " -j KUBE-MARK-MASQ\n");
                } else {
                        if (p->detector != DETECTOR_NONE) {
                                buf_printf(b, "-A %s", c->ext_chain);
                                comment(b, "pod traffic for %s external destinations", c->spn);
                                buf_printf(b, " %s %s -j %s\n", p->detector == DETECTOR_INTERFACE ? "-i" : "-s",
                                           p->detector_arg, c->svc_chain);
                        }
                        buf_printf(b, "-A %s", c->ext_chain);
                        comment(b, "masquerade LOCAL traffic for %s external destinations", c->spn);
                        buf_puts(b, " -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ\n");
                        buf_printf(b, "-A %s", c->ext_chain);
                        comment(b, "route LOCAL traffic for %s external destinations", c->spn);
                        buf_printf(b, " -m addrtype --src-type LOCAL -j %s\n", c->svc_chain);
                }
                if (has_external)
                        buf_printf(b, "-A %s -j %s\n", c->ext_chain, external_policy_chain);
        }

        if (uses_fw) {
                struct buf *b = &t->nat_rules;
                bool allow_from_node = false;
                for (size_t i = 0; i < s->n_source_ranges; i++) {
                        const struct inet_cidr *range = &s->source_ranges[i];
                        if (range->addr.family != p->family)
                                continue;
                        buf_printf(b, "-A %s", c->fw_chain);
                        comment(b, "%s loadbalancer IP", c->spn);
                        buf_printf(b, " -s %s -j %s\n", inet_cidr_format(range, cidr), c->ext_chain);
                        if (inet_cidr_contains(range, &p->node_ip))
                                allow_from_node = true;
                }
                /* Traffic from the node to its own LB IP arrives with the LB IP
                 * as source (it is a local address); let it through. */
                if (allow_from_node)
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

        if (uses_svc)
                write_lb_chain(t, c, c->svc_chain, e->cluster, e->n_cluster);
        if (uses_svl)
                write_lb_chain(t, c, c->svl_chain, e->local, e->n_local);
        for (size_t i = 0; i < e->n_reachable; i++)
                write_sep_chain(t, c, e->reachable[i]);

        size_t n = count_rules(&t->nat_rules, rules_from);
        t->own_rules += n;
        t->cur_rules += (uint32_t) n;
}

/* own_chains: the port's SEP chains are named too (hashed), for its own
 * chains; the top-level rules need only the others. */
static void port_ctx_init(struct port_ctx *c, const struct svc *s, const struct svc_port *port,
                          const struct svc_port_endpoints *eps, const struct inet_addr *cip, bool own_chains) {
        c->svc = s;
        c->port = port;
        c->eps = eps;
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
         * cluster and local lists are subsets of those. */
        for (size_t i = 0; own_chains && i < eps->n_reachable; i++) {
                char h[CHAIN_HASH_LEN + 1];
                const struct endpoint *e = eps->reachable[i];
                chain_hash(c->spn, c->proto, e->str, h);
                memcpy(c->sep_names + (size_t) (e - eps->all) * CHAIN_NAME_MAX, "KUBE-SEP-", 9);
                memcpy(c->sep_names + (size_t) (e - eps->all) * CHAIN_NAME_MAX + 9, h, CHAIN_HASH_LEN + 1);
        }
}

/* All service ports of the family, with their endpoints, collected before
 * rendering because large-cluster mode depends on the total. */
struct collected {
        const struct svc *svc;
        const struct svc_port *port;
        const struct inet_addr *cip;
        struct svc_port_endpoints eps;
};

static void write_delete(struct ipt *t, const char *chain) {
        chain_line(&t->nat_chains, chain);
        buf_puts(&t->nat_rules, "-X ");
        buf_puts(&t->nat_rules, chain);
        buf_putc(&t->nat_rules, '\n');
}

/* The service just rendered (its ports' chains in t->cur) becomes an entry
 * of t->fresh. Returns -ENOMEM. */
static int owned_finish(struct ipt *t, const char *key) {
        int r = 0;
        if (t->cur_names > 0) {
                size_t klen = strlen(key) + 1;
                struct owned_svc *o = malloc(sizeof *o + klen + t->cur.len);
                if (!o) {
                        r = -ENOMEM;
                } else {
                        o->n_rules = t->cur_rules;
                        o->n_names = t->cur_names;
                        memcpy(o->data, key, klen);
                        memcpy(o->data + klen, t->cur.data, t->cur.len);
                        hmap_put(&t->fresh, o->data, o);
                }
        }
        buf_clear(&t->cur);
        t->cur_rules = t->cur_names = 0;
        return r;
}

static bool owned_has(const struct owned_svc *o, const struct hmap *index, const char *name) {
        if (!o)
                return false;
        if (index->len > 0)
                return hmap_get(index, name) != NULL;
        const char *q = owned_names(o);
        for (uint32_t i = 0; i < o->n_names; i++, q += strlen(q) + 1)
                if (strcmp(q, name) == 0)
                        return true;
        return false;
}

/* A full sync: the owned chains in the kernel that no rule uses any more
 * are flushed and deleted in the same transaction (§10.5), and what was
 * rendered becomes the owned list. */
static void owned_replace(struct ipt *t) {
        struct ipt_owned *owned = t->sync->owned;
        const struct hmap *existing = t->sync->existing;
        struct hmap used = HMAP_INIT;
        const char *k;
        void *v;

        if (existing && existing->len > 0) {
                for (size_t i = 0; hmap_next(&t->fresh, &i, NULL, &v);) {
                        const struct owned_svc *o = v;
                        const char *q = owned_names(o);
                        for (uint32_t j = 0; j < o->n_names; j++, q += strlen(q) + 1)
                                hmap_put(&used, q, (void *) q);
                }
                for (size_t i = 0; hmap_next(existing, &i, &k, NULL);)
                        if (!hmap_get(&used, k))
                                write_delete(t, k);
        }
        hmap_done(&used);
        if (!owned)
                return;
        owned_clear(&owned->svcs);
        owned->svcs = t->fresh;
        t->fresh = (struct hmap) HMAP_INIT;
        owned->n_chains = owned->n_rules = 0;
        for (size_t i = 0; hmap_next(&owned->svcs, &i, NULL, &v);) {
                const struct owned_svc *o = v;
                owned->n_chains += o->n_names;
                owned->n_rules += o->n_rules;
        }
}

/* A partial sync: a changed service's chains that it no longer uses (all
 * of them, once it is gone) are flushed and deleted, and its entry of the
 * owned list is replaced. */
static void owned_update(struct ipt *t) {
        struct ipt_owned *owned = t->sync->owned;
        const char *k;

        for (size_t i = 0; hmap_next(t->sync->changed, &i, &k, NULL);) {
                struct owned_svc *old = hmap_get(&owned->svcs, k);
                struct owned_svc *now = hmap_remove(&t->fresh, k);
                struct hmap index = HMAP_INIT;
                if (old) {
                        /* Names of a large service are looked up in a map. */
                        if (now && now->n_names > 16) {
                                const char *q = owned_names(now);
                                for (uint32_t j = 0; j < now->n_names; j++, q += strlen(q) + 1)
                                        hmap_put(&index, q, (void *) q);
                        }
                        const char *q = owned_names(old);
                        for (uint32_t j = 0; j < old->n_names; j++, q += strlen(q) + 1)
                                if (!owned_has(now, &index, q))
                                        write_delete(t, q);
                        hmap_done(&index);
                        owned->n_chains -= old->n_names;
                        owned->n_rules -= old->n_rules;
                        hmap_remove(&owned->svcs, k);
                        free(old);
                }
                if (now) {
                        hmap_put(&owned->svcs, now->data, now);
                        owned->n_chains += now->n_names;
                        owned->n_rules += now->n_rules;
                }
        }
}

/* Rules ("-A" lines) in b from offset from, which starts a line. */
static size_t count_rules(const struct buf *b, size_t from) {
        size_t n = 0;
        const char *p = b->data + from, *end = b->data + b->len;
        while (p < end) {
                if (end - p >= 2 && p[0] == '-' && p[1] == 'A')
                        n++;
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                if (!nl)
                        break;
                p = nl + 1;
        }
        return n;
}

int render_iptables(const struct model *m, const struct render_params *p, struct render_ipt_sync *sync,
                    struct buf *out) {
        struct ipt t = {.p = p, .sync = sync};
        struct endpoint_filter f = {
                .node_name = p->node_name,
                .zone = p->node_zone,
                .prefer_same_node = p->prefer_same_node,
        };
        struct collected *all = NULL;
        size_t n_all = 0, cap = 0, total_eps = 0, n_svcs;
        const struct svc **svcs = model_services_sorted(m, &n_svcs);
        int r = 0;

        if (!svcs && n_svcs > 0)
                return -ENOMEM;
        for (size_t i = 0; i < n_svcs; i++) {
                const struct svc *s = svcs[i];
                const struct inet_addr *cip = svc_cluster_ip(s, p->family);
                size_t n_slices;
                if (!cip)
                        continue;
                const struct slice **slices = model_service_slices(m, s->key, &n_slices);
                for (size_t j = 0; j < s->n_ports; j++) {
                        if (n_all == cap) {
                                cap = cap ? cap * 2 : 64;
                                struct collected *tmp = realloc(all, cap * sizeof *all);
                                if (!tmp) {
                                        r = -ENOMEM;
                                        free(slices);
                                        goto out;
                                }
                                all = tmp;
                        }
                        struct collected *cl = &all[n_all];
                        *cl = (struct collected) {s, &s->ports[j], cip, {0}};
                        r = endpoints_collect(s, &s->ports[j], p->family, slices, n_slices, &f, &cl->eps);
                        if (r < 0) {
                                free(slices);
                                goto out;
                        }
                        n_all++;
                        total_eps += cl->eps.n_all;
                }
                free(slices);
        }
        t.large = total_eps > p->large_cluster_endpoints;

        /* Fixed chains (§9) and their fixed rules (§4). */
        chain_line(&t.filter_chains, "KUBE-SERVICES");
        chain_line(&t.filter_chains, "KUBE-EXTERNAL-SERVICES");
        chain_line(&t.filter_chains, "KUBE-FORWARD");
        chain_line(&t.filter_chains, "KUBE-NODEPORTS");
        chain_line(&t.filter_chains, "KUBE-PROXY-FIREWALL");
        if (p->family == 4 && p->localhost_nodeports) {
                chain_line(&t.filter_chains, "KUBE-FIREWALL");
                buf_puts(&t.filter_rules, "-A KUBE-FIREWALL");
                comment(&t.filter_rules, "block incoming localnet connections");
                buf_puts(&t.filter_rules,
                         " -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP\n");
        }
        chain_line(&t.nat_chains, "KUBE-SERVICES");
        chain_line(&t.nat_chains, "KUBE-NODEPORTS");
        chain_line(&t.nat_chains, "KUBE-POSTROUTING");
        chain_line(&t.nat_chains, "KUBE-MARK-MASQ");
        buf_printf(&t.nat_rules, "-A KUBE-POSTROUTING -m mark ! --mark %s/%s -j RETURN\n", p->mark, p->mark);
        buf_printf(&t.nat_rules, "-A KUBE-POSTROUTING -j MARK --xor-mark %s\n", p->mark);
        buf_puts(&t.nat_rules, "-A KUBE-POSTROUTING");
        comment(&t.nat_rules, "kubernetes service traffic requiring SNAT");
        buf_printf(&t.nat_rules, " -j MASQUERADE%s\n", p->random_fully ? " --random-fully" : "");
        buf_printf(&t.nat_rules, "-A KUBE-MARK-MASQ -j MARK --or-mark %s\n", p->mark);

        size_t max_eps = 0;
        for (size_t i = 0; i < n_all; i++)
                if (all[i].eps.n_all > max_eps)
                        max_eps = all[i].eps.n_all;
        char *sep_names = malloc((max_eps + 1) * CHAIN_NAME_MAX);
        if (!sep_names) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < n_all; i++) {
                struct port_ctx c = {.sep_names = sep_names};
                bool own = !sync || !sync->changed || hmap_get(sync->changed, all[i].svc->key);
                port_ctx_init(&c, all[i].svc, all[i].port, &all[i].eps, all[i].cip, own);
                render_port(&t, &c, own);
                /* A service's ports are consecutive: its last one closes its entry. */
                if (own && sync && (i + 1 == n_all || all[i + 1].svc != all[i].svc) &&
                    owned_finish(&t, all[i].svc->key) < 0) {
                        r = -ENOMEM;
                        free(sep_names);
                        goto out;
                }
        }
        free(sep_names);

        /* A partial sync without the owned list deletes nothing. */
        if (sync && !sync->changed)
                owned_replace(&t);
        else if (sync && sync->owned)
                owned_update(&t);

        /* §7.11: NodePort dispatch is the last rule of nat KUBE-SERVICES. */
        if (p->nodeports_match_all) {
                buf_puts(&t.nat_rules, "-A KUBE-SERVICES");
                comment(&t.nat_rules, "kubernetes service nodeports; NOTE: this must be the last rule in this chain");
                buf_puts(&t.nat_rules, " -m addrtype --dst-type LOCAL");
                if (p->family == 6)
                        buf_puts(&t.nat_rules, " ! -d ::1/128");
                else if (!p->localhost_nodeports)
                        buf_puts(&t.nat_rules, " ! -d 127.0.0.0/8");
                buf_puts(&t.nat_rules, " -j KUBE-NODEPORTS\n");
        } else {
                char ip[INET_ADDR_STRLEN];
                for (size_t i = 0; i < p->n_nodeport_ips; i++) {
                        buf_puts(&t.nat_rules, "-A KUBE-SERVICES");
                        comment(&t.nat_rules,
                                "kubernetes service nodeports; NOTE: this must be the last rule in this chain");
                        buf_printf(&t.nat_rules, " -d %s -j KUBE-NODEPORTS\n",
                                   inet_addr_format(&p->nodeport_ips[i], ip));
                }
        }

        /* §4.4 KUBE-FORWARD, last in filter. */
        if (!p->tcp_be_liberal)
                buf_printf(&t.filter_rules, "-A KUBE-FORWARD -m conntrack --ctstate INVALID%s -j DROP\n",
                           p->nfacct ? " -m nfacct --nfacct-name ct_state_invalid_dropped_pkts" : "");
        buf_puts(&t.filter_rules, "-A KUBE-FORWARD");
        comment(&t.filter_rules, "kubernetes forwarding rules");
        buf_printf(&t.filter_rules, " -m mark --mark %s/%s -j ACCEPT\n", p->mark, p->mark);
        buf_puts(&t.filter_rules, "-A KUBE-FORWARD");
        comment(&t.filter_rules, "kubernetes forwarding conntrack rule");
        buf_puts(&t.filter_rules, " -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n");

        if (sync) {
                sync->n_filter_rules = count_rules(&t.filter_rules, 0);
                sync->n_nat_rules = count_rules(&t.nat_rules, 0);
                /* The top-level rules are all written; of the services' own,
                 * the owned list has the total. */
                sync->n_nat_rules_total = sync->n_nat_rules - t.own_rules +
                                          (sync->owned ? sync->owned->n_rules : t.own_rules);
                sync->n_no_local_internal = t.no_local_internal;
                sync->n_no_local_external = t.no_local_external;
        }
        buf_reserve(out, t.filter_chains.len + t.filter_rules.len + t.nat_chains.len + t.nat_rules.len + 64);
        buf_puts(out, "*filter\n");
        buf_put(out, t.filter_chains.data, t.filter_chains.len);
        buf_put(out, t.filter_rules.data, t.filter_rules.len);
        buf_puts(out, "COMMIT\n*nat\n");
        buf_put(out, t.nat_chains.data, t.nat_chains.len);
        buf_put(out, t.nat_rules.data, t.nat_rules.len);
        buf_puts(out, "COMMIT\n");
out:
        for (size_t i = 0; i < n_all; i++)
                endpoints_done(&all[i].eps);
        free(all);
        free(svcs);
        buf_done(&t.filter_chains);
        buf_done(&t.filter_rules);
        buf_done(&t.nat_chains);
        buf_done(&t.nat_rules);
        owned_clear(&t.fresh);
        buf_done(&t.cur);
        return r;
}
