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

#include "render/nftmsg.h"

#include <assert.h>
#include <errno.h>
#include <endian.h>
#include <libmnl/libmnl.h>
#include <net/if.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdlib.h>
#include <string.h>

#include "render/nftir.h"
#include "util/cleanup.h"

/* libnftnl's user-data TLV types, which nft reads back to print objects. */
#define UDATA_COMMENT 0                 /* table, chain, rule, element */
#define UDATA_SET_KEYBYTEORDER 0
#define UDATA_SET_DATABYTEORDER 1
#define UDATA_SET_MERGE_ELEMENTS 2
#define UDATA_SET_KEY_TYPEOF 3
#define UDATA_SET_DATA_INTERVAL 6
#define UDATA_SET_COMMENT 7
#define UDATA_TYPEOF_EXPR 0
#define UDATA_TYPEOF_DATA 1

/* nft's datatype ids, and its concatenation of them (6 bits each). */
#define TYPE_IPADDR 7
#define TYPE_IP6ADDR 8
#define TYPE_INET_PROTO 12
#define TYPE_INET_SERVICE 13
#define EXPR_CONCAT 13
#define BYTEORDER_BIG_ENDIAN 2

#define MSG_ROOM 4096           /* bound on one message but element lists */

void nftmsg_init(struct nftmsg *m, uint8_t family, uint32_t seq) {
        *m = (struct nftmsg) {.family = family, .seq = seq};
        m->set_id = &m->own_set_id;
}

void nftmsg_share_set_ids(struct nftmsg *m, struct nftmsg *other) {
        m->set_id = other->set_id;
}

void nftmsg_done(struct nftmsg *m) {
        buf_done(&m->b);
}

void nftmsg_clear(struct nftmsg *m) {
        buf_clear(&m->b);
        m->n = 0;
}

static uint8_t nfproto(const struct nftmsg *m) {
        return m->family == 6 ? NFPROTO_IPV6 : NFPROTO_IPV4;
}

static unsigned addr_len(const struct nftmsg *m) {
        return m->family == 6 ? 16 : 4;
}

/* libmnl's attribute writers, inline: a full sync writes millions of
 * attributes, and the calls (through the PLT) were a fifth of rendering
 * its messages (perf at 10k services). The same bytes as libmnl's. */
static inline struct nlattr *attr_tail(const struct nlmsghdr *nlh) {
        return (struct nlattr *) ((char *) nlh + MNL_ALIGN(nlh->nlmsg_len));
}

static inline void attr_put(struct nlmsghdr *nlh, uint16_t type, size_t len, const void *data) {
        struct nlattr *a = attr_tail(nlh);
        uint16_t alen = (uint16_t) (MNL_ATTR_HDRLEN + len);
        a->nla_type = type;
        a->nla_len = alen;
        memcpy((char *) a + MNL_ATTR_HDRLEN, data, len);
        size_t pad = MNL_ALIGN(len) - len;
        if (pad > 0)
                memset((char *) a + MNL_ATTR_HDRLEN + len, 0, pad);
        nlh->nlmsg_len += MNL_ALIGN(alen);
}

static inline void attr_u8(struct nlmsghdr *nlh, uint16_t type, uint8_t v) {
        attr_put(nlh, type, sizeof v, &v);
}

static inline void attr_u32(struct nlmsghdr *nlh, uint16_t type, uint32_t v) {
        attr_put(nlh, type, sizeof v, &v);
}

static inline void attr_u64(struct nlmsghdr *nlh, uint16_t type, uint64_t v) {
        attr_put(nlh, type, sizeof v, &v);
}

static inline void attr_strz(struct nlmsghdr *nlh, uint16_t type, const char *s) {
        attr_put(nlh, type, strlen(s) + 1, s);
}

/* The name of table idx as an attribute: every message carries one, so
 * the names and their lengths are made once. */
static void put_table(struct nlmsghdr *nlh, uint16_t type, unsigned idx) {
        static char names[NFTIR_TABLES_MAX + 1][NFTIR_TABLE_NAME_MAX];
        static uint8_t lens[NFTIR_TABLES_MAX + 1];
        if (idx > NFTIR_TABLES_MAX) {
                char b[NFTIR_TABLE_NAME_MAX];
                attr_strz(nlh, type, nftir_table_name(idx, b));
                return;
        }
        if (!lens[idx]) {
                char b[NFTIR_TABLE_NAME_MAX];
                const char *n = nftir_table_name(idx, b);
                lens[idx] = (uint8_t) (strlen(n) + 1);
                memcpy(names[idx], n, lens[idx]);
        }
        attr_put(nlh, type, lens[idx], names[idx]);
}

static inline struct nlattr *nest_start(struct nlmsghdr *nlh, uint16_t type) {
        struct nlattr *a = attr_tail(nlh);
        a->nla_type = NLA_F_NESTED | type;
        nlh->nlmsg_len += MNL_ALIGN(sizeof(struct nlattr));
        return a;
}

static inline void nest_end(struct nlmsghdr *nlh, struct nlattr *a) {
        a->nla_len = (uint16_t) ((char *) attr_tail(nlh) - (char *) a);
}

