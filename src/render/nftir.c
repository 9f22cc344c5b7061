/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The text back-end of the nftables description: nft script lines as
 * upstream's nftables proxier writes them (docs/reference/nftables-mode.md).
 */
#include "render/nftir.h"

#include <assert.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/endpoints.h"
#include "util/buf.h"
#include "util/strb.h"

static const char *fam_name(uint8_t family) {
        return family == 6 ? "ip6" : "ip";
}

static const char *addr_type(uint8_t family) {
        return family == 6 ? "ipv6_addr" : "ipv4_addr";
}

static const char *proto_name(uint8_t proto) {
        switch (proto) {
        case IPPROTO_TCP:
                return "tcp";
        case IPPROTO_UDP:
                return "udp";
        case IPPROTO_SCTP:
                return "sctp";
        default:
                assert(!"unknown protocol");
                return "tcp";
        }
}

const char *nftir_name_join(const struct nftir_name *n, char *out, size_t len) {
        struct strb b = strb_init(out, len);
        strb_puts(&b, n->prefix);
        if (n->body)
                strb_puts(&b, n->body);
        return out;
}

static void put_name(struct buf *b, const struct nftir_name *n) {
        buf_puts(b, n->prefix);
        if (n->body)
                buf_puts(b, n->body);
}

const char *nftir_table_name(unsigned idx, char out[NFTIR_TABLE_NAME_MAX]) {
        if (idx == 0)
                return "kube-proxy";
        /* Every message of a shard names its table: no printf here. */
        struct strb b = strb_init(out, NFTIR_TABLE_NAME_MAX);
        strb_puts(&b, "kube-proxy-");
        strb_putu(&b, idx);
        return out;
}

int nftir_table_index(const char *name) {
        if (strcmp(name, "kube-proxy") == 0)
                return 0;
        if (strncmp(name, "kube-proxy-", 11) != 0 || name[11] < '1' || name[11] > '9')
                return -1;
        char *end;
        unsigned long i = strtoul(name + 11, &end, 10);
        return *end || i > NFTIR_TABLES_MAX ? -1 : (int) i;
}

bool nftir_nat_map(const char *name) {
        return strcmp(name, "service-ips") == 0 || strcmp(name, "service-nodeports") == 0;
}

static void head(struct buf *b, const char *what, uint8_t family, unsigned table) {
        char t[NFTIR_TABLE_NAME_MAX];
        buf_printf(b, "add %s %s %s ", what, fam_name(family), nftir_table_name(table, t));
}

void nftir_format_table(uint8_t family, unsigned table, struct buf *out) {
        char t[NFTIR_TABLE_NAME_MAX];
        buf_printf(out, "add table %s %s { comment \"rules for kube-proxy\" ; }\n", fam_name(family),
                   nftir_table_name(table, t));
}

void nftir_format_set(uint8_t family, const struct nftir_set *s, struct buf *out) {
        head(out, s->type == NFTIR_SET_ADDR ? "set" : "map", family, s->table);
        put_name(out, &s->name);
        buf_puts(out, " { type ");
        switch (s->type) {
        case NFTIR_SET_ADDR:
                buf_puts(out, addr_type(family));
                break;
        case NFTIR_MAP_ADDR_PROTO_PORT:
                buf_printf(out, "%s . inet_proto . inet_service : verdict", addr_type(family));
                break;
        case NFTIR_MAP_PROTO_PORT:
                buf_puts(out, "inet_proto . inet_service : verdict");
                break;
        }
        if (s->timeout)
                buf_printf(out, " ; flags dynamic,timeout ; timeout %us", s->timeout);
        if (s->comment)
                buf_printf(out, " ; comment \"%s\"", s->comment);
        buf_puts(out, " ; }\n");
}

void nftir_format_chain(uint8_t family, const struct nftir_chain *c, struct buf *out) {
        head(out, "chain", family, c->table);
        put_name(out, &c->name);
        if (c->type)
                buf_printf(out, " { type %s hook %s priority %d ; }", c->type, c->hook, c->prio);
        else if (c->comment)
                buf_printf(out, " { comment \"%s\" ; }", c->comment);
        buf_putc(out, '\n');
}

static void put_cidr(struct buf *b, const struct inet_cidr *c) {
        char s[INET_CIDR_STRLEN];
        if (c->prefix == (c->addr.family == 6 ? 128 : 32))
                inet_addr_format(&c->addr, s);
        else
                inet_cidr_format(c, s);
        buf_puts(b, s);
}

