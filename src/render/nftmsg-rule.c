/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the encoder: each nftir statement becomes the expressions
 * nft 1.0.6 emits for its text (read off `nft --debug=netlink`), so the
 * kernel holds the same bytecode whichever way the table was loaded:
 *
 *   ip daddr 10.96.0.10      payload load 4b @ nh + 16 => reg 1; cmp eq
 *   ip saddr != 10.0.0.0/8   payload load 1b @ nh + 12 (whole bytes of the
 *                            prefix); cmp neq; a prefix that ends inside a
 *                            byte loads the whole address and masks it
 *   ip saddr != { A , B }    an anonymous interval set, lookup inverted
 *   ... vmap @m              concatenated keys in 4-byte registers 1, 9,
 *                            10 (IPv6: 1, 12, 13), lookup into the verdict
 *
 * Registers, marks and ct state are host-endian as the kernel keeps them;
 * addresses and ports are network order.
 */
#include <netinet/in.h>

#include "render/nftmsg-rule.h"

#include <net/if.h>
#include <linux/netfilter/nf_nat.h>
#include <stdbool.h>

#include "render/nftmsg-put.h"
#include "render/nftmsg-interval.h"

/* --- expressions --- */

/* name is a string literal: its size is known, no strlen() per expression. */
#define expr_begin(nlh, name, ret_data) expr_begin_n(nlh, name, sizeof(name), ret_data)

static struct nlattr *expr_begin_n(struct nlmsghdr *nlh, const char *name, size_t size, struct nlattr **ret_data) {
        struct nlattr *e = nftmsg_nest_start(nlh, NFTA_LIST_ELEM);
        nftmsg_attr(nlh, NFTA_EXPR_NAME, size, name);
        *ret_data = nftmsg_nest_start(nlh, NFTA_EXPR_DATA);
        return e;
}

static void expr_end(struct nlmsghdr *nlh, struct nlattr *e, struct nlattr *d) {
        nftmsg_nest_end(nlh, d);
        nftmsg_nest_end(nlh, e);
}

static void e_payload(struct nlmsghdr *nlh, uint32_t base, uint32_t off, uint32_t len, uint32_t dreg) {
        struct nlattr *d, *e = expr_begin(nlh, "payload", &d);
        nftmsg_attr_u32(nlh, NFTA_PAYLOAD_DREG, htonl(dreg));
        nftmsg_attr_u32(nlh, NFTA_PAYLOAD_BASE, htonl(base));
        nftmsg_attr_u32(nlh, NFTA_PAYLOAD_OFFSET, htonl(off));
        nftmsg_attr_u32(nlh, NFTA_PAYLOAD_LEN, htonl(len));
        expr_end(nlh, e, d);
}

static void e_cmp(struct nlmsghdr *nlh, uint32_t op, const void *v, size_t len) {
        struct nlattr *d, *e = expr_begin(nlh, "cmp", &d);
        nftmsg_attr_u32(nlh, NFTA_CMP_SREG, htonl(NFT_REG_1));
        nftmsg_attr_u32(nlh, NFTA_CMP_OP, htonl(op));
        nftmsg_put_data(nlh, NFTA_CMP_DATA, v, len);
        expr_end(nlh, e, d);
}

static void e_cmp_u32(struct nlmsghdr *nlh, uint32_t op, uint32_t v) {
        e_cmp(nlh, op, &v, sizeof v);
}

static void e_bitwise(struct nlmsghdr *nlh, const void *mask, const void *xor, size_t len) {
        struct nlattr *d, *e = expr_begin(nlh, "bitwise", &d);
        nftmsg_attr_u32(nlh, NFTA_BITWISE_SREG, htonl(NFT_REG_1));
        nftmsg_attr_u32(nlh, NFTA_BITWISE_DREG, htonl(NFT_REG_1));
        nftmsg_attr_u32(nlh, NFTA_BITWISE_LEN, htonl((uint32_t) len));
        nftmsg_put_data(nlh, NFTA_BITWISE_MASK, mask, len);
        nftmsg_put_data(nlh, NFTA_BITWISE_XOR, xor, len);
        expr_end(nlh, e, d);
}

static void e_meta_load(struct nlmsghdr *nlh, uint32_t key, uint32_t dreg) {
        struct nlattr *d, *e = expr_begin(nlh, "meta", &d);
        nftmsg_attr_u32(nlh, NFTA_META_DREG, htonl(dreg));
        nftmsg_attr_u32(nlh, NFTA_META_KEY, htonl(key));
        expr_end(nlh, e, d);
}