/* Opens a message with room for `extra` bytes of attributes. */
static struct nlmsghdr *msg(struct nftmsg *m, uint16_t type, uint16_t flags, size_t extra) {
        buf_reserve(&m->b, MSG_ROOM + extra);
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(m->b.data + m->b.len);
        nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | type;
        nlh->nlmsg_flags = NLM_F_REQUEST | flags;
        nlh->nlmsg_seq = ++m->seq;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
        g->nfgen_family = nfproto(m);
        g->version = NFNETLINK_V0;
        g->res_id = 0;
        return nlh;
}

static void msg_end(struct nftmsg *m, struct nlmsghdr *nlh) {
        m->last = m->b.len;
        m->b.len += nlh->nlmsg_len;
        assert(m->b.len < m->b.cap);
        m->n++;
}

static void batch_msg(struct nftmsg *m, uint16_t type) {
        buf_reserve(&m->b, 64);
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(m->b.data + m->b.len);
        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = NLM_F_REQUEST;
        nlh->nlmsg_seq = ++m->seq;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
        g->nfgen_family = AF_UNSPEC;
        g->version = NFNETLINK_V0;
        g->res_id = htons(NFNL_SUBSYS_NFTABLES);
        m->b.len += nlh->nlmsg_len;     /* not counted in n, not `last` */
}

void nftmsg_batch_begin(struct nftmsg *m) {
        batch_msg(m, NFNL_MSG_BATCH_BEGIN);
}

void nftmsg_batch_end(struct nftmsg *m) {
        if (m->n > 0)
                ((struct nlmsghdr *) (m->b.data + m->last))->nlmsg_flags |= NLM_F_ACK;
        batch_msg(m, NFNL_MSG_BATCH_END);
}

/* A user-data blob of TLVs (type u8, length u8, value). */
struct udata {
        uint8_t b[256];
        size_t len;
};

static void ud_put(struct udata *u, uint8_t type, const void *v, size_t len) {
        assert(u->len + 2 + len <= sizeof u->b && len < 256);
        u->b[u->len++] = type;
        u->b[u->len++] = (uint8_t) len;
        if (len > 0)
                memcpy(u->b + u->len, v, len);
        u->len += len;
}

static void ud_u32(struct udata *u, uint8_t type, uint32_t v) {
        ud_put(u, type, &v, sizeof v);
}

static void ud_str(struct udata *u, uint8_t type, const char *s) {
        size_t n = strlen(s) + 1;
        if (n > 200)
                n = 200;        /* comments are kproxy's own, short; never overflow */
        ud_put(u, type, s, n);
}

static void put_name(struct nlmsghdr *nlh, uint16_t type, const struct nftir_name *n) {
        char s[512];
        attr_strz(nlh, type, nftir_name_join(n, s, sizeof s));
}

void nftmsg_table(struct nftmsg *m) {
        struct udata u = {0};
        struct nlmsghdr *nlh = msg(m, NFT_MSG_NEWTABLE, NLM_F_CREATE, 0);
        put_table(nlh, NFTA_TABLE_NAME, m->table);
        attr_u32(nlh, NFTA_TABLE_FLAGS, 0);
        ud_str(&u, UDATA_COMMENT, "rules for kube-proxy");
        attr_put(nlh, NFTA_TABLE_USERDATA, u.len, u.b);
        msg_end(m, nlh);
}

void nftmsg_table_del(struct nftmsg *m) {
        struct nlmsghdr *nlh = msg(m, NFT_MSG_DELTABLE, 0, 0);
        put_table(nlh, NFTA_TABLE_NAME, m->table);
        msg_end(m, nlh);
}

void nftmsg_set(struct nftmsg *m, const struct nftir_set *s) {
        struct udata u = {0};
        uint32_t addr_type = m->family == 6 ? TYPE_IP6ADDR : TYPE_IPADDR;
        struct nlmsghdr *nlh = msg(m, NFT_MSG_NEWSET, NLM_F_CREATE, 0);

        put_table(nlh, NFTA_SET_TABLE, s->table);
        put_name(nlh, NFTA_SET_NAME, &s->name);
        switch (s->type) {
        case NFTIR_SET_ADDR:
                attr_u32(nlh, NFTA_SET_FLAGS, htonl(s->timeout ? NFT_SET_TIMEOUT | NFT_SET_EVAL : 0));
                attr_u32(nlh, NFTA_SET_KEY_TYPE, htonl(addr_type));
                attr_u32(nlh, NFTA_SET_KEY_LEN, htonl(addr_len(m)));
                ud_u32(&u, UDATA_SET_KEYBYTEORDER, BYTEORDER_BIG_ENDIAN);
                break;
        case NFTIR_MAP_ADDR_PROTO_PORT:
        case NFTIR_MAP_PROTO_PORT: {
                bool with_addr = s->type == NFTIR_MAP_ADDR_PROTO_PORT;
                uint32_t type = TYPE_INET_PROTO << 6 | TYPE_INET_SERVICE;
                if (with_addr)
                        type |= addr_type << 12;
                attr_u32(nlh, NFTA_SET_FLAGS, htonl(NFT_SET_MAP));
                attr_u32(nlh, NFTA_SET_KEY_TYPE, htonl(type));
                attr_u32(nlh, NFTA_SET_KEY_LEN, htonl((with_addr ? addr_len(m) : 0) + 8));
                attr_u32(nlh, NFTA_SET_DATA_TYPE, htonl(NFT_DATA_VERDICT));
                attr_u32(nlh, NFTA_SET_DATA_LEN, 0);
                /* nft's description of a "type a . b" key: a concatenation, no byte order. */
                struct udata t = {0};
                ud_u32(&t, UDATA_TYPEOF_EXPR, EXPR_CONCAT);
                ud_put(&t, UDATA_TYPEOF_DATA, NULL, 0);
                ud_u32(&u, UDATA_SET_KEYBYTEORDER, 0);
                ud_u32(&u, UDATA_SET_DATABYTEORDER, 0);
                ud_put(&u, UDATA_SET_KEY_TYPEOF, t.b, t.len);
                ud_u32(&u, UDATA_SET_DATA_INTERVAL, 0);
                break;
        }
        }
        attr_u32(nlh, NFTA_SET_ID, htonl(++*m->set_id));       /* required */
        if (s->timeout)
                attr_u64(nlh, NFTA_SET_TIMEOUT, htobe64((uint64_t) s->timeout * 1000));
        if (s->comment)
                ud_str(&u, UDATA_SET_COMMENT, s->comment);
        attr_put(nlh, NFTA_SET_USERDATA, u.len, u.b);
        msg_end(m, nlh);
}