static void put_stmt(struct buf *b, uint8_t family, const struct nftir_stmt *s) {
        const char *f = fam_name(family);
        char a[INET_ADDR_STRLEN + 8];

        switch (s->kind) {
        case NFTIR_CT_NEW:
                buf_puts(b, "ct state new");
                break;
        case NFTIR_ADDR:
                buf_printf(b, "%s %s %s", f, s->saddr ? "saddr" : "daddr", s->neg ? "!= " : "");
                put_cidr(b, &s->cidr);
                break;
        case NFTIR_ADDR_SET:
                buf_printf(b, "%s %s @", f, s->saddr ? "saddr" : "daddr");
                put_name(b, &s->name);
                break;
        case NFTIR_ADDR_LIST: {
                /* Upstream separates the firewall's source ranges with " , "
                 * and the ServiceCIDRs of the drop rule with ",". */
                const char *sep = s->neg ? " , " : ",";
                buf_printf(b, "%s %s %s{ ", f, s->saddr ? "saddr" : "daddr", s->neg ? "!= " : "");
                for (size_t i = 0; i < s->n_cidrs; i++) {
                        if (i > 0)
                                buf_puts(b, sep);
                        put_cidr(b, &s->cidrs[i]);
                }
                for (size_t i = 0; i < s->n_addrs; i++) {
                        if (i + s->n_cidrs > 0)
                                buf_puts(b, sep);
                        buf_puts(b, inet_addr_format(&s->addrs[i], a));
                }
                buf_puts(b, " }");
                break;
        }
        case NFTIR_IIFNAME:
                buf_printf(b, "iifname %s", s->neg ? "!= " : "");
                put_name(b, &s->name);
                break;
        case NFTIR_FIB_LOCAL:
                buf_printf(b, "fib %s type local", s->saddr ? "saddr" : "daddr");
                break;
        case NFTIR_NUMGEN:
                buf_printf(b, "numgen random mod %u == 0", s->n);
                break;
        case NFTIR_VMAP:
                if (s->with_addr)
                        buf_printf(b, "%s daddr . ", f);
                buf_puts(b, "meta l4proto . th dport vmap @");
                put_name(b, &s->name);
                break;
        case NFTIR_MARK_OR:
                buf_printf(b, "mark set mark or 0x%08x", s->n);
                break;
        case NFTIR_MARK_XOR:
                buf_printf(b, "mark set mark xor 0x%08x", s->n);
                break;
        case NFTIR_MARK_CLEAR:
                buf_printf(b, "mark and 0x%08x == 0", s->n);
                break;
        case NFTIR_UPDATE_SADDR:
                buf_puts(b, "update @");
                put_name(b, &s->name);
                buf_printf(b, " { %s saddr }", f);
                break;
        case NFTIR_L4PROTO:
                buf_printf(b, "meta l4proto %s", proto_name(s->proto));
                break;
        case NFTIR_DNAT:
                endpoint_format(&s->cidr.addr, s->port, a);
                buf_printf(b, "dnat to %s", a);
                break;
        case NFTIR_MASQ:
                buf_puts(b, "masquerade fully-random");
                break;
        case NFTIR_REJECT:
                buf_puts(b, "reject");
                break;
        case NFTIR_JUMP:
        case NFTIR_GOTO:
                buf_puts(b, s->kind == NFTIR_JUMP ? "jump " : "goto ");
                put_name(b, &s->name);
                break;
        case NFTIR_DROP:
                buf_puts(b, "drop");
                break;
        case NFTIR_RETURN:
                buf_puts(b, "return");
                break;
        case _NFTIR_STMT_MAX:
                assert(!"bad statement");
                break;
        }
}

void nftir_format_rule(uint8_t family, const struct nftir_chain *chain, const struct nftir_rule *r, struct buf *out) {
        head(out, "rule", family, chain->table);
        put_name(out, &chain->name);
        for (size_t i = 0; i < r->n; i++) {
                buf_putc(out, ' ');
                put_stmt(out, family, &r->s[i]);
        }
        if (r->comment)
                buf_printf(out, " comment \"%s\"", r->comment);
        buf_putc(out, '\n');
}

void nftir_format_elem(uint8_t family, const struct nftir_elem *e, struct buf *out) {
        char a[INET_ADDR_STRLEN];

        head(out, "element", family, e->table);
        buf_puts(out, e->set);
        buf_puts(out, " { ");
        if (e->with_addr) {
                buf_puts(out, inet_addr_format(&e->addr, a));
                if (e->proto)
                        buf_puts(out, " . ");
        }
        if (e->proto)
                buf_printf(out, "%s . %u", proto_name(e->proto), e->port);
        if (e->comment)
                buf_printf(out, " comment \"%s\"", e->comment);
        if (e->proto) {
                if (e->verdict == NFTIR_GOTO) {
                        buf_puts(out, " : goto ");
                        put_name(out, &e->chain);
                } else {
                        buf_puts(out, " : drop");
                }
        }
        buf_puts(out, " }\n");
}

/* --- digests (over the meaning, never over pointers) ---
 *
 * In-memory only (nftsync's records of what it wrote), so any good mix
 * will do: eight bytes per multiply, where FNV-1a takes one (FNV cost 7%
 * of a full sync's CPU, perf at 10k services). */