static void e_meta_set_mark(struct nlmsghdr *nlh) {
        struct nlattr *d, *e = expr_begin(nlh, "meta", &d);
        nftmsg_attr_u32(nlh, NFTA_META_KEY, htonl(NFT_META_MARK));
        nftmsg_attr_u32(nlh, NFTA_META_SREG, htonl(NFT_REG_1));
        expr_end(nlh, e, d);
}

static void e_lookup(struct nlmsghdr *nlh, const char *set, uint32_t set_id, bool vmap, bool inv) {
        struct nlattr *d, *e = expr_begin(nlh, "lookup", &d);
        nftmsg_attr_u32(nlh, NFTA_LOOKUP_SREG, htonl(NFT_REG_1));
        nftmsg_attr_strz(nlh, NFTA_LOOKUP_SET, set);
        if (set_id)
                nftmsg_attr_u32(nlh, NFTA_LOOKUP_SET_ID, htonl(set_id));
        if (vmap)
                nftmsg_attr_u32(nlh, NFTA_LOOKUP_DREG, htonl(NFT_REG_VERDICT));
        if (inv)
                nftmsg_attr_u32(nlh, NFTA_LOOKUP_FLAGS, htonl(NFT_LOOKUP_F_INV));
        expr_end(nlh, e, d);
}

static void e_immediate_data(struct nlmsghdr *nlh, uint32_t dreg, const void *v, size_t len) {
        struct nlattr *d, *e = expr_begin(nlh, "immediate", &d);
        nftmsg_attr_u32(nlh, NFTA_IMMEDIATE_DREG, htonl(dreg));
        nftmsg_put_data(nlh, NFTA_IMMEDIATE_DATA, v, len);
        expr_end(nlh, e, d);
}

static void e_verdict(struct nlmsghdr *nlh, int code, const char *chain) {
        struct nlattr *d, *e = expr_begin(nlh, "immediate", &d);
        nftmsg_attr_u32(nlh, NFTA_IMMEDIATE_DREG, htonl(NFT_REG_VERDICT));
        nftmsg_put_verdict(nlh, NFTA_IMMEDIATE_DATA, code, chain);
        expr_end(nlh, e, d);
}

/* Offset of the source or destination address in the network header. */
static uint32_t addr_off(const struct nftmsg *m, bool saddr) {
        if (m->family == 6)
                return saddr ? 8 : 24;
        return saddr ? 12 : 16;
}

/* ipX saddr|daddr [!=] CIDR, as nft writes it. */
static void e_addr(const struct nftmsg *m, struct nlmsghdr *nlh, const struct nftir_stmt *s) {
        unsigned alen = nftmsg_addr_len(m), prefix = s->cidr.prefix;
        uint32_t op = s->neg ? NFT_CMP_NEQ : NFT_CMP_EQ;

        if (prefix % 8 == 0) {
                e_payload(nlh, NFT_PAYLOAD_NETWORK_HEADER, addr_off(m, s->saddr), prefix / 8, NFT_REG_1);
                e_cmp(nlh, op, s->cidr.addr.bytes, prefix / 8);
        } else {
                uint8_t mask[16], zero[16] = {0};
                nftmsg_prefix_mask(mask, alen, prefix);
                e_payload(nlh, NFT_PAYLOAD_NETWORK_HEADER, addr_off(m, s->saddr), alen, NFT_REG_1);
                e_bitwise(nlh, mask, zero, alen);
                e_cmp(nlh, op, s->cidr.addr.bytes, alen);
        }
}

/* --- statements --- */

static uint8_t meta_l4proto_reg(const struct nftmsg *m) {
        /* After the address in a concatenation: 32-bit register 9 (IPv4) or 12. */
        return m->family == 6 ? NFT_REG32_04 : NFT_REG32_01;
}

/* ct state new */
static void e_ct_new(struct nlmsghdr *nlh) {
        struct nlattr *d, *e = expr_begin(nlh, "ct", &d);
        nftmsg_attr_u32(nlh, NFTA_CT_DREG, htonl(NFT_REG_1));
        nftmsg_attr_u32(nlh, NFTA_CT_KEY, htonl(NFT_CT_STATE));
        expr_end(nlh, e, d);
        uint32_t mask = NF_CT_STATE_BIT(IP_CT_NEW), zero = 0;
        e_bitwise(nlh, &mask, &zero, 4);
        e_cmp_u32(nlh, NFT_CMP_NEQ, 0);
}