static void obj_by_name(struct nftmsg *m, uint16_t type, uint16_t table_attr, uint16_t name_attr, const char *name) {
        struct nlmsghdr *nlh = msg(m, type, 0, 0);
        put_table(nlh, table_attr, m->table);
        attr_strz(nlh, name_attr, name);
        msg_end(m, nlh);
}

void nftmsg_set_del(struct nftmsg *m, const char *name) {
        obj_by_name(m, NFT_MSG_DELSET, NFTA_SET_TABLE, NFTA_SET_NAME, name);
}

void nftmsg_set_flush(struct nftmsg *m, const char *name) {
        obj_by_name(m, NFT_MSG_DELSETELEM, NFTA_SET_ELEM_LIST_TABLE, NFTA_SET_ELEM_LIST_SET, name);
}

void nftmsg_chain_flush(struct nftmsg *m, const char *name) {
        obj_by_name(m, NFT_MSG_DELRULE, NFTA_RULE_TABLE, NFTA_RULE_CHAIN, name);
}

void nftmsg_chain_del(struct nftmsg *m, const char *name) {
        obj_by_name(m, NFT_MSG_DELCHAIN, NFTA_CHAIN_TABLE, NFTA_CHAIN_NAME, name);
}

static uint32_t hook_num(const char *hook) {
        if (strcmp(hook, "prerouting") == 0)
                return NF_INET_PRE_ROUTING;
        if (strcmp(hook, "input") == 0)
                return NF_INET_LOCAL_IN;
        if (strcmp(hook, "forward") == 0)
                return NF_INET_FORWARD;
        if (strcmp(hook, "output") == 0)
                return NF_INET_LOCAL_OUT;
        assert(strcmp(hook, "postrouting") == 0);
        return NF_INET_POST_ROUTING;
}

void nftmsg_chain(struct nftmsg *m, const struct nftir_chain *c) {
        struct nlmsghdr *nlh = msg(m, NFT_MSG_NEWCHAIN, NLM_F_CREATE, 0);
        put_table(nlh, NFTA_CHAIN_TABLE, c->table);
        put_name(nlh, NFTA_CHAIN_NAME, &c->name);
        if (c->type) {
                attr_strz(nlh, NFTA_CHAIN_TYPE, c->type);
                struct nlattr *h = nest_start(nlh, NFTA_CHAIN_HOOK);
                attr_u32(nlh, NFTA_HOOK_HOOKNUM, htonl(hook_num(c->hook)));
                attr_u32(nlh, NFTA_HOOK_PRIORITY, htonl((uint32_t) c->prio));
                nest_end(nlh, h);
        }
        if (c->comment) {
                struct udata u = {0};
                ud_str(&u, UDATA_COMMENT, c->comment);
                attr_put(nlh, NFTA_CHAIN_USERDATA, u.len, u.b);
        }
        msg_end(m, nlh);
}

/* --- expressions --- */

/* name is a string literal: its size is known, no strlen() per expression. */
#define expr_begin(nlh, name, ret_data) expr_begin_n(nlh, name, sizeof(name), ret_data)

static struct nlattr *expr_begin_n(struct nlmsghdr *nlh, const char *name, size_t size, struct nlattr **ret_data) {
        struct nlattr *e = nest_start(nlh, NFTA_LIST_ELEM);
        attr_put(nlh, NFTA_EXPR_NAME, size, name);
        *ret_data = nest_start(nlh, NFTA_EXPR_DATA);
        return e;
}

static void expr_end(struct nlmsghdr *nlh, struct nlattr *e, struct nlattr *d) {
        nest_end(nlh, d);
        nest_end(nlh, e);
}

static void put_data(struct nlmsghdr *nlh, uint16_t type, const void *v, size_t len) {
        struct nlattr *n = nest_start(nlh, type);
        attr_put(nlh, NFTA_DATA_VALUE, len, v);
        nest_end(nlh, n);
}

static void e_payload(struct nlmsghdr *nlh, uint32_t base, uint32_t off, uint32_t len, uint32_t dreg) {
        struct nlattr *d, *e = expr_begin(nlh, "payload", &d);
        attr_u32(nlh, NFTA_PAYLOAD_DREG, htonl(dreg));
        attr_u32(nlh, NFTA_PAYLOAD_BASE, htonl(base));
        attr_u32(nlh, NFTA_PAYLOAD_OFFSET, htonl(off));
        attr_u32(nlh, NFTA_PAYLOAD_LEN, htonl(len));
        expr_end(nlh, e, d);
}