static uint64_t h_word(uint64_t h, uint64_t v) {
        h ^= v;
        h *= 0x9e3779b97f4a7c15ull;
        return h ^ h >> 29;
}

/* Two lanes of 8 bytes: the names hashed here are 20 to 60 bytes, and
 * one lane waits on its multiply for every word. */
static uint64_t h_bytes(uint64_t h, const void *p, size_t n) {
        const unsigned char *b = p;
        uint64_t w, x, g = 0x6a09e667f3bcc909ull;
        if (n >= 16) {
                for (; n >= 16; n -= 16, b += 16) {
                        memcpy(&w, b, 8);
                        memcpy(&x, b + 8, 8);
                        h = h_word(h, w);
                        g = h_word(g, x);
                }
                h = h_word(h, g);
        }
        if (n >= 8) {
                memcpy(&w, b, 8);
                h = h_word(h, w);
                n -= 8;
                b += 8;
        }
        w = 0;
        memcpy(&w, b, n);
        return h_word(h, w ^ (uint64_t) n << 56);
}

static uint64_t h_str(uint64_t h, const char *s) {
        /* The length too: "ab"+"c" and "a"+"bc" must differ. */
        if (!s)
                return h_word(h, ~0ull);
        size_t n = strlen(s);
        return h_word(h_bytes(h, s, n), n);
}

static uint64_t h_u32(uint64_t h, uint32_t v) {
        return h_word(h, v);
}

/* A name's body: a derived one without its 8 characters, which its rest
 * decides (and which an unhashed render leaves unset). */
static uint64_t h_body(uint64_t h, const struct nftir_name *n) {
        if (n->body && n->derived && strnlen(n->body, 9) == 9)
                return h_str(h_word(h, 1), n->body + 9);
        return h_str(h, n->body);
}

static uint64_t h_name(uint64_t h, const struct nftir_name *n) {
        h = h_str(h, n->prefix);
        return h_body(h, n);
}

static uint64_t h_cidr(uint64_t h, const struct inet_cidr *c) {
        h = h_word(h, (uint64_t) c->addr.family << 8 | c->prefix);
        return h_bytes(h, c->addr.bytes, sizeof c->addr.bytes);
}

uint64_t nftir_chain_hash(const struct nftir_chain *c) {
        uint64_t h = 0x243f6a8885a308d3ull;
        h = h_str(h, c->type);
        h = h_str(h, c->hook);
        h = h_u32(h, (uint32_t) c->prio);
        h = h_str(h, c->comment);
        h = h_u32(h, (uint32_t) c->n_rules);
        for (size_t i = 0; i < c->n_rules; i++) {
                const struct nftir_rule *r = &c->rules[i];
                h = h_u32(h, (uint32_t) r->n);
                h = h_str(h, r->comment);
                for (size_t j = 0; j < r->n; j++) {
                        const struct nftir_stmt *s = &r->s[j];
                        /* Which fields a statement has goes in its first word;
                         * only those are hashed (most have one or two). */
                        uint64_t flags = (uint64_t) (s->saddr | s->neg << 1 | s->with_addr << 2);
                        uint64_t has = (uint64_t) (s->n != 0) | (uint64_t) (s->cidr.addr.family != 0) << 1 |
                                       (uint64_t) (s->name.prefix != NULL) << 2 |
                                       (uint64_t) (s->name.body != NULL) << 3 |
                                       (uint64_t) (s->n_cidrs + s->n_addrs > 0) << 4;
                        h = h_word(h, (uint64_t) s->kind << 40 | has << 32 | flags << 24 |
                                              (uint64_t) s->proto << 16 | s->port);
                        if (s->n)
                                h = h_u32(h, s->n);
                        if (s->cidr.addr.family)
                                h = h_cidr(h, &s->cidr);
                        if (s->name.prefix)
                                h = h_str(h, s->name.prefix);
                        if (s->name.body)
                                h = h_body(h, &s->name);
                        if (s->n_cidrs + s->n_addrs == 0)
                                continue;
                        h = h_u32(h, (uint32_t) (s->n_cidrs << 16 | s->n_addrs));
                        for (size_t k = 0; k < s->n_cidrs; k++)
                                h = h_cidr(h, &s->cidrs[k]);
                        for (size_t k = 0; k < s->n_addrs; k++)
                                h = h_bytes(h, s->addrs[k].bytes, sizeof s->addrs[k].bytes);
                }
        }
        return h;
}

uint64_t nftir_elem_value_hash(const struct nftir_elem *e) {
        uint64_t h = 0x243f6a8885a308d3ull;
        h = h_u32(h, (uint32_t) e->verdict);
        h = h_name(h, &e->chain);
        return h_str(h, e->comment);
}