/* iifname [!=] NAME, NAME* */
static void e_iifname(struct nlmsghdr *nlh, const struct nftir_stmt *s) {
        char ifname[IFNAMSIZ] = {0};
        size_t n = strlen(s->name.prefix);
        e_meta_load(nlh, NFT_META_IIFNAME, NFT_REG_1);
        if (n > 0 && s->name.prefix[n - 1] == '*') {
                /* A prefix: compare its characters only. */
                memcpy(ifname, s->name.prefix, n - 1 < IFNAMSIZ ? n - 1 : IFNAMSIZ);
                e_cmp(nlh, s->neg ? NFT_CMP_NEQ : NFT_CMP_EQ, ifname, n - 1);
        } else {
                memcpy(ifname, s->name.prefix, n < IFNAMSIZ ? n : IFNAMSIZ - 1);
                e_cmp(nlh, s->neg ? NFT_CMP_NEQ : NFT_CMP_EQ, ifname, IFNAMSIZ);
        }
}

/* fib saddr|daddr type local */
static void e_fib_local(struct nlmsghdr *nlh, const struct nftir_stmt *s) {
        struct nlattr *d, *e = expr_begin(nlh, "fib", &d);
        nftmsg_attr_u32(nlh, NFTA_FIB_DREG, htonl(NFT_REG_1));
        nftmsg_attr_u32(nlh, NFTA_FIB_RESULT, htonl(NFT_FIB_RESULT_ADDRTYPE));
        nftmsg_attr_u32(nlh, NFTA_FIB_FLAGS, htonl(s->saddr ? NFTA_FIB_F_SADDR : NFTA_FIB_F_DADDR));
        expr_end(nlh, e, d);
        e_cmp_u32(nlh, NFT_CMP_EQ, 2 /* RTN_LOCAL */);
}

/* numgen random mod N == 0 */
static void e_numgen(struct nlmsghdr *nlh, const struct nftir_stmt *s) {
        struct nlattr *d, *e = expr_begin(nlh, "numgen", &d);
        nftmsg_attr_u32(nlh, NFTA_NG_DREG, htonl(NFT_REG_1));
        nftmsg_attr_u32(nlh, NFTA_NG_MODULUS, htonl(s->n));
        nftmsg_attr_u32(nlh, NFTA_NG_TYPE, htonl(NFT_NG_RANDOM));
        expr_end(nlh, e, d);
        e_cmp_u32(nlh, NFT_CMP_EQ, 0);
}

/* [ipX daddr .] meta l4proto . th dport vmap @MAP */
static void e_vmap(const struct nftmsg *m, struct nlmsghdr *nlh, const struct nftir_stmt *s) {
        char name[512];
        uint32_t reg = NFT_REG_1;
        if (s->with_addr) {
                e_payload(nlh, NFT_PAYLOAD_NETWORK_HEADER, addr_off(m, false), nftmsg_addr_len(m), NFT_REG_1);
                reg = meta_l4proto_reg(m);
        }
        e_meta_load(nlh, NFT_META_L4PROTO, reg);
        e_payload(nlh, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, reg == NFT_REG_1 ? NFT_REG32_01 : reg + 1);
        e_lookup(nlh, nftir_name_join(&s->name, name, sizeof name), 0, true, false);
}

/* What a rule matches: the packet, its connection, a draw. set_ids[i]:
 * the id of the anonymous set of an ADDR_LIST. */