static void e_cmp(struct nlmsghdr *nlh, uint32_t op, const void *v, size_t len) {
        struct nlattr *d, *e = expr_begin(nlh, "cmp", &d);
        attr_u32(nlh, NFTA_CMP_SREG, htonl(NFT_REG_1));
        attr_u32(nlh, NFTA_CMP_OP, htonl(op));
        put_data(nlh, NFTA_CMP_DATA, v, len);
        expr_end(nlh, e, d);
}

static void e_cmp_u32(struct nlmsghdr *nlh, uint32_t op, uint32_t v) {
        e_cmp(nlh, op, &v, sizeof v);
}

static void e_bitwise(struct nlmsghdr *nlh, const void *mask, const void *xor, size_t len) {
        struct nlattr *d, *e = expr_begin(nlh, "bitwise", &d);
        attr_u32(nlh, NFTA_BITWISE_SREG, htonl(NFT_REG_1));
        attr_u32(nlh, NFTA_BITWISE_DREG, htonl(NFT_REG_1));
        attr_u32(nlh, NFTA_BITWISE_LEN, htonl((uint32_t) len));
        put_data(nlh, NFTA_BITWISE_MASK, mask, len);
        put_data(nlh, NFTA_BITWISE_XOR, xor, len);
        expr_end(nlh, e, d);
}

static void e_meta_load(struct nlmsghdr *nlh, uint32_t key, uint32_t dreg) {
        struct nlattr *d, *e = expr_begin(nlh, "meta", &d);
        attr_u32(nlh, NFTA_META_DREG, htonl(dreg));
        attr_u32(nlh, NFTA_META_KEY, htonl(key));
        expr_end(nlh, e, d);
}

static void e_meta_set_mark(struct nlmsghdr *nlh) {
        struct nlattr *d, *e = expr_begin(nlh, "meta", &d);
        attr_u32(nlh, NFTA_META_KEY, htonl(NFT_META_MARK));
        attr_u32(nlh, NFTA_META_SREG, htonl(NFT_REG_1));
        expr_end(nlh, e, d);
}

static void e_lookup(struct nlmsghdr *nlh, const char *set, uint32_t set_id, bool vmap, bool inv) {
        struct nlattr *d, *e = expr_begin(nlh, "lookup", &d);
        attr_u32(nlh, NFTA_LOOKUP_SREG, htonl(NFT_REG_1));
        attr_strz(nlh, NFTA_LOOKUP_SET, set);
        if (set_id)
                attr_u32(nlh, NFTA_LOOKUP_SET_ID, htonl(set_id));
        if (vmap)
                attr_u32(nlh, NFTA_LOOKUP_DREG, htonl(NFT_REG_VERDICT));
        if (inv)
                attr_u32(nlh, NFTA_LOOKUP_FLAGS, htonl(NFT_LOOKUP_F_INV));
        expr_end(nlh, e, d);
}

static void e_immediate_data(struct nlmsghdr *nlh, uint32_t dreg, const void *v, size_t len) {
        struct nlattr *d, *e = expr_begin(nlh, "immediate", &d);
        attr_u32(nlh, NFTA_IMMEDIATE_DREG, htonl(dreg));
        put_data(nlh, NFTA_IMMEDIATE_DATA, v, len);
        expr_end(nlh, e, d);
}

static void put_verdict(struct nlmsghdr *nlh, uint16_t type, int code, const char *chain) {
        struct nlattr *dn = nest_start(nlh, type);
        struct nlattr *v = nest_start(nlh, NFTA_DATA_VERDICT);
        attr_u32(nlh, NFTA_VERDICT_CODE, htonl((uint32_t) code));
        if (chain)
                attr_strz(nlh, NFTA_VERDICT_CHAIN, chain);
        nest_end(nlh, v);
        nest_end(nlh, dn);
}

static void e_verdict(struct nlmsghdr *nlh, int code, const char *chain) {
        struct nlattr *d, *e = expr_begin(nlh, "immediate", &d);
        attr_u32(nlh, NFTA_IMMEDIATE_DREG, htonl(NFT_REG_VERDICT));
        put_verdict(nlh, NFTA_IMMEDIATE_DATA, code, chain);
        expr_end(nlh, e, d);
}

/* Offset of the source or destination address in the network header. */
static uint32_t addr_off(const struct nftmsg *m, bool saddr) {
        if (m->family == 6)
                return saddr ? 8 : 24;
        return saddr ? 12 : 16;
}

static void prefix_mask(uint8_t *mask, unsigned len, unsigned prefix) {
        memset(mask, 0, len);
        for (unsigned i = 0; i < prefix; i++)
                mask[i / 8] |= (uint8_t) (0x80 >> (i % 8));
}

