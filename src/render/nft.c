/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the nftables renderer: upstream kube-proxy's nftables layout
 * (reference/nftables-mode.md, v1.34: table "kube-proxy", its base chains,
 * sets, verdict maps and per-service chain names), described once as
 * nftir data and written by a sink: nft script text for `kproxy render`,
 * netlink messages for the daemon.
 *
 * One deliberate difference from upstream: a service chain picks its
 * endpoint with one rule per endpoint ("numgen random mod K == 0 goto
 * endpoint-…", K = N, N-1, …, then a plain goto), as iptables' statistic
 * rules do, instead of upstream's one anonymous verdict map per chain. Each
 * anonymous map is a set the kernel binds on commit, and N of them in one
 * transaction cost O(N²) (4 s at 5k services, minutes at 20k, measured in
 * reference/performance.md); the per-rule form has the same distribution
 * and loads linearly.
 *
 * The table splits into a fixed part (render_nft_fixed: the table, its sets
 * and maps, the base and helper chains) and one part per service
 * (render_nft_service: its chains, affinity sets and map elements), which
 * is what lets the daemon rewrite only the services that changed.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/endpoints.h"
#include "model/model.h"
#include "render/chain.h"
#include "render/nftir.h"
#include "render/nftmsg.h"
#include "render/render.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fnv.h"
#include "util/hmap.h"
#include "util/strb.h"

#define BODY_MAX 241            /* 240 characters and NUL: upstream's budget */

struct nrender {
        const struct render_params *p;
        const struct nftir_sink *sink;
        struct nftir_stmt detector_local, detector_remote;     /* kind _NFTIR_STMT_MAX: none */
        char iif[sizeof ((struct render_params *) 0)->detector_arg];
        struct nftir_rule *rules;       /* the chain being built */
        size_t n_rules, cap_rules;
        uint16_t table;                 /* of the objects written now */
        uint16_t nat;                   /* a service's: its nat side's table */
        bool skip_nat;                  /* only the other tables' objects are wanted */
};

/* A service port's or an endpoint's chain name body. */
struct body {
        char s[BODY_MAX];
        bool derived;           /* struct nftir_name's */
};

/* upstream's hashAndTruncate(): "<8 base32 chars of SHA-256>-<base>", cut
 * to 237 characters and "..." beyond 240. Uncut, the 8 characters follow
 * from the rest: an unhashed render (nftir_sink.unhashed) leaves them
 * unset. A cut body always has them (its rest does not say them). */
static void name_body(const char *base, bool unhashed, struct body *out) {
        size_t n = strlen(base);
        out->derived = 9 + n <= BODY_MAX - 1;
        if (out->derived && unhashed)
                memcpy(out->s, "********", 8);
        else
                chain_hash_str(base, 8, out->s);
        out->s[8] = '-';
        if (!out->derived) {
                memcpy(out->s + 9, base, 237 - 9);
                memcpy(out->s + 237, "...", 4);
        } else {
                memcpy(out->s + 9, base, n + 1);
        }
}

static struct nftir_name nm(const char *prefix, const char *body) {
        return (struct nftir_name) {prefix, body, false};
}

static struct nftir_name nb(const char *prefix, const struct body *b) {
        return (struct nftir_name) {prefix, b->s, b->derived};
}

/* Starts the rule list of a new chain. */
static void chain_begin(struct nrender *t) {
        t->n_rules = 0;
}

static struct nftir_rule *rule_new(struct nrender *t) {
        if (t->n_rules == t->cap_rules) {
                size_t cap = t->cap_rules ? t->cap_rules * 2 : 16;
                struct nftir_rule *r = realloc(t->rules, cap * sizeof *r);
                if (!r)
                        abort();        /* as buf: a few kilobytes short is fatal */
                t->rules = r;
                t->cap_rules = cap;
        }
        struct nftir_rule *r = &t->rules[t->n_rules++];
        r->n = 0;               /* stmt() clears each statement it adds */
        r->comment = NULL;
        return r;
}

static struct nftir_stmt *stmt(struct nftir_rule *r, enum nftir_stmt_kind kind) {
        struct nftir_stmt *s = &r->s[r->n++];
        memset(s, 0, sizeof *s);
        s->kind = kind;
        return s;
}

static void verdict(struct nftir_rule *r, enum nftir_stmt_kind kind, struct nftir_name to) {
        stmt(r, kind)->name = to;
}

static void addr_stmt(struct nftir_rule *r, bool saddr, bool neg, const struct inet_addr *a) {
        struct nftir_stmt *s = stmt(r, NFTIR_ADDR);
        s->saddr = saddr;
        s->neg = neg;
        s->cidr.addr = *a;
        s->cidr.prefix = a->family == 6 ? 128 : 32;
}

static void chain_end(struct nrender *t, struct nftir_name name, const char *comment) {
        struct nftir_chain c = {
                .name = name,
                .table = t->table,
                .comment = comment,
                .rules = t->rules,
                .n_rules = t->n_rules,
        };
        t->sink->chain(t->sink->ud, &c);
}

/* The detector's match (§6.3): the local form and the not-local form. */
static void detector_init(struct nrender *t) {
        const struct render_params *p = t->p;
        t->detector_local.kind = t->detector_remote.kind = _NFTIR_STMT_MAX;
        if (p->detector == DETECTOR_SOURCE_CIDR) {
                t->detector_local = (struct nftir_stmt) {.kind = NFTIR_ADDR, .saddr = true, .cidr = p->detector_cidr};
        } else if (p->detector == DETECTOR_INTERFACE) {
                /* iptables spells an interface prefix "veth+", nft "veth*". */
                snprintf(t->iif, sizeof t->iif, "%s", p->detector_arg);
                size_t n = strlen(t->iif);
                if (n > 0 && t->iif[n - 1] == '+')
                        t->iif[n - 1] = '*';
                t->detector_local = (struct nftir_stmt) {.kind = NFTIR_IIFNAME, .name = nm(t->iif, NULL)};
        } else {
                return;
        }
        t->detector_remote = t->detector_local;
        t->detector_remote.neg = true;
}

static void set(struct nrender *t, const char *name, enum nftir_set_type type, const char *comment) {
        struct nftir_set s = {.name = nm(name, NULL), .table = t->table, .type = type, .comment = comment};
        t->sink->set(t->sink->ud, &s);
}

unsigned render_nft_shard(const char *key, unsigned shards) {
        if (shards == 0)
                return 0;
        return 1 + (unsigned) (fnv64(FNV64_INIT, key, strlen(key)) % shards);
}

/* One table's fixed objects: with main, the filter side and masquerading;
 * with nat, the services' dispatch (upstream's single table has both). */
static void fixed_table(struct nrender *t, bool main, bool nat, const struct inet_cidr *cidrs, size_t n_cidrs) {
        const struct render_params *p = t->p;
        const struct nftir_sink *sink = t->sink;
        static const struct {
                const char *name, *type, *hook;
                int prio;
                const char *jumps[2];   /* "ct state new jump X" (filter) or "jump X" (nat) */
                bool nat;               /* a services' dispatch chain */
        } base[] = {
                {"filter-prerouting-pre-dnat", "filter", "prerouting", -110, {"firewall-check"}, false},
                {"filter-output-pre-dnat", "filter", "output", -110, {"firewall-check"}, false},
                {"filter-forward", "filter", "forward", 0, {"service-endpoints-check", "cluster-ips-check"}, false},
                {"filter-input", "filter", "input", 0, {"nodeport-endpoints-check", "service-endpoints-check"}, false},
                {"filter-output", "filter", "output", 0, {"service-endpoints-check", "cluster-ips-check"}, false},
                {"nat-prerouting", "nat", "prerouting", -100, {"services"}, true},
                {"nat-output", "nat", "output", -100, {"services"}, true},
                {"nat-postrouting", "nat", "postrouting", 100, {"masquerading"}, false},
        };
        struct inet_addr loop;
        struct nftir_rule *r;

        sink->table(sink->ud, t->table);
        if (main)
                set(t, "cluster-ips", NFTIR_SET_ADDR, "Active ClusterIPs");
        if (!p->nodeports_match_all)
                set(t, "nodeport-ips", NFTIR_SET_ADDR, "IPs that accept NodePort traffic");
        if (main) {
                set(t, "firewall-ips", NFTIR_MAP_ADDR_PROTO_PORT,
                    "destinations that are subject to LoadBalancerSourceRanges");
                set(t, "no-endpoint-nodeports", NFTIR_MAP_PROTO_PORT,
                    "vmap to drop or reject packets to service nodeports with no endpoints");
                set(t, "no-endpoint-services", NFTIR_MAP_ADDR_PROTO_PORT,
                    "vmap to drop or reject packets to services with no endpoints");
        }
        if (nat) {
                set(t, "service-ips", NFTIR_MAP_ADDR_PROTO_PORT, "ClusterIP, ExternalIP and LoadBalancer IP traffic");
                set(t, "service-nodeports", NFTIR_MAP_PROTO_PORT, "NodePort traffic");
        }

        /* Helper chains first: the base chains' rules jump to them. */
        if (main) {
                chain_begin(t);
                r = rule_new(t);
                stmt(r, NFTIR_ADDR_SET)->name = nm("cluster-ips", NULL);
                stmt(r, NFTIR_REJECT);
                r->comment = "Reject traffic to invalid ports of ClusterIPs";
                struct inet_cidr own[8];
                size_t n = 0;
                for (size_t i = 0; i < n_cidrs && n < ELEMENTSOF(own); i++)
                        if (cidrs[i].addr.family == p->family)
                                own[n++] = cidrs[i];
                if (n > 0) {
                        r = rule_new(t);
                        struct nftir_stmt *s = stmt(r, NFTIR_ADDR_LIST);
                        s->cidrs = own;
                        s->n_cidrs = n;
                        stmt(r, NFTIR_DROP);
                        r->comment = "Drop traffic to unallocated ClusterIPs";
                }
                chain_end(t, nm("cluster-ips-check", NULL), NULL);

                chain_begin(t);
                r = rule_new(t);
                stmt(r, NFTIR_VMAP)->with_addr = true;
                r->s[0].name = nm("firewall-ips", NULL);
                chain_end(t, nm("firewall-check", NULL), NULL);
        }

        if (nat) {
                chain_begin(t);
                stmt(rule_new(t), NFTIR_MARK_OR)->n = p->mark_value;
                chain_end(t, nm("mark-for-masquerade", NULL), NULL);
        }

        if (main) {
                chain_begin(t);
                r = rule_new(t);
                stmt(r, NFTIR_MARK_CLEAR)->n = p->mark_value;
                stmt(r, NFTIR_RETURN);
                stmt(rule_new(t), NFTIR_MARK_XOR)->n = p->mark_value;
                stmt(rule_new(t), NFTIR_MASQ);
                chain_end(t, nm("masquerading", NULL), NULL);
        }

        /* §3.4 NodePorts; localhost NodePorts do not exist in this mode. */
        inet_addr_parse(p->family == 6 ? "::1" : "127.0.0.0", &loop);
        struct nftir_stmt not_loop = {.kind = NFTIR_ADDR, .neg = true, .cidr = {loop, p->family == 6 ? 128 : 8}};
        struct nftir_stmt in_nodeport_ips = {.kind = NFTIR_ADDR_SET, .name = nm("nodeport-ips", NULL)};

        if (main) {
                chain_begin(t);
                r = rule_new(t);
                if (p->nodeports_match_all)
                        r->s[r->n++] = not_loop;
                else
                        r->s[r->n++] = in_nodeport_ips;
                stmt(r, NFTIR_VMAP)->name = nm("no-endpoint-nodeports", NULL);
                chain_end(t, nm("nodeport-endpoints-check", NULL), NULL);
        }

        if (nat) {
                chain_begin(t);
                r = rule_new(t);
                stmt(r, NFTIR_VMAP)->with_addr = true;
                r->s[0].name = nm("service-ips", NULL);
                r = rule_new(t);
                if (p->nodeports_match_all) {
                        stmt(r, NFTIR_FIB_LOCAL);
                        r->s[r->n++] = not_loop;
                } else {
                        r->s[r->n++] = in_nodeport_ips;
                }
                stmt(r, NFTIR_VMAP)->name = nm("service-nodeports", NULL);
                chain_end(t, nm("services", NULL), NULL);
        }

        if (main) {
                chain_begin(t);
                r = rule_new(t);
                stmt(r, NFTIR_VMAP)->with_addr = true;
                r->s[0].name = nm("no-endpoint-services", NULL);
                chain_end(t, nm("service-endpoints-check", NULL), NULL);

                chain_begin(t);
                stmt(rule_new(t), NFTIR_REJECT);
                chain_end(t, nm("reject-chain", NULL), "helper for @no-endpoint-services / @no-endpoint-nodeports");
        }

        /* §3.1 base chains and their jumps, in upstream's order. */
        for (size_t i = 0; i < ELEMENTSOF(base); i++) {
                if (base[i].nat ? !nat : !main)
                        continue;
                bool filter = strcmp(base[i].type, "filter") == 0;
                chain_begin(t);
                for (size_t j = 0; j < ELEMENTSOF(base[i].jumps) && base[i].jumps[j]; j++) {
                        r = rule_new(t);
                        if (filter)
                                stmt(r, NFTIR_CT_NEW);
                        verdict(r, NFTIR_JUMP, nm(base[i].jumps[j], NULL));
                }
                struct nftir_chain c = {
                        .name = nm(base[i].name, NULL),
                        .table = t->table,
                        .type = base[i].type,
                        .hook = base[i].hook,
                        .prio = base[i].prio,
                        .rules = t->rules,
                        .n_rules = t->n_rules,
                };
                sink->chain(sink->ud, &c);
        }

        for (size_t i = 0; !p->nodeports_match_all && i < p->n_nodeport_ips; i++) {
                if (inet_addr_is_loopback(&p->nodeport_ips[i]))
                        continue;
                struct nftir_elem e = {.set = "nodeport-ips", .table = t->table, .with_addr = true,
                                       .addr = p->nodeport_ips[i]};
                sink->elem(sink->ud, &e);
        }
}

int render_nft_fixed(const struct render_params *p, const struct inet_cidr *cidrs, size_t n_cidrs,
                     const struct nftir_sink *sink) {
        struct nrender t = {.p = p, .sink = sink};
        /* The shards' first: a sync that brings them in (a restart with a
         * new shard count) has them ready before the main table lets go. */
        for (unsigned i = 1; i <= p->nft_shards; i++) {
                t.table = (uint16_t) i;
                fixed_table(&t, false, true, cidrs, n_cidrs);
        }
        t.table = 0;
        fixed_table(&t, true, p->nft_shards == 0, cidrs, n_cidrs);
        free(t.rules);
        return 0;
}

/* The endpoint part of a base name: "IP/port", IPv6 colons as dots. */
static void endpoint_base(const char *svc_base, const struct endpoint *e, char *out, size_t len) {
        struct strb b = strb_init(out, len);
        strb_puts(&b, svc_base);
        strb_putn(&b, "__", 2);
        char *ip = b.p;
        strb_putn(&b, e->str + e->ip_off, e->ip_len);
        for (; e->addr.family == 6 && ip < b.p; ip++)
                if (*ip == ':')
                        *ip = '.';
        strb_putn(&b, "/", 1);
        strb_putu(&b, e->port);
}

static uint8_t ipproto(enum l4_proto p) {
        return p == L4_UDP ? IPPROTO_UDP : p == L4_SCTP ? IPPROTO_SCTP : IPPROTO_TCP;
}

/* A service- or local- chain: masquerade rule, affinity, endpoint choice. */
static void lb_chain(struct nrender *t, const char *prefix, const struct body *body, const struct inet_addr *cip,
                     bool masq_rule, bool affinity, struct endpoint *const *list, size_t n,
                     const struct body *ep_bodies, const struct endpoint *all) {
        struct nftir_rule *r;

        chain_begin(t);
        if (masq_rule) {
                r = rule_new(t);
                addr_stmt(r, false, false, cip);
                if (!t->p->masquerade_all)
                        r->s[r->n++] = t->detector_remote;
                verdict(r, NFTIR_JUMP, nm("mark-for-masquerade", NULL));
        }
        if (affinity)
                for (size_t i = 0; i < n; i++) {
                        const struct body *b = &ep_bodies[list[i] - all];
                        r = rule_new(t);
                        struct nftir_stmt *s = stmt(r, NFTIR_ADDR_SET);
                        s->saddr = true;
                        s->name = nb("affinity-", b);
                        verdict(r, NFTIR_GOTO, nb("endpoint-", b));
                }
        for (size_t i = 0; i < n; i++) {
                const struct body *b = &ep_bodies[list[i] - all];
                r = rule_new(t);
                if (i + 1 < n)
                        stmt(r, NFTIR_NUMGEN)->n = (uint32_t) (n - i);
                verdict(r, NFTIR_GOTO, nb("endpoint-", b));
        }
        chain_end(t, nb(prefix, body), NULL);
}

/* A map element "KEY : goto CHAIN" or "KEY comment SPN : drop|goto reject-chain". */
static void elem(struct nrender *t, const char *set, const struct inet_addr *addr, uint8_t proto, uint16_t port,
                 enum nftir_stmt_kind v, struct nftir_name chain, const char *comment) {
        struct nftir_elem e = {
                .set = set,
                .table = nftir_nat_map(set) ? t->nat : 0,
                .with_addr = addr != NULL,
                .proto = proto,
                .port = port,
                .verdict = v,
                .chain = chain,
                .comment = comment,
        };
        if (addr)
                e.addr = *addr;
        t->sink->elem(t->sink->ud, &e);
}

/* The no-endpoint verdict: with no endpoint at all, reject; with endpoints
 * elsewhere only (a Local policy), drop. */
static void no_endpoint(struct nrender *t, const char *set, const struct inet_addr *addr, uint8_t proto,
                        uint16_t port, bool has_any, const char *spn) {
        if (has_any)
                elem(t, set, addr, proto, port, NFTIR_DROP, nm("", NULL), spn);
        else
                elem(t, set, addr, proto, port, NFTIR_GOTO, nm("reject-chain", NULL), spn);
}

static int render_port(struct nrender *t, const struct svc *s, const struct svc_port *port,
                       const struct svc_port_endpoints *e, const struct inet_addr *cip, bool first_port) {
        const struct render_params *p = t->p;
        uint8_t proto = ipproto(port->proto);
        char base[300], spn[340];
        struct body body;
        uint16_t pt = port->port, np = port->node_port;
        struct nftir_rule *r;

        /* Every port of every service, each full sync: no printf. */
        struct strb bb = strb_init(base, sizeof base), sb = strb_init(spn, sizeof spn);
        strb_puts(&bb, s->key);
        strb_putn(&bb, "/", 1);
        strb_puts(&bb, l4_proto_to_lower(port->proto));
        strb_putn(&bb, "/", 1);
        strb_puts(&bb, port->name);
        name_body(base, t->sink->unhashed, &body);
        strb_puts(&sb, s->key);
        if (port->name[0]) {
                strb_putn(&sb, ":", 1);
                strb_puts(&sb, port->name);
        }

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
        const char *internal = e->internal_policy_local ? "local-" : "service-";

        /* §6.1 elements */
        if (first_port)
                elem(t, "cluster-ips", cip, 0, 0, NFTIR_DROP, nm("", NULL), NULL);
        if (has_internal)
                elem(t, "service-ips", cip, proto, pt, NFTIR_GOTO, nb(internal, &body), NULL);
        else
                no_endpoint(t, "no-endpoint-services", cip, proto, pt, has_any, spn);
        for (size_t i = 0; i < s->n_external_ips; i++) {
                if (s->external_ips[i].family != p->family)
                        continue;
                if (has_any)
                        elem(t, "service-ips", &s->external_ips[i], proto, pt, NFTIR_GOTO, nb("external-", &body), NULL);
                if (!has_external)
                        no_endpoint(t, "no-endpoint-services", &s->external_ips[i], proto, pt, has_any, spn);
        }
        for (size_t i = 0; i < s->n_lb_ips; i++) {
                if (s->lb_ips[i].family != p->family)
                        continue;
                if (has_any)
                        elem(t, "service-ips", &s->lb_ips[i], proto, pt, NFTIR_GOTO, nb("external-", &body), NULL);
                if (uses_fw)
                        elem(t, "firewall-ips", &s->lb_ips[i], proto, pt, NFTIR_GOTO, nb("firewall-", &body), NULL);
        }
        if (!has_external)
                for (size_t i = 0; i < s->n_lb_ips; i++)
                        if (s->lb_ips[i].family == p->family)
                                no_endpoint(t, "no-endpoint-services", &s->lb_ips[i], proto, pt, has_any, spn);
        if (np) {
                if (has_any)
                        elem(t, "service-nodeports", NULL, proto, np, NFTIR_GOTO, nb("external-", &body), NULL);
                if (!has_external)
                        no_endpoint(t, "no-endpoint-nodeports", NULL, proto, np, has_any, spn);
        }

        /* §6.2 chains: the nat side's, then the firewall's (filter side) */
        bool nat = !t->skip_nat;
        struct body *ep_bodies = NULL, small[16];
        if (nat && e->n_all > 16) {
                ep_bodies = malloc(e->n_all * sizeof *ep_bodies);
                if (!ep_bodies)
                        return -ENOMEM;
        } else if (nat) {
                ep_bodies = small;
        }
        /* Only the reachable endpoints' are written, and only theirs read. */
        for (size_t i = 0; nat && i < e->n_reachable; i++) {
                char eb[400];
                endpoint_base(base, e->reachable[i], eb, sizeof eb);
                name_body(eb, t->sink->unhashed, &ep_bodies[e->reachable[i] - e->all]);
        }
        /* Endpoint chains (and affinity sets) before the chains that jump to them. */
        for (size_t i = 0; nat && i < e->n_reachable; i++) {
                const struct endpoint *ep = e->reachable[i];
                const struct body *b = &ep_bodies[ep - e->all];
                if (s->affinity_client_ip) {
                        struct nftir_set as = {.name = nb("affinity-", b), .table = t->nat, .type = NFTIR_SET_ADDR,
                                               .timeout = s->affinity_timeout};
                        t->sink->set(t->sink->ud, &as);
                }
                chain_begin(t);
                r = rule_new(t);
                addr_stmt(r, true, false, &ep->addr);
                verdict(r, NFTIR_JUMP, nm("mark-for-masquerade", NULL));
                if (s->affinity_client_ip) {
                        struct nftir_stmt *u = stmt(rule_new(t), NFTIR_UPDATE_SADDR);
                        u->name = nb("affinity-", b);
                }
                r = rule_new(t);
                stmt(r, NFTIR_L4PROTO)->proto = proto;
                struct nftir_stmt *d = stmt(r, NFTIR_DNAT);
                d->cidr.addr = ep->addr;
                d->port = ep->port;
                chain_end(t, nb("endpoint-", b), NULL);
        }
        bool masq = has_internal && (p->masquerade_all || p->detector != DETECTOR_NONE);
        if (nat && uses_svc)
                lb_chain(t, "service-", &body, cip, masq && !e->internal_policy_local, s->affinity_client_ip,
                         e->cluster, e->n_cluster, ep_bodies, e->all);
        if (nat && uses_svl)
                lb_chain(t, "local-", &body, cip, masq && e->internal_policy_local, s->affinity_client_ip, e->local,
                         e->n_local, ep_bodies, e->all);
        if (nat && uses_ext) {
                chain_begin(t);
                if (!e->external_policy_local) {
                        verdict(rule_new(t), NFTIR_JUMP, nm("mark-for-masquerade", NULL));
                        verdict(rule_new(t), NFTIR_GOTO, nb("service-", &body));
                } else {
                        if (t->detector_local.kind != _NFTIR_STMT_MAX) {
                                r = rule_new(t);
                                r->s[r->n++] = t->detector_local;
                                verdict(r, NFTIR_GOTO, nb("service-", &body));
                                r->comment = "short-circuit pod traffic";
                        }
                        r = rule_new(t);
                        stmt(r, NFTIR_FIB_LOCAL)->saddr = true;
                        verdict(r, NFTIR_JUMP, nm("mark-for-masquerade", NULL));
                        r->comment = "masquerade local traffic";
                        r = rule_new(t);
                        stmt(r, NFTIR_FIB_LOCAL)->saddr = true;
                        verdict(r, NFTIR_GOTO, nb("service-", &body));
                        r->comment = "short-circuit local traffic";
                        if (has_external)
                                verdict(rule_new(t), NFTIR_GOTO, nb("local-", &body));
                }
                chain_end(t, nb("external-", &body), NULL);
        }
        if (uses_fw) {
                struct inet_cidr *ranges = calloc(n_ranges, sizeof *ranges);
                struct inet_addr *lbs = calloc(n_lb, sizeof *lbs);
                size_t nr = 0, nl = 0;
                bool from_node = false;
                if (!ranges || !lbs) {
                        free(ranges);
                        free(lbs);
                        if (ep_bodies != small)
                                free(ep_bodies);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < s->n_source_ranges; i++) {
                        const struct inet_cidr *c = &s->source_ranges[i];
                        if (c->addr.family != p->family)
                                continue;
                        ranges[nr++] = *c;
                        from_node = from_node || inet_cidr_contains(c, &p->node_ip);
                }
                for (size_t i = 0; from_node && i < s->n_lb_ips; i++)
                        if (s->lb_ips[i].family == p->family)
                                lbs[nl++] = s->lb_ips[i];
                chain_begin(t);
                r = rule_new(t);
                struct nftir_stmt *l = stmt(r, NFTIR_ADDR_LIST);
                l->saddr = l->neg = true;
                l->cidrs = ranges;
                l->n_cidrs = nr;
                l->addrs = lbs;
                l->n_addrs = nl;
                stmt(r, NFTIR_DROP);
                t->table = 0;           /* the filter side's */
                chain_end(t, nb("firewall-", &body), NULL);
                t->table = t->nat;
                free(ranges);
                free(lbs);
        }
        if (ep_bodies != small)
                free(ep_bodies);
        return 0;
}

int render_nft_service(const struct model *m, const struct svc *s, const struct render_params *p,
                       const struct nftir_sink *sink) {
        return render_nft_service_table(m, s, p, sink, NFTIR_TABLES_MAX + 1);
}

int render_nft_service_table(const struct model *m, const struct svc *s, const struct render_params *p,
                             const struct nftir_sink *sink, unsigned table) {
        struct nrender t = {.p = p, .sink = sink};
        t.table = t.nat = (uint16_t) render_nft_shard(s->key, p->nft_shards);
        t.skip_nat = table <= NFTIR_TABLES_MAX && table != t.nat;
        struct endpoint_filter f = {.node_name = p->node_name, .zone = p->node_zone,
                                    .prefer_same_node = p->prefer_same_node};
        const struct inet_addr *cip = svc_cluster_ip(s, p->family);
        size_t n_slices;
        int r = 0;

        if (!cip)
                return 0;
        detector_init(&t);
        const struct slice **slices = model_service_slices(m, s->key, &n_slices);
        for (size_t j = 0; j < s->n_ports && r == 0; j++) {
                struct svc_port_endpoints e = {0};
                r = endpoints_collect(s, &s->ports[j], p->family, slices, n_slices, &f, &e);
                if (r == 0)
                        r = render_port(&t, s, &s->ports[j], &e, cip, j == 0);
                endpoints_done(&e);
        }
        free(slices);
        free(t.rules);
        return r;
}

/* --- one owner per map key --- */

/* Two services may claim one key (an external IP and port both list):
 * the kernel takes one value per key, and a transaction adding two fails.
 * The first service in key order keeps it, as the daemon's full sync
 * decides (proxy/nftsync.c). This wraps a sink and drops later claims. */
struct dedupe {
        const struct nftir_sink *inner;
        uint8_t family;
        struct hmap seen;
};

static void dd_table(void *ud, unsigned idx) {
        struct dedupe *d = ud;
        d->inner->table(d->inner->ud, idx);
}

static void dd_set(void *ud, const struct nftir_set *s) {
        struct dedupe *d = ud;
        d->inner->set(d->inner->ud, s);
}

static void dd_chain(void *ud, const struct nftir_chain *c) {
        struct dedupe *d = ud;
        d->inner->chain(d->inner->ud, c);
}

static void dd_elem(void *ud, const struct nftir_elem *e) {
        struct dedupe *d = ud;
        uint8_t key[NFTMSG_KEY_MAX];
        size_t n = nftmsg_elem_key(d->family, e, key);
        char id[64 + 2 * NFTMSG_KEY_MAX];
        /* Per table, as the daemon's syncs of the tables decide. */
        struct strb b = strb_init(id, sizeof id);
        strb_putu(&b, e->table);
        strb_putn(&b, "/", 1);
        strb_puts(&b, e->set);
        strb_putn(&b, "/", 1);
        strb_puthex(&b, key, n);
        if (hmap_get(&d->seen, id))
                return;
        char *k = strdup(id);
        if (!k)
                abort();
        hmap_put(&d->seen, k, k);
        d->inner->elem(d->inner->ud, e);
}

/* The fixed part and every service, in key order, through sink. */
static int render_all(const struct model *m, const struct render_params *p, const struct inet_cidr *service_cidrs,
                      size_t n_service_cidrs, const struct nftir_sink *sink) {
        struct dedupe d = {.inner = sink, .family = p->family};
        struct nftir_sink outer = {dd_table, dd_set, dd_chain, dd_elem, &d};
        size_t n_svcs;
        const struct svc **svcs = model_services_sorted(m, &n_svcs);
        int r = render_nft_fixed(p, service_cidrs, n_service_cidrs, &outer);
        for (size_t i = 0; i < n_svcs && r == 0; i++)
                r = render_nft_service(m, svcs[i], p, &outer);
        free(svcs);
        const char *k;
        void *v;
        for (size_t i = 0; hmap_next(&d.seen, &i, &k, &v);)
                free(v);
        hmap_done(&d.seen);
        return r;
}

/* --- the text sink: a first full sync's script, objects before their users --- */

struct text_sink {
        uint8_t family;
        struct buf objs, chains, rules, elems;
};

static void text_table(void *ud, unsigned idx) {
        struct text_sink *x = ud;
        nftir_format_table(x->family, idx, &x->objs);
}

static void text_set(void *ud, const struct nftir_set *s) {
        struct text_sink *x = ud;
        nftir_format_set(x->family, s, &x->objs);
}

static void text_chain(void *ud, const struct nftir_chain *c) {
        struct text_sink *x = ud;
        nftir_format_chain(x->family, c, &x->chains);
        for (size_t i = 0; i < c->n_rules; i++)
                nftir_format_rule(x->family, c, &c->rules[i], &x->rules);
}

static void text_elem(void *ud, const struct nftir_elem *e) {
        struct text_sink *x = ud;
        nftir_format_elem(x->family, e, &x->elems);
}

int render_nftables(const struct model *m, const struct render_params *p, const struct inet_cidr *service_cidrs,
                    size_t n_service_cidrs, struct buf *out) {
        struct text_sink x = {.family = p->family};
        struct nftir_sink sink = {text_table, text_set, text_chain, text_elem, &x};
        int r = render_all(m, p, service_cidrs, n_service_cidrs, &sink);

        if (r == 0) {
                buf_put(out, x.objs.data, x.objs.len);
                buf_put(out, x.chains.data, x.chains.len);
                buf_put(out, x.rules.data, x.rules.len);
                buf_put(out, x.elems.data, x.elems.len);
        }
        buf_done(&x.objs);
        buf_done(&x.chains);
        buf_done(&x.rules);
        buf_done(&x.elems);
        return r;
}

/* --- the netlink sink: the same as messages for an empty kernel --- */

struct msg_sink {
        struct nftmsg objs, chains, rules, elems;
};

static void msg_table(void *ud, unsigned idx) {
        struct msg_sink *x = ud;
        x->objs.table = (uint16_t) idx;
        nftmsg_table(&x->objs);
}

static void msg_set(void *ud, const struct nftir_set *s) {
        nftmsg_set(&((struct msg_sink *) ud)->objs, s);
}

static void msg_chain(void *ud, const struct nftir_chain *c) {
        struct msg_sink *x = ud;
        nftmsg_chain(&x->chains, c);
        nftmsg_rules(&x->rules, c);
}

static void msg_elem(void *ud, const struct nftir_elem *e) {
        nftmsg_elem(&((struct msg_sink *) ud)->elems, e);
}

int render_nftables_netlink(const struct model *m, const struct render_params *p,
                            const struct inet_cidr *service_cidrs, size_t n_service_cidrs, struct nftmsg *out) {
        struct msg_sink x;
        struct nftir_sink sink = {msg_table, msg_set, msg_chain, msg_elem, &x};
        int r;

        nftmsg_init(&x.objs, p->family, 0);
        nftmsg_init(&x.chains, p->family, 0);
        nftmsg_init(&x.rules, p->family, 0);
        nftmsg_init(&x.elems, p->family, 0);
        nftmsg_share_set_ids(&x.rules, &x.objs);
        r = render_all(m, p, service_cidrs, n_service_cidrs, &sink);
        if (r == 0) {
                nftmsg_append(out, &x.objs);
                nftmsg_append(out, &x.chains);
                nftmsg_append(out, &x.rules);
                nftmsg_append(out, &x.elems);
        }
        nftmsg_done(&x.objs);
        nftmsg_done(&x.chains);
        nftmsg_done(&x.rules);
        nftmsg_done(&x.elems);
        return r;
}