static void e_match(const struct nftmsg *m, struct nlmsghdr *nlh, const struct nftir_stmt *s,
                    const uint32_t *set_ids, size_t i) {
        char name[512];
        unsigned alen = nftmsg_addr_len(m);

        switch (s->kind) {
        case NFTIR_CT_NEW:
                e_ct_new(nlh);
                break;
        case NFTIR_ADDR:
                e_addr(m, nlh, s);
                break;
        case NFTIR_ADDR_SET:
                e_payload(nlh, NFT_PAYLOAD_NETWORK_HEADER, addr_off(m, s->saddr), alen, NFT_REG_1);
                e_lookup(nlh, nftir_name_join(&s->name, name, sizeof name), 0, false, false);
                break;
        case NFTIR_ADDR_LIST:
                e_payload(nlh, NFT_PAYLOAD_NETWORK_HEADER, addr_off(m, s->saddr), alen, NFT_REG_1);
                e_lookup(nlh, "__set%d", set_ids[i], false, s->neg);
                break;
        case NFTIR_IIFNAME:
                e_iifname(nlh, s);
                break;
        case NFTIR_FIB_LOCAL:
                e_fib_local(nlh, s);
                break;
        case NFTIR_NUMGEN:
                e_numgen(nlh, s);
                break;
        case NFTIR_VMAP:
                e_vmap(m, nlh, s);
                break;
        case NFTIR_L4PROTO: {
                uint8_t p = s->proto;
                e_meta_load(nlh, NFT_META_L4PROTO, NFT_REG_1);
                e_cmp(nlh, NFT_CMP_EQ, &p, 1);
                break;
        }
        case NFTIR_MARK_CLEAR: {
                uint32_t mask = s->n, zero = 0;
                e_meta_load(nlh, NFT_META_MARK, NFT_REG_1);
                e_bitwise(nlh, &mask, &zero, 4);
                e_cmp_u32(nlh, NFT_CMP_EQ, 0);
                break;
        }
        default:
                assert(!"not a match");
                break;
        }
}

/* dnat to ADDR:PORT */
static void e_dnat(const struct nftmsg *m, struct nlmsghdr *nlh, const struct nftir_stmt *s) {
        uint16_t port = htons(s->port);
        e_immediate_data(nlh, NFT_REG_1, s->cidr.addr.bytes, nftmsg_addr_len(m));
        e_immediate_data(nlh, NFT_REG_2, &port, sizeof port);
        struct nlattr *d, *e = expr_begin(nlh, "nat", &d);
        nftmsg_attr_u32(nlh, NFTA_NAT_TYPE, htonl(NFT_NAT_DNAT));
        nftmsg_attr_u32(nlh, NFTA_NAT_FAMILY, htonl(nftmsg_nfproto(m)));
        nftmsg_attr_u32(nlh, NFTA_NAT_REG_ADDR_MIN, htonl(NFT_REG_1));
        nftmsg_attr_u32(nlh, NFTA_NAT_REG_PROTO_MIN, htonl(NFT_REG_2));
        nftmsg_attr_u32(nlh, NFTA_NAT_FLAGS, htonl(NF_NAT_RANGE_PROTO_SPECIFIED));
        expr_end(nlh, e, d);
}

/* What a rule does to the packet or its connection: marks, an affinity
 * set's update, NAT, a reject. */
static void e_action(const struct nftmsg *m, struct nlmsghdr *nlh, const struct nftir_stmt *s) {
        char name[512];

        switch (s->kind) {
        case NFTIR_MARK_OR:
        case NFTIR_MARK_XOR: {
                uint32_t mask = s->kind == NFTIR_MARK_OR ? ~s->n : 0xffffffffu, xor = s->n;
                e_meta_load(nlh, NFT_META_MARK, NFT_REG_1);
                e_bitwise(nlh, &mask, &xor, 4);
                e_meta_set_mark(nlh);
                break;
        }
        case NFTIR_UPDATE_SADDR: {
                e_payload(nlh, NFT_PAYLOAD_NETWORK_HEADER, addr_off(m, true), nftmsg_addr_len(m), NFT_REG_1);
                struct nlattr *d, *e = expr_begin(nlh, "dynset", &d);
                nftmsg_attr_u32(nlh, NFTA_DYNSET_SREG_KEY, htonl(NFT_REG_1));
                nftmsg_attr_strz(nlh, NFTA_DYNSET_SET_NAME, nftir_name_join(&s->name, name, sizeof name));
                nftmsg_attr_u32(nlh, NFTA_DYNSET_OP, htonl(NFT_DYNSET_OP_UPDATE));
                expr_end(nlh, e, d);
                break;
        }
        case NFTIR_DNAT:
                e_dnat(m, nlh, s);
                break;
        case NFTIR_MASQ: {
                struct nlattr *d, *e = expr_begin(nlh, "masq", &d);
                nftmsg_attr_u32(nlh, NFTA_MASQ_FLAGS, htonl(NF_NAT_RANGE_PROTO_RANDOM_FULLY));
                expr_end(nlh, e, d);
                break;
        }
        case NFTIR_REJECT: {
                struct nlattr *d, *e = expr_begin(nlh, "reject", &d);
                nftmsg_attr_u32(nlh, NFTA_REJECT_TYPE, htonl(NFT_REJECT_ICMP_UNREACH));
                nftmsg_attr_u8(nlh, NFTA_REJECT_ICMP_CODE, m->family == 6 ? 4 /* ICMPV6_PORT_UNREACH */
                                                                          : 3 /* ICMP_PORT_UNREACH */);
                expr_end(nlh, e, d);
                break;
        }
        default:
                assert(!"not an action");
                break;
        }
}