/* ipX saddr|daddr [!=] CIDR, as nft writes it. */
static void e_addr(struct nftmsg *m, struct nlmsghdr *nlh, const struct nftir_stmt *s) {
        unsigned alen = addr_len(m), prefix = s->cidr.prefix;
        uint32_t op = s->neg ? NFT_CMP_NEQ : NFT_CMP_EQ;

        if (prefix % 8 == 0) {
                e_payload(nlh, NFT_PAYLOAD_NETWORK_HEADER, addr_off(m, s->saddr), prefix / 8, NFT_REG_1);
                e_cmp(nlh, op, s->cidr.addr.bytes, prefix / 8);
        } else {
                uint8_t mask[16], zero[16] = {0};
                prefix_mask(mask, alen, prefix);
                e_payload(nlh, NFT_PAYLOAD_NETWORK_HEADER, addr_off(m, s->saddr), alen, NFT_REG_1);
                e_bitwise(nlh, mask, zero, alen);
                e_cmp(nlh, op, s->cidr.addr.bytes, alen);
        }
}

/* --- anonymous interval sets (ADDR_LIST) --- */

struct range {
        uint8_t lo[16], hi[16];         /* inclusive */
};

static int range_cmp(const void *a, const void *b) {
        return memcmp(((const struct range *) a)->lo, ((const struct range *) b)->lo, 16);
}

/* hi + 1 into out; false when hi is the last address. */
static bool next_addr(const uint8_t *hi, unsigned len, uint8_t *out) {
        memcpy(out, hi, len);
        for (int i = (int) len - 1; i >= 0; i--)
                if (++out[i] != 0)
                        return true;
        return false;
}

static void put_interval_elem(struct nlmsghdr *nlh, const uint8_t *key, unsigned len, bool end) {
        struct nlattr *el = nest_start(nlh, NFTA_LIST_ELEM);
        if (end)
                attr_u32(nlh, NFTA_SET_ELEM_FLAGS, htonl(NFT_SET_ELEM_INTERVAL_END));
        put_data(nlh, NFTA_SET_ELEM_KEY, key, len);
        nest_end(nlh, el);
}

/* The set's elements as nft 1.0.6 lays out an interval set: ranges sorted
 * and merged, each as its start and (flagged) its end + 1, and the space
 * below the first range closed by an end element at 0. Returns the set's
 * id (its name is the kernel's choice). */
static uint32_t anon_set(struct nftmsg *m, uint16_t table, const struct nftir_stmt *s) {
        unsigned alen = addr_len(m);
        size_t n = s->n_cidrs + s->n_addrs, k = 0;
        _cleanup_free_ struct range *r = calloc(n ? n : 1, sizeof *r);
        if (!r)
                abort();
        for (size_t i = 0; i < n; i++) {
                struct inet_cidr c = i < s->n_cidrs ? s->cidrs[i]
                                                    : (struct inet_cidr) {s->addrs[i - s->n_cidrs], (uint8_t) (alen * 8)};
                uint8_t mask[16];
                prefix_mask(mask, alen, c.prefix);
                for (unsigned j = 0; j < alen; j++) {
                        r[i].lo[j] = c.addr.bytes[j] & mask[j];
                        r[i].hi[j] = (uint8_t) (c.addr.bytes[j] | ~mask[j]);
                }
        }
        qsort(r, n, sizeof *r, range_cmp);
        for (size_t i = 0; i < n; i++) {
                uint8_t after[16];
                /* Overlapping or adjacent to the previous range: merge. */
                if (k > 0 && (!next_addr(r[k - 1].hi, alen, after) || memcmp(r[i].lo, after, alen) <= 0)) {
                        if (memcmp(r[i].hi, r[k - 1].hi, alen) > 0)
                                memcpy(r[k - 1].hi, r[i].hi, alen);
                        continue;
                }
                r[k++] = r[i];
        }

        uint8_t zero[16] = {0};
        bool lead = memcmp(r[0].lo, zero, alen) != 0;
        size_t n_elems = lead;
        for (size_t i = 0; i < k; i++) {
                uint8_t after[16];
                n_elems += 1 + next_addr(r[i].hi, alen, after);
        }

        uint32_t id = ++*m->set_id;
        struct udata u = {0};
        struct nlmsghdr *nlh = msg(m, NFT_MSG_NEWSET, NLM_F_CREATE, 0);
        put_table(nlh, NFTA_SET_TABLE, table);
        attr_strz(nlh, NFTA_SET_NAME, "__set%d");
        attr_u32(nlh, NFTA_SET_FLAGS, htonl(NFT_SET_ANONYMOUS | NFT_SET_CONSTANT | NFT_SET_INTERVAL));
        attr_u32(nlh, NFTA_SET_KEY_TYPE, htonl(m->family == 6 ? TYPE_IP6ADDR : TYPE_IPADDR));
        attr_u32(nlh, NFTA_SET_KEY_LEN, htonl(alen));
        attr_u32(nlh, NFTA_SET_ID, htonl(id));
        struct nlattr *desc = nest_start(nlh, NFTA_SET_DESC);
        attr_u32(nlh, NFTA_SET_DESC_SIZE, htonl((uint32_t) n_elems));
        nest_end(nlh, desc);
        ud_u32(&u, UDATA_SET_KEYBYTEORDER, BYTEORDER_BIG_ENDIAN);
        ud_u32(&u, UDATA_SET_MERGE_ELEMENTS, 1);
        attr_put(nlh, NFTA_SET_USERDATA, u.len, u.b);
        msg_end(m, nlh);

        nlh = msg(m, NFT_MSG_NEWSETELEM, NLM_F_CREATE, n_elems * 48);
        put_table(nlh, NFTA_SET_ELEM_LIST_TABLE, table);
        attr_strz(nlh, NFTA_SET_ELEM_LIST_SET, "__set%d");
        attr_u32(nlh, NFTA_SET_ELEM_LIST_SET_ID, htonl(id));
        struct nlattr *list = nest_start(nlh, NFTA_SET_ELEM_LIST_ELEMENTS);
        if (lead)
                put_interval_elem(nlh, zero, alen, true);
        for (size_t i = 0; i < k; i++) {
                uint8_t after[16];
                put_interval_elem(nlh, r[i].lo, alen, false);
                if (next_addr(r[i].hi, alen, after))
                        put_interval_elem(nlh, after, alen, true);
        }
        nest_end(nlh, list);
        msg_end(m, nlh);
        return id;
}

