/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the nftables renderer: upstream kube-proxy's nftables layout
 * (docs/reference/nftables-mode.md, v1.34: table "kube-proxy", its base chains,
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
 * docs/reference/performance.md); the per-rule form has the same distribution
 * and loads linearly.
 *
 * The table splits into a fixed part (render_nft_fixed: the table, its sets
 * and maps, the base and helper chains) and one part per service
 * (render_nft_service: its chains, affinity sets and map elements), which
 * is what lets the daemon rewrite only the services that changed. What a
 * service port gets is decided once, by its plan (model/endpoints.h:
 * endpoints_plan(), shared with iptables mode). render/nft-full.c puts the
 * parts together into a whole table for `kproxy render`.
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
#include "render/render.h"
#include "util/cleanup.h"
#include "util/fnv.h"
#include "util/strb.h"

#define BODY_MAX CHAIN_NFT_BODY_MAX

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
        struct endpoints_masq masq;
};

/* A service port's or an endpoint's chain name body. */
struct body {
        char s[BODY_MAX];
        bool derived;           /* struct nftir_name's */
};

static void name_body(const char *base, bool unhashed, struct body *out) {
        out->derived = chain_nft_body(base, unhashed, out->s);
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

/* §3.3: the check of cluster IPs: a port no service has is rejected, an
 * address in the ServiceCIDRs that no service has is dropped. */
static void cluster_ips_check(struct nrender *t, const struct inet_cidr *cidrs, size_t n_cidrs) {
        struct inet_cidr own[8];
        size_t n = 0;
        struct nftir_rule *r;

        chain_begin(t);
        r = rule_new(t);
        stmt(r, NFTIR_ADDR_SET)->name = nm("cluster-ips", NULL);
        stmt(r, NFTIR_REJECT);
        r->comment = "Reject traffic to invalid ports of ClusterIPs";
        for (size_t i = 0; i < n_cidrs && n < ELEMENTSOF(own); i++)
                if (cidrs[i].addr.family == t->p->family)
                        own[n++] = cidrs[i];
        if (n > 0) {
                r = rule_new(t);
                struct nftir_stmt *l = stmt(r, NFTIR_ADDR_LIST);
                l->cidrs = own;
                l->n_cidrs = n;
                stmt(r, NFTIR_DROP);
                r->comment = "Drop traffic to unallocated ClusterIPs";
        }
        chain_end(t, nm("cluster-ips-check", NULL), NULL);
}

/* A chain of one rule: "[ipX daddr .] meta l4proto . th dport vmap @map". */
static void vmap_chain(struct nrender *t, const char *chain, const char *map) {
        chain_begin(t);
        struct nftir_stmt *v = stmt(rule_new(t), NFTIR_VMAP);
        v->with_addr = true;
        v->name = nm(map, NULL);
        chain_end(t, nm(chain, NULL), NULL);
}

/* Where NodePorts are accepted (§3.4): every local address but loopback
 * (localhost NodePorts do not exist in this mode), or @nodeport-ips. */
static void nodeport_match(struct nrender *t, struct nftir_rule *r, bool fib) {
        const struct render_params *p = t->p;
        struct inet_addr loop;

        if (!p->nodeports_match_all) {
                struct nftir_stmt *s = stmt(r, NFTIR_ADDR_SET);
                s->name = nm("nodeport-ips", NULL);
                return;
        }
        if (fib)
                stmt(r, NFTIR_FIB_LOCAL);
        inet_addr_parse(p->family == 6 ? "::1" : "127.0.0.0", &loop);
        struct nftir_stmt *s = stmt(r, NFTIR_ADDR);
        s->neg = true;
        s->cidr = (struct inet_cidr) {loop, p->family == 6 ? 128 : 8};
}

/* One table's sets and maps: with main, the filter side's; with nat, the
 * services' dispatch maps (upstream's single table has both). */
static void fixed_sets(struct nrender *t, bool main, bool nat) {
        if (main)
                set(t, "cluster-ips", NFTIR_SET_ADDR, "Active ClusterIPs");
        if (!t->p->nodeports_match_all)
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
}

/* One table's helper chains (§3.3), before the base chains whose rules
 * jump to them. */
static void fixed_helpers(struct nrender *t, bool main, bool nat, const struct inet_cidr *cidrs, size_t n_cidrs) {
        const struct render_params *p = t->p;
        struct nftir_rule *r;

        if (main) {
                cluster_ips_check(t, cidrs, n_cidrs);
                vmap_chain(t, "firewall-check", "firewall-ips");
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

                chain_begin(t);
                r = rule_new(t);
                nodeport_match(t, r, false);
                stmt(r, NFTIR_VMAP)->name = nm("no-endpoint-nodeports", NULL);
                chain_end(t, nm("nodeport-endpoints-check", NULL), NULL);
        }
        if (nat) {
                chain_begin(t);
                r = rule_new(t);
                struct nftir_stmt *v = stmt(r, NFTIR_VMAP);
                v->with_addr = true;
                v->name = nm("service-ips", NULL);
                r = rule_new(t);
                nodeport_match(t, r, true);
                stmt(r, NFTIR_VMAP)->name = nm("service-nodeports", NULL);
                chain_end(t, nm("services", NULL), NULL);
        }
        if (main) {
                vmap_chain(t, "service-endpoints-check", "no-endpoint-services");
                chain_begin(t);
                stmt(rule_new(t), NFTIR_REJECT);
                chain_end(t, nm("reject-chain", NULL), "helper for @no-endpoint-services / @no-endpoint-nodeports");
        }
}

/* §3.1 one table's base chains and their jumps, in upstream's order. */
static void fixed_base_chains(struct nrender *t, bool main, bool nat) {
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

        for (size_t i = 0; i < ELEMENTSOF(base); i++) {
                if (base[i].nat ? !nat : !main)
                        continue;
                bool filter = strcmp(base[i].type, "filter") == 0;
                chain_begin(t);
                for (size_t j = 0; j < ELEMENTSOF(base[i].jumps) && base[i].jumps[j]; j++) {
                        struct nftir_rule *r = rule_new(t);
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
                t->sink->chain(t->sink->ud, &c);
        }
}

/* One table's fixed objects: with main, the filter side and masquerading;
 * with nat, the services' dispatch (upstream's single table has both). */
static void fixed_table(struct nrender *t, bool main, bool nat, const struct inet_cidr *cidrs, size_t n_cidrs) {
        const struct render_params *p = t->p;

        t->sink->table(t->sink->ud, t->table);
        fixed_sets(t, main, nat);
        fixed_helpers(t, main, nat, cidrs, n_cidrs);
        fixed_base_chains(t, main, nat);
        for (size_t i = 0; !p->nodeports_match_all && i < p->n_nodeport_ips; i++) {
                if (inet_addr_is_loopback(&p->nodeport_ips[i]))
                        continue;
                struct nftir_elem e = {.set = "nodeport-ips", .table = t->table, .with_addr = true,
                                       .addr = p->nodeport_ips[i]};
                t->sink->elem(t->sink->ud, &e);
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

/* One service port being described: its plan and the names its objects
 * share. */
struct nport {
        const struct svc *svc;
        const struct svc_port_endpoints *eps;
        const struct inet_addr *cip;
        struct endpoints_plan plan;
        uint8_t proto;                  /* IPPROTO_TCP, ... */
        uint16_t port, node_port;
        char base[300];                 /* "ns/name/tcp/port-name": what chain names hash */
        char spn[340];                  /* "ns/name:port-name": the elements' comment */
        struct body body;
        struct body *ep_bodies;         /* one per eps->all, set for the reachable ones; nat side only */
};

/* Every port of every service, each full sync: no printf. */
static void port_names(struct nrender *t, struct nport *c, const struct svc_port *port) {
        struct strb bb = strb_init(c->base, sizeof c->base), sb = strb_init(c->spn, sizeof c->spn);

        strb_puts(&bb, c->svc->key);
        strb_putn(&bb, "/", 1);
        strb_puts(&bb, l4_proto_to_lower(port->proto));
        strb_putn(&bb, "/", 1);
        strb_puts(&bb, port->name);
        name_body(c->base, t->sink->unhashed, &c->body);
        strb_puts(&sb, c->svc->key);
        if (port->name[0]) {
                strb_putn(&sb, ":", 1);
                strb_puts(&sb, port->name);
        }
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

/* The verdict for traffic with no endpoint to go to: with no endpoint at
 * all, reject; with endpoints elsewhere only (a Local policy), drop. */
static void block_elem(struct nrender *t, const char *set, const struct inet_addr *addr, const struct nport *c,
                       uint16_t port, enum endpoints_block k) {
        if (k == ENDPOINTS_DROP)
                elem(t, set, addr, c->proto, port, NFTIR_DROP, nm("", NULL), c->spn);
        else
                elem(t, set, addr, c->proto, port, NFTIR_GOTO, nm("reject-chain", NULL), c->spn);
}

/* §6.1: the port's map and set elements, rewritten on every sync. */
static void port_elements(struct nrender *t, const struct nport *c, bool first_port) {
        const struct endpoints_plan *pl = &c->plan;
        const struct svc *s = c->svc;
        uint8_t family = t->p->family;

        if (first_port)
                elem(t, "cluster-ips", c->cip, 0, 0, NFTIR_DROP, nm("", NULL), NULL);
        if (pl->has_internal)
                elem(t, "service-ips", c->cip, c->proto, c->port, NFTIR_GOTO,
                     nb(pl->internal_policy_local ? "local-" : "service-", &c->body), NULL);
        else
                block_elem(t, "no-endpoint-services", c->cip, c, c->port, pl->internal_block);
        for (size_t i = 0; pl->n_external_ips > 0 && i < s->n_external_ips; i++) {
                const struct inet_addr *a = &s->external_ips[i];
                if (a->family != family)
                        continue;
                if (pl->has_any)
                        elem(t, "service-ips", a, c->proto, c->port, NFTIR_GOTO, nb("external-", &c->body), NULL);
                if (!pl->has_external)
                        block_elem(t, "no-endpoint-services", a, c, c->port, pl->external_block);
        }
        for (size_t i = 0; pl->n_lb_ips > 0 && i < s->n_lb_ips; i++) {
                const struct inet_addr *a = &s->lb_ips[i];
                if (a->family != family)
                        continue;
                if (pl->has_any)
                        elem(t, "service-ips", a, c->proto, c->port, NFTIR_GOTO, nb("external-", &c->body), NULL);
                if (pl->filters_sources)
                        elem(t, "firewall-ips", a, c->proto, c->port, NFTIR_GOTO, nb("firewall-", &c->body), NULL);
        }
        if (!pl->has_external)
                for (size_t i = 0; i < s->n_lb_ips; i++)
                        if (s->lb_ips[i].family == family)
                                block_elem(t, "no-endpoint-services", &s->lb_ips[i], c, c->port, pl->external_block);
        if (c->node_port) {
                if (pl->has_any)
                        elem(t, "service-nodeports", NULL, c->proto, c->node_port, NFTIR_GOTO,
                             nb("external-", &c->body), NULL);
                if (!pl->has_external)
                        block_elem(t, "no-endpoint-nodeports", NULL, c, c->node_port, pl->external_block);
        }
}

/* §6.2 endpoint- chains (and affinity sets), before the chains that jump
 * to them. */
static void endpoint_chains(struct nrender *t, const struct nport *c) {
        const struct svc_port_endpoints *e = c->eps;
        const struct svc *s = c->svc;
        struct nftir_rule *r;

        for (size_t i = 0; i < e->n_reachable; i++) {
                const struct endpoint *ep = e->reachable[i];
                const struct body *b = &c->ep_bodies[ep - e->all];
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
                stmt(r, NFTIR_L4PROTO)->proto = c->proto;
                struct nftir_stmt *d = stmt(r, NFTIR_DNAT);
                d->cidr.addr = ep->addr;
                d->port = ep->port;
                chain_end(t, nb("endpoint-", b), NULL);
        }
}

/* §6.2 a service- or local- chain: masquerade rule, affinity, endpoint
 * choice. */
static void lb_chain(struct nrender *t, const struct nport *c, const char *prefix, bool masq_rule,
                     struct endpoint *const *list, size_t n) {
        const struct endpoint *all = c->eps->all;
        struct nftir_rule *r;

        chain_begin(t);
        if (masq_rule) {
                r = rule_new(t);
                addr_stmt(r, false, false, c->cip);
                if (!t->p->masquerade_all)
                        r->s[r->n++] = t->detector_remote;
                verdict(r, NFTIR_JUMP, nm("mark-for-masquerade", NULL));
        }
        if (c->svc->affinity_client_ip)
                for (size_t i = 0; i < n; i++) {
                        const struct body *b = &c->ep_bodies[list[i] - all];
                        r = rule_new(t);
                        struct nftir_stmt *s = stmt(r, NFTIR_ADDR_SET);
                        s->saddr = true;
                        s->name = nb("affinity-", b);
                        verdict(r, NFTIR_GOTO, nb("endpoint-", b));
                }
        for (size_t i = 0; i < n; i++) {
                const struct body *b = &c->ep_bodies[list[i] - all];
                r = rule_new(t);
                if (i + 1 < n)
                        stmt(r, NFTIR_NUMGEN)->n = (uint32_t) (n - i);
                verdict(r, NFTIR_GOTO, nb("endpoint-", b));
        }
        chain_end(t, nb(prefix, &c->body), NULL);
}

/* §6.2 the external- chain. */
static void external_chain(struct nrender *t, const struct nport *c) {
        const struct endpoints_plan *pl = &c->plan;
        struct nftir_rule *r;

        chain_begin(t);
        if (pl->masq_external) {
                verdict(rule_new(t), NFTIR_JUMP, nm("mark-for-masquerade", NULL));
                verdict(rule_new(t), NFTIR_GOTO, nb("service-", &c->body));
        } else {
                if (pl->short_circuit_pods) {
                        r = rule_new(t);
                        r->s[r->n++] = t->detector_local;
                        verdict(r, NFTIR_GOTO, nb("service-", &c->body));
                        r->comment = "short-circuit pod traffic";
                }
                r = rule_new(t);
                stmt(r, NFTIR_FIB_LOCAL)->saddr = true;
                verdict(r, NFTIR_JUMP, nm("mark-for-masquerade", NULL));
                r->comment = "masquerade local traffic";
                r = rule_new(t);
                stmt(r, NFTIR_FIB_LOCAL)->saddr = true;
                verdict(r, NFTIR_GOTO, nb("service-", &c->body));
                r->comment = "short-circuit local traffic";
                if (pl->has_external)
                        verdict(rule_new(t), NFTIR_GOTO, nb("local-", &c->body));
        }
        chain_end(t, nb("external-", &c->body), NULL);
}

/* §6.2 the nat side's chains: endpoints first, then their users. */
static void nat_chains(struct nrender *t, const struct nport *c) {
        const struct endpoints_plan *pl = &c->plan;
        const struct svc_port_endpoints *e = c->eps;

        /* Only the reachable endpoints' bodies are written, and only theirs read. */
        for (size_t i = 0; i < e->n_reachable; i++) {
                char eb[400];
                endpoint_base(c->base, e->reachable[i], eb, sizeof eb);
                name_body(eb, t->sink->unhashed, &c->ep_bodies[e->reachable[i] - e->all]);
        }
        endpoint_chains(t, c);
        if (pl->uses_cluster_chain)
                lb_chain(t, c, "service-", pl->masq_internal && !pl->internal_policy_local, e->cluster, e->n_cluster);
        if (pl->uses_local_chain)
                lb_chain(t, c, "local-", pl->masq_internal && pl->internal_policy_local, e->local, e->n_local);
        if (pl->uses_external_chain)
                external_chain(t, c);
}

/* §6.2 the firewall- chain, the filter side's: one rule dropping sources
 * outside the ranges (and the LB IPs, when the node is in a range).
 * Returns 0 or -ENOMEM. */
static int firewall_chain(struct nrender *t, const struct nport *c) {
        const struct render_params *p = t->p;
        const struct svc *s = c->svc;
        _cleanup_free_ struct inet_cidr *ranges = calloc(c->plan.n_source_ranges, sizeof *ranges);
        _cleanup_free_ struct inet_addr *lbs = calloc(c->plan.n_lb_ips, sizeof *lbs);
        size_t nr = 0, nl = 0;
        bool from_node = endpoints_lb_admits_node(s, p->family, &p->node_ip);

        if (!ranges || !lbs)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_source_ranges; i++)
                if (s->source_ranges[i].addr.family == p->family)
                        ranges[nr++] = s->source_ranges[i];
        for (size_t i = 0; from_node && i < s->n_lb_ips; i++)
                if (s->lb_ips[i].family == p->family)
                        lbs[nl++] = s->lb_ips[i];
        chain_begin(t);
        struct nftir_rule *r = rule_new(t);
        struct nftir_stmt *l = stmt(r, NFTIR_ADDR_LIST);
        l->saddr = l->neg = true;
        l->cidrs = ranges;
        l->n_cidrs = nr;
        l->addrs = lbs;
        l->n_addrs = nl;
        stmt(r, NFTIR_DROP);
        t->table = 0;           /* the filter side's */
        chain_end(t, nb("firewall-", &c->body), NULL);
        t->table = t->nat;
        return 0;
}

static int render_port(struct nrender *t, const struct svc *s, const struct svc_port *port,
                       const struct svc_port_endpoints *e, const struct inet_addr *cip, bool first_port) {
        struct body small[16];
        struct nport c = {
                .svc = s,
                .eps = e,
                .cip = cip,
                .proto = ipproto(port->proto),
                .port = port->port,
                .node_port = port->node_port,
        };
        int r = 0;

        port_names(t, &c, port);
        endpoints_plan(s, t->p->family, e, &t->masq, &c.plan);
        port_elements(t, &c, first_port);
        /* §6.2 chains: the nat side's, then the firewall's (filter side) */
        if (!t->skip_nat) {
                c.ep_bodies = e->n_all > ELEMENTSOF(small) ? malloc(e->n_all * sizeof *c.ep_bodies) : small;
                if (!c.ep_bodies)
                        return -ENOMEM;
                nat_chains(t, &c);
        }
        if (c.plan.filters_sources)
                r = firewall_chain(t, &c);
        if (c.ep_bodies != small)
                free(c.ep_bodies);
        return r;
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
        t.masq = (struct endpoints_masq) {p->masquerade_all, p->detector != DETECTOR_NONE};
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