/* One statement: a match, an action or a verdict. */
static void e_stmt(const struct nftmsg *m, struct nlmsghdr *nlh, const struct nftir_stmt *s, const uint32_t *set_ids,
                   size_t i) {
        char name[512];

        switch (s->kind) {
        case NFTIR_CT_NEW:
        case NFTIR_ADDR:
        case NFTIR_ADDR_SET:
        case NFTIR_ADDR_LIST:
        case NFTIR_IIFNAME:
        case NFTIR_FIB_LOCAL:
        case NFTIR_NUMGEN:
        case NFTIR_VMAP:
        case NFTIR_L4PROTO:
        case NFTIR_MARK_CLEAR:
                e_match(m, nlh, s, set_ids, i);
                break;
        case NFTIR_MARK_OR:
        case NFTIR_MARK_XOR:
        case NFTIR_UPDATE_SADDR:
        case NFTIR_DNAT:
        case NFTIR_MASQ:
        case NFTIR_REJECT:
                e_action(m, nlh, s);
                break;
        case NFTIR_JUMP:
        case NFTIR_GOTO:
                e_verdict(nlh, s->kind == NFTIR_JUMP ? NFT_JUMP : NFT_GOTO,
                          nftir_name_join(&s->name, name, sizeof name));
                break;
        case NFTIR_DROP:
                e_verdict(nlh, NF_DROP, NULL);
                break;
        case NFTIR_RETURN:
                e_verdict(nlh, NFT_RETURN, NULL);
                break;
        case _NFTIR_STMT_MAX:
                assert(!"bad statement");
                break;
        }
}

/* --- rules --- */

static void rule(struct nftmsg *m, uint16_t table, const char *chain, size_t chain_size, const struct nftir_rule *r) {
        uint32_t set_ids[NFTIR_RULE_MAX_STMTS] = {0};
        struct nftir_stmt single[NFTIR_RULE_MAX_STMTS];
        const struct nftir_stmt *s = r->s;

        /* nft writes a one-item list as a plain match; longer lists are
         * anonymous sets, declared before the rule that uses them. */
        for (size_t i = 0; i < r->n; i++) {
                single[i] = r->s[i];
                if (r->s[i].kind != NFTIR_ADDR_LIST)
                        continue;
                if (r->s[i].n_cidrs + r->s[i].n_addrs == 1) {
                        single[i].kind = NFTIR_ADDR;
                        if (r->s[i].n_cidrs == 1)
                                single[i].cidr = r->s[i].cidrs[0];
                        else
                                single[i].cidr = (struct inet_cidr) {r->s[i].addrs[0], (uint8_t) (nftmsg_addr_len(m) * 8)};
                        s = single;
                } else {
                        set_ids[i] = nftmsg_interval_set(m, table, &r->s[i]);
                }
        }

        struct nlmsghdr *nlh = nftmsg_open(m, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, 0);
        nftmsg_put_table(nlh, NFTA_RULE_TABLE, table);
        nftmsg_attr(nlh, NFTA_RULE_CHAIN, chain_size, chain);
        struct nlattr *list = nftmsg_nest_start(nlh, NFTA_RULE_EXPRESSIONS);
        for (size_t i = 0; i < r->n; i++)
                e_stmt(m, nlh, &s[i], set_ids, i);
        nftmsg_nest_end(nlh, list);
        if (r->comment) {
                struct nftmsg_udata u = {0};
                nftmsg_ud_str(&u, NFTMSG_UDATA_COMMENT, r->comment);
                nftmsg_attr(nlh, NFTA_RULE_USERDATA, u.len, u.b);
        }
        nftmsg_close(m, nlh);
}

void nftmsg_rules(struct nftmsg *m, const struct nftir_chain *c) {
        char name[512];
        size_t size = strlen(nftir_name_join(&c->name, name, sizeof name)) + 1;
        for (size_t i = 0; i < c->n_rules; i++)
                rule(m, c->table, name, size, &c->rules[i]);
}