/* --- rules --- */

static uint8_t meta_l4proto_reg(const struct nftmsg *m) {
        /* After the address in a concatenation: 32-bit register 9 (IPv4) or 12. */
        return m->family == 6 ? NFT_REG32_04 : NFT_REG32_01;
}

static void e_stmt(struct nftmsg *m, struct nlmsghdr *nlh, const struct nftir_stmt *s, const uint32_t *set_ids,
                   size_t i) {
        char name[512];
        unsigned alen = addr_len(m);

        switch (s->kind) {
        case NFTIR_CT_NEW: {
                struct nlattr *d, *e = expr_begin(nlh, "ct", &d);
                attr_u32(nlh, NFTA_CT_DREG, htonl(NFT_REG_1));
                attr_u32(nlh, NFTA_CT_KEY, htonl(NFT_CT_STATE));
                expr_end(nlh, e, d);
                uint32_t mask = NF_CT_STATE_BIT(IP_CT_NEW), zero = 0;
                e_bitwise(nlh, &mask, &zero, 4);
                e_cmp_u32(nlh, NFT_CMP_NEQ, 0);
                break;
        }
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
        case NFTIR_IIFNAME: {
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
                break;
        }
        case NFTIR_FIB_LOCAL: {
                struct nlattr *d, *e = expr_begin(nlh, "fib", &d);
                attr_u32(nlh, NFTA_FIB_DREG, htonl(NFT_REG_1));
                attr_u32(nlh, NFTA_FIB_RESULT, htonl(NFT_FIB_RESULT_ADDRTYPE));
                attr_u32(nlh, NFTA_FIB_FLAGS, htonl(s->saddr ? NFTA_FIB_F_SADDR : NFTA_FIB_F_DADDR));
                expr_end(nlh, e, d);
                e_cmp_u32(nlh, NFT_CMP_EQ, 2 /* RTN_LOCAL */);
                break;
        }
        case NFTIR_NUMGEN: {
                struct nlattr *d, *e = expr_begin(nlh, "numgen", &d);
                attr_u32(nlh, NFTA_NG_DREG, htonl(NFT_REG_1));
                attr_u32(nlh, NFTA_NG_MODULUS, htonl(s->n));
                attr_u32(nlh, NFTA_NG_TYPE, htonl(NFT_NG_RANDOM));
                expr_end(nlh, e, d);
                e_cmp_u32(nlh, NFT_CMP_EQ, 0);
                break;
        }
        case NFTIR_VMAP: {
                uint32_t reg = NFT_REG_1;
                if (s->with_addr) {
                        e_payload(nlh, NFT_PAYLOAD_NETWORK_HEADER, addr_off(m, false), alen, NFT_REG_1);
                        reg = meta_l4proto_reg(m);
                }
                e_meta_load(nlh, NFT_META_L4PROTO, reg);
                e_payload(nlh, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, reg == NFT_REG_1 ? NFT_REG32_01 : reg + 1);
                e_lookup(nlh, nftir_name_join(&s->name, name, sizeof name), 0, true, false);
                break;
        }
        case NFTIR_MARK_OR:
        case NFTIR_MARK_XOR: {
                uint32_t mask = s->kind == NFTIR_MARK_OR ? ~s->n : 0xffffffffu, xor = s->n;
                e_meta_load(nlh, NFT_META_MARK, NFT_REG_1);
                e_bitwise(nlh, &mask, &xor, 4);
                e_meta_set_mark(nlh);
                break;
        }
        case NFTIR_MARK_CLEAR: {
                uint32_t mask = s->n, zero = 0;
                e_meta_load(nlh, NFT_META_MARK, NFT_REG_1);
                e_bitwise(nlh, &mask, &zero, 4);
                e_cmp_u32(nlh, NFT_CMP_EQ, 0);
                break;
        }
        case NFTIR_UPDATE_SADDR: {
                e_payload(nlh, NFT_PAYLOAD_NETWORK_HEADER, addr_off(m, true), alen, NFT_REG_1);
                struct nlattr *d, *e = expr_begin(nlh, "dynset", &d);
                attr_u32(nlh, NFTA_DYNSET_SREG_KEY, htonl(NFT_REG_1));
                attr_strz(nlh, NFTA_DYNSET_SET_NAME, nftir_name_join(&s->name, name, sizeof name));
                attr_u32(nlh, NFTA_DYNSET_OP, htonl(NFT_DYNSET_OP_UPDATE));
                expr_end(nlh, e, d);
                break;
        }
        case NFTIR_L4PROTO: {
                uint8_t p = s->proto;
                e_meta_load(nlh, NFT_META_L4PROTO, NFT_REG_1);
                e_cmp(nlh, NFT_CMP_EQ, &p, 1);
                break;
        }
        case NFTIR_DNAT: {
                uint16_t port = htons(s->port);
                e_immediate_data(nlh, NFT_REG_1, s->cidr.addr.bytes, alen);
                e_immediate_data(nlh, NFT_REG_2, &port, sizeof port);
                struct nlattr *d, *e = expr_begin(nlh, "nat", &d);
                attr_u32(nlh, NFTA_NAT_TYPE, htonl(NFT_NAT_DNAT));
                attr_u32(nlh, NFTA_NAT_FAMILY, htonl(nfproto(m)));
                attr_u32(nlh, NFTA_NAT_REG_ADDR_MIN, htonl(NFT_REG_1));
                attr_u32(nlh, NFTA_NAT_REG_PROTO_MIN, htonl(NFT_REG_2));
                attr_u32(nlh, NFTA_NAT_FLAGS, htonl(NF_NAT_RANGE_PROTO_SPECIFIED));
                expr_end(nlh, e, d);
                break;
        }
        case NFTIR_MASQ: {
                struct nlattr *d, *e = expr_begin(nlh, "masq", &d);
                attr_u32(nlh, NFTA_MASQ_FLAGS, htonl(NF_NAT_RANGE_PROTO_RANDOM_FULLY));
                expr_end(nlh, e, d);
                break;
        }
        case NFTIR_REJECT: {
                struct nlattr *d, *e = expr_begin(nlh, "reject", &d);
                attr_u32(nlh, NFTA_REJECT_TYPE, htonl(NFT_REJECT_ICMP_UNREACH));
                attr_u8(nlh, NFTA_REJECT_ICMP_CODE, m->family == 6 ? 4 /* ICMPV6_PORT_UNREACH */
                                                                          : 3 /* ICMP_PORT_UNREACH */);
                expr_end(nlh, e, d);
                break;
        }
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
                                single[i].cidr = (struct inet_cidr) {r->s[i].addrs[0], (uint8_t) (addr_len(m) * 8)};
                        s = single;
                } else {
                        set_ids[i] = anon_set(m, table, &r->s[i]);
                }
        }

        struct nlmsghdr *nlh = msg(m, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, 0);
        put_table(nlh, NFTA_RULE_TABLE, table);
        attr_put(nlh, NFTA_RULE_CHAIN, chain_size, chain);
        struct nlattr *list = nest_start(nlh, NFTA_RULE_EXPRESSIONS);
        for (size_t i = 0; i < r->n; i++)
                e_stmt(m, nlh, &s[i], set_ids, i);
        nest_end(nlh, list);
        if (r->comment) {
                struct udata u = {0};
                ud_str(&u, UDATA_COMMENT, r->comment);
                attr_put(nlh, NFTA_RULE_USERDATA, u.len, u.b);
        }
        msg_end(m, nlh);
}

void nftmsg_rules(struct nftmsg *m, const struct nftir_chain *c) {
        char name[512];
        size_t size = strlen(nftir_name_join(&c->name, name, sizeof name)) + 1;
        for (size_t i = 0; i < c->n_rules; i++)
                rule(m, c->table, name, size, &c->rules[i]);
}

/* --- elements --- */

size_t nftmsg_elem_key(uint8_t family, const struct nftir_elem *e, uint8_t key[NFTMSG_KEY_MAX]) {
        unsigned alen = family == 6 ? 16 : 4;
        size_t n = 0;
        memset(key, 0, NFTMSG_KEY_MAX);
        if (e->with_addr) {
                memcpy(key, e->addr.bytes, alen);
                n = alen;
        }
        if (e->proto) {
                key[n] = e->proto;              /* in a 4-byte register */
                uint16_t port = htons(e->port);
                memcpy(key + n + 4, &port, 2);
                n += 8;
        }
        return n;
}

static void elem_msg(struct nftmsg *m, uint16_t type, const char *set, const uint8_t *key, size_t key_len,
                     const struct nftir_elem *e) {
        struct nlmsghdr *nlh = msg(m, type, type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0, 0);
        put_table(nlh, NFTA_SET_ELEM_LIST_TABLE, e ? e->table : m->table);
        attr_strz(nlh, NFTA_SET_ELEM_LIST_SET, set);
        struct nlattr *list = nest_start(nlh, NFTA_SET_ELEM_LIST_ELEMENTS);
        struct nlattr *el = nest_start(nlh, NFTA_LIST_ELEM);
        put_data(nlh, NFTA_SET_ELEM_KEY, key, key_len);
        if (e && e->proto) {
                char name[512];
                put_verdict(nlh, NFTA_SET_ELEM_DATA, e->verdict == NFTIR_GOTO ? NFT_GOTO : NF_DROP,
                            e->verdict == NFTIR_GOTO ? nftir_name_join(&e->chain, name, sizeof name) : NULL);
        }
        if (e && e->comment) {
                struct udata u = {0};
                ud_str(&u, UDATA_COMMENT, e->comment);
                attr_put(nlh, NFTA_SET_ELEM_USERDATA, u.len, u.b);
        }
        nest_end(nlh, el);
        nest_end(nlh, list);
        msg_end(m, nlh);
}

void nftmsg_elem(struct nftmsg *m, const struct nftir_elem *e) {
        uint8_t key[NFTMSG_KEY_MAX];
        size_t n = nftmsg_elem_key(m->family, e, key);
        elem_msg(m, NFT_MSG_NEWSETELEM, e->set, key, n, e);
}

void nftmsg_elem_del(struct nftmsg *m, const char *set, const uint8_t *key, size_t key_len) {
        elem_msg(m, NFT_MSG_DELSETELEM, set, key, key_len, NULL);
}

/* Pieces small enough that memcpy() keeps them in the cache: a large copy
 * bypasses it (non-temporal stores), and renumbering the messages after
 * one of 100 MB read every header back from memory (a quarter of a full
 * render, measured). */
#define APPEND_PIECE (64 * 1024)

void nftmsg_append_range(struct nftmsg *m, const struct nftmsg *src, size_t off, size_t len) {
        if (len == 0)
                return;         /* src may be an empty buffer's NULL */
        size_t o = m->b.len, end = m->b.len + len;
        buf_reserve(&m->b, len);
        while (m->b.len < end) {
                size_t piece = end - m->b.len < APPEND_PIECE ? end - m->b.len : APPEND_PIECE;
                memcpy(m->b.data + m->b.len, src->b.data + off, piece);
                m->b.len += piece;
                off += piece;
                /* The messages whose header is in: each is whole by the end. */
                while (o + NLMSG_HDRLEN <= m->b.len) {
                        struct nlmsghdr *nlh = (struct nlmsghdr *) (m->b.data + o);
                        nlh->nlmsg_seq = ++m->seq;
                        m->last = o;
                        m->n++;
                        o += NLMSG_ALIGN(nlh->nlmsg_len);
                }
        }
        m->b.data[m->b.len] = '\0';    /* as buf_put() leaves it */
}

#define MERGED_MAX (32 * 1024)

/* The table and set names and the first list element of a one-element message. */
static int elem_parts(const struct nlmsghdr *nlh, const char **ret_table, const char **ret_set,
                      const struct nlattr **ret_elem) {
        const struct nlattr *a, *e;
        *ret_table = *ret_set = NULL;
        *ret_elem = NULL;
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                if (mnl_attr_get_type(a) == NFTA_SET_ELEM_LIST_TABLE)
                        *ret_table = mnl_attr_get_str(a);
                else if (mnl_attr_get_type(a) == NFTA_SET_ELEM_LIST_SET)
                        *ret_set = mnl_attr_get_str(a);
                else if (mnl_attr_get_type(a) == NFTA_SET_ELEM_LIST_ELEMENTS)
                        mnl_attr_for_each_nested(e, a) {
                                *ret_elem = e;
                                break;
                        }
        }
        return *ret_table && *ret_set && *ret_elem ? 0 : -EINVAL;
}

void nftmsg_append_elems_merged(struct nftmsg *m, const struct nftmsg *src) {
        /* A handful of maps per table; a set beyond these is not merged. */
        const char *tables[2 * NFTIR_TABLES_MAX + 8], *sets[2 * NFTIR_TABLES_MAX + 8];
        size_t n_sets = 0;

        /* The sets, in order of first use. */
        for (size_t off = 0; off < src->b.len;) {
                const struct nlmsghdr *nlh = (const struct nlmsghdr *) (src->b.data + off);
                const char *table, *set;
                const struct nlattr *e;
                off += NLMSG_ALIGN(nlh->nlmsg_len);
                if (elem_parts(nlh, &table, &set, &e) < 0)
                        continue;
                size_t i = 0;
                while (i < n_sets && (strcmp(sets[i], set) != 0 || strcmp(tables[i], table) != 0))
                        i++;
                if (i == n_sets && n_sets < ELEMENTSOF(sets)) {
                        tables[n_sets] = table;
                        sets[n_sets++] = set;
                }
        }
        for (size_t i = 0; i < n_sets; i++) {
                struct nlmsghdr *nlh = NULL;
                struct nlattr *list = NULL;
                for (size_t off = 0; off < src->b.len;) {
                        const struct nlmsghdr *one = (const struct nlmsghdr *) (src->b.data + off);
                        const char *table, *set;
                        const struct nlattr *e;
                        off += NLMSG_ALIGN(one->nlmsg_len);
                        if (elem_parts(one, &table, &set, &e) < 0 || strcmp(set, sets[i]) != 0 ||
                            strcmp(table, tables[i]) != 0)
                                continue;
                        if (nlh && nlh->nlmsg_len + e->nla_len > MERGED_MAX) {
                                nest_end(nlh, list);
                                msg_end(m, nlh);
                                nlh = NULL;
                        }
                        if (!nlh) {
                                nlh = msg(m, NFT_MSG_NEWSETELEM, NLM_F_CREATE, MERGED_MAX + 1024);
                                attr_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, tables[i]);
                                attr_strz(nlh, NFTA_SET_ELEM_LIST_SET, sets[i]);
                                list = nest_start(nlh, NFTA_SET_ELEM_LIST_ELEMENTS);
                        }
                        memcpy(mnl_nlmsg_get_payload_tail(nlh), e, MNL_ALIGN(e->nla_len));
                        nlh->nlmsg_len += MNL_ALIGN(e->nla_len);
                }
                if (nlh) {
                        nest_end(nlh, list);
                        msg_end(m, nlh);
                }
        }
}

void nftmsg_append(struct nftmsg *m, const struct nftmsg *src) {
        nftmsg_append_range(m, src, 0, src->b.len);
}
