/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The netlink encoder, decoded: each message read back with libmnl says
 * what was encoded (tables, sets, chains, each statement's expressions as
 * nft 1.0.6 writes them, anonymous interval sets, elements), and the
 * stream's framing, renumbering and merging keep every message whole.
 * tests/netns/test-nftmsg.sh proves the same bytes equal to nft's against
 * the kernel; this needs neither.
 */
#include <netinet/in.h>

#include <endian.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdio.h>
#include <string.h>

#include "render/nftir.h"
#include "render/nftmsg.h"
#include "test.h"
#include "util/inet.h"

/* --- reading messages back --- */

#define MAX_ATTRS 32
#define MAX_EXPRS 16

static const struct nlmsghdr *msg_at(const struct nftmsg *m, size_t i) {
        size_t off = 0;
        for (size_t k = 0; off < m->b.len; k++) {
                const struct nlmsghdr *nlh = (const struct nlmsghdr *) (m->b.data + off);
                if (k == i)
                        return nlh;
                off += NLMSG_ALIGN(nlh->nlmsg_len);
        }
        return NULL;
}

static size_t msgs(const struct nftmsg *m) {
        size_t n = 0;
        while (msg_at(m, n))
                n++;
        return n;
}

static void attrs(const struct nlmsghdr *nlh, const struct nlattr **tb) {
        const struct nlattr *a;
        memset(tb, 0, MAX_ATTRS * sizeof *tb);
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                if (mnl_attr_get_type(a) < MAX_ATTRS)
                        tb[mnl_attr_get_type(a)] = a;
        }
}

static void nested(const struct nlattr *n, const struct nlattr **tb) {
        const struct nlattr *a;
        memset(tb, 0, MAX_ATTRS * sizeof *tb);
        if (n)
                mnl_attr_for_each_nested(a, n) {
                        if (mnl_attr_get_type(a) < MAX_ATTRS)
                                tb[mnl_attr_get_type(a)] = a;
                }
}

static uint32_t u32(const struct nlattr *a) {
        return a ? ntohl(mnl_attr_get_u32(a)) : 0xdeadbeef;
}

static const char *str(const struct nlattr *a) {
        return a ? mnl_attr_get_str(a) : "(none)";
}

/* An NFTA_DATA_VALUE's bytes as hex, in out. */
static const char *value(const struct nlattr *data, char *out, size_t size) {
        const struct nlattr *d[MAX_ATTRS];
        nested(data, d);
        out[0] = '\0';
        if (!d[NFTA_DATA_VALUE])
                return "(none)";
        const uint8_t *p = mnl_attr_get_payload(d[NFTA_DATA_VALUE]);
        for (size_t i = 0; i < mnl_attr_get_payload_len(d[NFTA_DATA_VALUE]) && 2 * i + 3 < size; i++)
                snprintf(out + 2 * i, 3, "%02x", p[i]);
        return out;
}

/* A verdict's "code chain" ("-4 name", "0"), in out. */
static const char *verdict(const struct nlattr *data, char *out, size_t size) {
        const struct nlattr *d[MAX_ATTRS], *v[MAX_ATTRS];
        nested(data, d);
        nested(d[NFTA_DATA_VERDICT], v);
        if (v[NFTA_VERDICT_CHAIN])
                snprintf(out, size, "%d %s", (int32_t) u32(v[NFTA_VERDICT_CODE]), str(v[NFTA_VERDICT_CHAIN]));
        else
                snprintf(out, size, "%d", (int32_t) u32(v[NFTA_VERDICT_CODE]));
        return out;
}

struct expr {
        char name[16];
        const struct nlattr *tb[MAX_ATTRS];
};

/* The expressions of a rule message. */
static size_t exprs(const struct nlmsghdr *nlh, struct expr *e) {
        const struct nlattr *tb[MAX_ATTRS], *el;
        size_t n = 0;
        attrs(nlh, tb);
        mnl_attr_for_each_nested(el, tb[NFTA_RULE_EXPRESSIONS]) {
                const struct nlattr *x[MAX_ATTRS];
                nested(el, x);
                snprintf(e[n].name, sizeof e[n].name, "%s", str(x[NFTA_EXPR_NAME]));
                nested(x[NFTA_EXPR_DATA], e[n].tb);
                if (++n == MAX_EXPRS)
                        break;
        }
        return n;
}

/* The names of a rule's expressions, "payload cmp ...". */
static const char *expr_names(const struct expr *e, size_t n, char *out, size_t size) {
        size_t len = 0;
        out[0] = '\0';
        for (size_t i = 0; i < n && len < size; i++)
                len += (size_t) snprintf(out + len, size - len, "%s%s", i ? " " : "", e[i].name);
        return out;
}

/* One rule of one statement, in family; the messages it took (an
 * anonymous set's first) in m, emptied first. */
static size_t one_rule(struct nftmsg *m, const struct nftir_stmt *s, struct expr *e) {
        struct nftir_rule r = {.s = {*s}, .n = 1};
        struct nftir_chain c = {.name = {"a-chain", NULL, false}, .rules = &r, .n_rules = 1};
        nftmsg_clear(m);
        nftmsg_rules(m, &c);
        return exprs(msg_at(m, m->n - 1), e);
}

/* --- tests --- */

static void test_framing(void) {
        struct nftmsg m;
        struct nftir_set set = {.name = {"cluster-ips", NULL, false}, .type = NFTIR_SET_ADDR};
        struct nftir_chain chain = {.name = {"services", NULL, false}};
        nftmsg_init(&m, 4, 100);
        nftmsg_batch_begin(&m);
        nftmsg_table(&m);
        nftmsg_set(&m, &set);
        nftmsg_chain(&m, &chain);
        nftmsg_batch_end(&m);
        CHECK(m.n == 3 && msgs(&m) == 5 && m.seq == 105);
        for (size_t i = 0; i < 5; i++) {
                const struct nlmsghdr *nlh = msg_at(&m, i);
                const struct nfgenmsg *g = mnl_nlmsg_get_payload(nlh);
                CHECK(nlh->nlmsg_seq == 101 + i && (nlh->nlmsg_flags & NLM_F_REQUEST));
                /* Only the last message asks for an answer: it comes after the commit. */
                CHECK(!!(nlh->nlmsg_flags & NLM_F_ACK) == (i == 3));
                if (i == 0 || i == 4) {
                        CHECK(nlh->nlmsg_type == (i ? NFNL_MSG_BATCH_END : NFNL_MSG_BATCH_BEGIN));
                        CHECK(g->nfgen_family == AF_UNSPEC && g->res_id == htons(NFNL_SUBSYS_NFTABLES));
                } else {
                        CHECK(nlh->nlmsg_type >> 8 == NFNL_SUBSYS_NFTABLES && g->nfgen_family == NFPROTO_IPV4);
                }
        }
        CHECK(m.b.data + m.last == (const char *) msg_at(&m, 3));
        nftmsg_done(&m);
}

static void test_table(void) {
        struct nftmsg m;
        const struct nlattr *tb[MAX_ATTRS];
        nftmsg_init(&m, 6, 0);
        m.table = 3;
        nftmsg_table(&m);
        nftmsg_table_del(&m);
        attrs(msg_at(&m, 0), tb);
        CHECK((msg_at(&m, 0)->nlmsg_type & 0xff) == NFT_MSG_NEWTABLE);
        CHECK(((const struct nfgenmsg *) mnl_nlmsg_get_payload(msg_at(&m, 0)))->nfgen_family == NFPROTO_IPV6);
        CHECK_STREQ(str(tb[NFTA_TABLE_NAME]), "kube-proxy-3");
        CHECK(u32(tb[NFTA_TABLE_FLAGS]) == 0);
        /* nft's comment TLV: type 0, length, the text with its NUL. */
        const uint8_t *ud = mnl_attr_get_payload(tb[NFTA_TABLE_USERDATA]);
        CHECK(ud[0] == 0 && ud[1] == 21 && memcmp(ud + 2, "rules for kube-proxy", 21) == 0);
        attrs(msg_at(&m, 1), tb);
        CHECK((msg_at(&m, 1)->nlmsg_type & 0xff) == NFT_MSG_DELTABLE);
        CHECK_STREQ(str(tb[NFTA_TABLE_NAME]), "kube-proxy-3");
        nftmsg_done(&m);
}

static void test_sets(void) {
        struct nftmsg m, other;
        const struct nlattr *tb[MAX_ATTRS];
        struct nftir_set affinity = {.name = {"affinity-", "X", false}, .type = NFTIR_SET_ADDR, .timeout = 600};
        struct nftir_set map = {.name = {"service-ips", NULL, false}, .type = NFTIR_MAP_ADDR_PROTO_PORT,
                                .comment = "ClusterIP"};
        struct nftir_set ports = {.name = {"service-nodeports", NULL, false}, .type = NFTIR_MAP_PROTO_PORT};
        nftmsg_init(&m, 4, 0);
        nftmsg_init(&other, 4, 0);
        nftmsg_share_set_ids(&other, &m);
        nftmsg_set(&m, &affinity);
        nftmsg_set(&other, &map);
        nftmsg_set(&m, &ports);

        attrs(msg_at(&m, 0), tb);
        CHECK_STREQ(str(tb[NFTA_SET_NAME]), "affinity-X");
        CHECK(u32(tb[NFTA_SET_FLAGS]) == (NFT_SET_TIMEOUT | NFT_SET_EVAL));
        CHECK(u32(tb[NFTA_SET_KEY_TYPE]) == 7 && u32(tb[NFTA_SET_KEY_LEN]) == 4);
        CHECK(be64toh(mnl_attr_get_u64(tb[NFTA_SET_TIMEOUT])) == 600000);
        CHECK(u32(tb[NFTA_SET_ID]) == 1 && !tb[NFTA_SET_DATA_TYPE]);

        attrs(msg_at(&other, 0), tb);
        CHECK(u32(tb[NFTA_SET_FLAGS]) == NFT_SET_MAP && u32(tb[NFTA_SET_ID]) == 2);
        CHECK(u32(tb[NFTA_SET_KEY_TYPE]) == (7u << 12 | 12u << 6 | 13u) && u32(tb[NFTA_SET_KEY_LEN]) == 12);
        CHECK(u32(tb[NFTA_SET_DATA_TYPE]) == (uint32_t) NFT_DATA_VERDICT && !tb[NFTA_SET_TIMEOUT]);
        const uint8_t *ud = mnl_attr_get_payload(tb[NFTA_SET_USERDATA]);
        uint16_t ud_len = mnl_attr_get_payload_len(tb[NFTA_SET_USERDATA]);
        CHECK(ud_len > 12 && memcmp(ud + ud_len - 10, "ClusterIP", 10) == 0);

        attrs(msg_at(&m, 1), tb);
        CHECK(u32(tb[NFTA_SET_KEY_TYPE]) == (12u << 6 | 13u) && u32(tb[NFTA_SET_KEY_LEN]) == 8);
        CHECK(u32(tb[NFTA_SET_ID]) == 3);

        /* IPv6 addresses. */
        struct nftmsg v6;
        nftmsg_init(&v6, 6, 0);
        nftmsg_set(&v6, &affinity);
        attrs(msg_at(&v6, 0), tb);
        CHECK(u32(tb[NFTA_SET_KEY_TYPE]) == 8 && u32(tb[NFTA_SET_KEY_LEN]) == 16);
        nftmsg_done(&v6);
        nftmsg_done(&m);
        nftmsg_done(&other);
}

static void test_chains_and_by_name(void) {
        struct nftmsg m;
        const struct nlattr *tb[MAX_ATTRS], *h[MAX_ATTRS];
        struct nftir_chain base = {.name = {"nat-prerouting", NULL, false}, .type = "nat", .hook = "prerouting",
                                   .prio = -100};
        struct nftir_chain plain = {.name = {"endpoint-", "ABCDEFGH-ns/svc/tcp/p__10.0.0.1/80", true},
                                    .comment = "a comment"};
        nftmsg_init(&m, 4, 0);
        nftmsg_chain(&m, &base);
        nftmsg_chain(&m, &plain);
        nftmsg_chain_flush(&m, "c1");
        nftmsg_chain_del(&m, "c2");
        nftmsg_set_del(&m, "s1");
        nftmsg_set_flush(&m, "s2");

        attrs(msg_at(&m, 0), tb);
        nested(tb[NFTA_CHAIN_HOOK], h);
        CHECK_STREQ(str(tb[NFTA_CHAIN_NAME]), "nat-prerouting");
        CHECK_STREQ(str(tb[NFTA_CHAIN_TYPE]), "nat");
        CHECK(u32(h[NFTA_HOOK_HOOKNUM]) == NF_INET_PRE_ROUTING && (int32_t) u32(h[NFTA_HOOK_PRIORITY]) == -100);
        CHECK((msg_at(&m, 0)->nlmsg_flags & NLM_F_CREATE) && !(msg_at(&m, 0)->nlmsg_flags & NLM_F_EXCL));
        attrs(msg_at(&m, 1), tb);
        CHECK_STREQ(str(tb[NFTA_CHAIN_NAME]), "endpoint-ABCDEFGH-ns/svc/tcp/p__10.0.0.1/80");
        CHECK(!tb[NFTA_CHAIN_HOOK] && !tb[NFTA_CHAIN_TYPE] && tb[NFTA_CHAIN_USERDATA]);

        /* By name: flush (a rule deletion without a handle), deletions,
         * a set emptied (an element deletion without elements). */
        const struct {
                uint16_t type, attr;
                const char *name;
        } want[] = {{NFT_MSG_DELRULE, NFTA_RULE_CHAIN, "c1"},
                    {NFT_MSG_DELCHAIN, NFTA_CHAIN_NAME, "c2"},
                    {NFT_MSG_DELSET, NFTA_SET_NAME, "s1"},
                    {NFT_MSG_DELSETELEM, NFTA_SET_ELEM_LIST_SET, "s2"}};
        for (size_t i = 0; i < 4; i++) {
                const struct nlmsghdr *nlh = msg_at(&m, 2 + i);
                attrs(nlh, tb);
                CHECK((nlh->nlmsg_type & 0xff) == want[i].type);
                CHECK_STREQ(str(tb[want[i].attr]), want[i].name);
                CHECK_STREQ(str(tb[1]), "kube-proxy");  /* every message's table is attribute 1 */
                if (want[i].type == NFT_MSG_DELRULE)
                        CHECK(!tb[NFTA_RULE_HANDLE]);
                if (want[i].type == NFT_MSG_DELSETELEM)
                        CHECK(!tb[NFTA_SET_ELEM_LIST_ELEMENTS]);
        }
        nftmsg_done(&m);
}

static struct inet_cidr cidr(const char *s) {
        struct inet_cidr c;
        if (inet_cidr_parse(s, &c) < 0)
                abort();
        return c;
}

/* Matches on addresses: whole bytes of a prefix loaded and compared, a
 * prefix that ends inside a byte masked first. */
static void test_addresses(void) {
        struct nftmsg m;
        struct expr e[MAX_EXPRS];
        char names[128], hex[64];
        nftmsg_init(&m, 4, 0);

        size_t n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_ADDR, .cidr = cidr("10.96.0.10/32")}, e);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "payload cmp");
        CHECK(u32(e[0].tb[NFTA_PAYLOAD_BASE]) == NFT_PAYLOAD_NETWORK_HEADER);
        CHECK(u32(e[0].tb[NFTA_PAYLOAD_OFFSET]) == 16 && u32(e[0].tb[NFTA_PAYLOAD_LEN]) == 4);
        CHECK(u32(e[1].tb[NFTA_CMP_OP]) == NFT_CMP_EQ);
        CHECK_STREQ(value(e[1].tb[NFTA_CMP_DATA], hex, sizeof hex), "0a60000a");

        struct nftir_stmt not8 = {.kind = NFTIR_ADDR, .saddr = true, .neg = true, .cidr = cidr("10.0.0.0/8")};
        n = one_rule(&m, &not8, e);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "payload cmp");
        CHECK(u32(e[0].tb[NFTA_PAYLOAD_OFFSET]) == 12 && u32(e[0].tb[NFTA_PAYLOAD_LEN]) == 1);
        CHECK(u32(e[1].tb[NFTA_CMP_OP]) == NFT_CMP_NEQ);
        CHECK_STREQ(value(e[1].tb[NFTA_CMP_DATA], hex, sizeof hex), "0a");

        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_ADDR, .cidr = cidr("10.96.0.0/12")}, e);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "payload bitwise cmp");
        CHECK(u32(e[0].tb[NFTA_PAYLOAD_LEN]) == 4);
        CHECK_STREQ(value(e[1].tb[NFTA_BITWISE_MASK], hex, sizeof hex), "fff00000");
        CHECK_STREQ(value(e[1].tb[NFTA_BITWISE_XOR], hex, sizeof hex), "00000000");
        CHECK_STREQ(value(e[2].tb[NFTA_CMP_DATA], hex, sizeof hex), "0a600000");

        /* IPv6: saddr at 8, daddr at 24. */
        struct nftmsg v6;
        nftmsg_init(&v6, 6, 0);
        n = one_rule(&v6, &(struct nftir_stmt) {.kind = NFTIR_ADDR, .saddr = true, .cidr = cidr("fd00::/64")}, e);
        CHECK(n == 2 && u32(e[0].tb[NFTA_PAYLOAD_OFFSET]) == 8 && u32(e[0].tb[NFTA_PAYLOAD_LEN]) == 8);
        n = one_rule(&v6, &(struct nftir_stmt) {.kind = NFTIR_ADDR_SET, .name = {"cluster-ips", NULL, false}}, e);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "payload lookup");
        CHECK(u32(e[0].tb[NFTA_PAYLOAD_OFFSET]) == 24 && u32(e[0].tb[NFTA_PAYLOAD_LEN]) == 16);
        CHECK_STREQ(str(e[1].tb[NFTA_LOOKUP_SET]), "cluster-ips");
        CHECK(!e[1].tb[NFTA_LOOKUP_DREG] && !e[1].tb[NFTA_LOOKUP_FLAGS]);
        nftmsg_done(&v6);
        nftmsg_done(&m);
}

/* A list of addresses and ranges: an anonymous interval set, declared
 * before the rule, merged and closed as nft lays it out; one item is a
 * plain match. */
static void test_interval_set(void) {
        struct nftmsg m;
        struct expr e[MAX_EXPRS];
        char names[128], hex[64];
        const struct inet_cidr ranges[] = {cidr("11.0.0.0/8"), cidr("10.0.0.0/8"), cidr("10.1.0.0/16")};
        const struct inet_addr addrs[] = {cidr("192.168.1.1/32").addr};
        struct nftir_stmt s = {.kind = NFTIR_ADDR_LIST, .saddr = true, .neg = true, .cidrs = ranges, .n_cidrs = 3,
                               .addrs = addrs, .n_addrs = 1};
        nftmsg_init(&m, 4, 0);
        size_t n = one_rule(&m, &s, e);
        CHECK(m.n == 3);
        const struct nlattr *tb[MAX_ATTRS], *el, *d[MAX_ATTRS];
        attrs(msg_at(&m, 0), tb);
        CHECK((msg_at(&m, 0)->nlmsg_type & 0xff) == NFT_MSG_NEWSET);
        CHECK(u32(tb[NFTA_SET_FLAGS]) == (NFT_SET_ANONYMOUS | NFT_SET_CONSTANT | NFT_SET_INTERVAL));
        uint32_t id = u32(tb[NFTA_SET_ID]);
        nested(tb[NFTA_SET_DESC], d);
        CHECK(u32(d[NFTA_SET_DESC_SIZE]) == 5);
        /* 0 (an end: nothing below), 10.0.0.0 up to 12.0.0.0 (10/8 and
         * 11/8 meet, 10.1/16 is inside), 192.168.1.1 up to .2. */
        const char *want[] = {"00000000 end", "0a000000", "0c000000 end", "c0a80101", "c0a80102 end"};
        size_t k = 0;
        attrs(msg_at(&m, 1), tb);
        CHECK(u32(tb[NFTA_SET_ELEM_LIST_SET_ID]) == id);
        mnl_attr_for_each_nested(el, tb[NFTA_SET_ELEM_LIST_ELEMENTS]) {
                const struct nlattr *a[MAX_ATTRS];
                char got[32];
                nested(el, a);
                snprintf(got, sizeof got, "%s%s", value(a[NFTA_SET_ELEM_KEY], hex, sizeof hex),
                         a[NFTA_SET_ELEM_FLAGS] && u32(a[NFTA_SET_ELEM_FLAGS]) == NFT_SET_ELEM_INTERVAL_END ? " end"
                                                                                                     : "");
                CHECK(k < 5);
                if (k < 5)
                        CHECK_STREQ(got, want[k]);
                k++;
        }
        CHECK(k == 5);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "payload lookup");
        CHECK(u32(e[0].tb[NFTA_PAYLOAD_OFFSET]) == 12);
        CHECK(u32(e[1].tb[NFTA_LOOKUP_SET_ID]) == id && u32(e[1].tb[NFTA_LOOKUP_FLAGS]) == NFT_LOOKUP_F_INV);

        /* One item: a plain match, no set. */
        s.n_cidrs = 0;
        n = one_rule(&m, &s, e);
        CHECK(m.n == 1 && n == 2 && strcmp(e[1].name, "cmp") == 0);
        CHECK_STREQ(value(e[1].tb[NFTA_CMP_DATA], hex, sizeof hex), "c0a80101");
        nftmsg_done(&m);
}

/* The other statements, each as nft writes it. */
static void test_statements(void) {
        struct nftmsg m, v6;
        struct expr e[MAX_EXPRS];
        char names[128], hex[64], v[128];
        nftmsg_init(&m, 4, 0);
        nftmsg_init(&v6, 6, 0);

        size_t n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_CT_NEW}, e);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "ct bitwise cmp");
        CHECK(u32(e[0].tb[NFTA_CT_KEY]) == NFT_CT_STATE && u32(e[2].tb[NFTA_CMP_OP]) == NFT_CMP_NEQ);

        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_IIFNAME, .name = {"eth*", NULL, false}}, e);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "meta cmp");
        CHECK(u32(e[0].tb[NFTA_META_KEY]) == NFT_META_IIFNAME);
        CHECK_STREQ(value(e[1].tb[NFTA_CMP_DATA], hex, sizeof hex), "657468");
        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_IIFNAME, .neg = true, .name = {"eth0", NULL, false}}, e);
        CHECK(u32(e[1].tb[NFTA_CMP_OP]) == NFT_CMP_NEQ);
        CHECK_STREQ(value(e[1].tb[NFTA_CMP_DATA], hex, sizeof hex), "65746830000000000000000000000000");

        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_FIB_LOCAL}, e);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "fib cmp");
        CHECK(u32(e[0].tb[NFTA_FIB_FLAGS]) == NFTA_FIB_F_DADDR);
        CHECK(u32(e[0].tb[NFTA_FIB_RESULT]) == NFT_FIB_RESULT_ADDRTYPE);

        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_NUMGEN, .n = 3}, e);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "numgen cmp");
        CHECK(u32(e[0].tb[NFTA_NG_MODULUS]) == 3 && u32(e[0].tb[NFTA_NG_TYPE]) == NFT_NG_RANDOM);

        /* vmap: ipX daddr . meta l4proto . th dport, in 4-byte registers
         * 1, 9, 10 (IPv6: 1, 12, 13). */
        struct nftir_stmt vmap = {.kind = NFTIR_VMAP, .with_addr = true, .name = {"service-ips", NULL, false}};
        n = one_rule(&m, &vmap, e);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "payload meta payload lookup");
        CHECK(u32(e[0].tb[NFTA_PAYLOAD_DREG]) == NFT_REG_1 && u32(e[1].tb[NFTA_META_DREG]) == NFT_REG32_01);
        CHECK(u32(e[2].tb[NFTA_PAYLOAD_DREG]) == NFT_REG32_02 && u32(e[2].tb[NFTA_PAYLOAD_OFFSET]) == 2);
        CHECK(u32(e[3].tb[NFTA_LOOKUP_DREG]) == NFT_REG_VERDICT);
        n = one_rule(&v6, &vmap, e);
        CHECK(u32(e[1].tb[NFTA_META_DREG]) == NFT_REG32_04 && u32(e[2].tb[NFTA_PAYLOAD_DREG]) == NFT_REG32_05);
        vmap.with_addr = false;
        n = one_rule(&m, &vmap, e);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "meta payload lookup");
        CHECK(u32(e[0].tb[NFTA_META_DREG]) == NFT_REG_1 && u32(e[1].tb[NFTA_PAYLOAD_DREG]) == NFT_REG32_01);

        /* Marks: or is (mark & ~n) ^ n, and & n == 0 a match. */
        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_MARK_OR, .n = 0x4000}, e);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "meta bitwise meta");
        CHECK_STREQ(value(e[1].tb[NFTA_BITWISE_MASK], hex, sizeof hex), "ffbfffff");
        CHECK_STREQ(value(e[1].tb[NFTA_BITWISE_XOR], hex, sizeof hex), "00400000");
        CHECK(u32(e[2].tb[NFTA_META_SREG]) == NFT_REG_1 && u32(e[2].tb[NFTA_META_KEY]) == NFT_META_MARK);
        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_MARK_XOR, .n = 0x4000}, e);
        CHECK_STREQ(value(e[1].tb[NFTA_BITWISE_MASK], hex, sizeof hex), "ffffffff");
        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_MARK_CLEAR, .n = 0x4000}, e);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "meta bitwise cmp");

        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_UPDATE_SADDR, .name = {"affinity-x", NULL, false}}, e);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "payload dynset");
        CHECK(u32(e[1].tb[NFTA_DYNSET_OP]) == NFT_DYNSET_OP_UPDATE);
        CHECK_STREQ(str(e[1].tb[NFTA_DYNSET_SET_NAME]), "affinity-x");

        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_L4PROTO, .proto = IPPROTO_UDP}, e);
        CHECK_STREQ(value(e[1].tb[NFTA_CMP_DATA], hex, sizeof hex), "11");

        /* dnat to 10.244.0.5:8080 */
        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_DNAT, .cidr = cidr("10.244.0.5/32"), .port = 8080}, e);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "immediate immediate nat");
        CHECK_STREQ(value(e[0].tb[NFTA_IMMEDIATE_DATA], hex, sizeof hex), "0af40005");
        CHECK_STREQ(value(e[1].tb[NFTA_IMMEDIATE_DATA], hex, sizeof hex), "1f90");
        CHECK(u32(e[2].tb[NFTA_NAT_TYPE]) == NFT_NAT_DNAT && u32(e[2].tb[NFTA_NAT_FAMILY]) == NFPROTO_IPV4);
        CHECK(u32(e[2].tb[NFTA_NAT_FLAGS]) == NF_NAT_RANGE_PROTO_SPECIFIED && !e[2].tb[NFTA_NAT_REG_ADDR_MAX]);

        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_MASQ}, e);
        CHECK(n == 1 && u32(e[0].tb[NFTA_MASQ_FLAGS]) == NF_NAT_RANGE_PROTO_RANDOM_FULLY);
        n = one_rule(&v6, &(struct nftir_stmt) {.kind = NFTIR_REJECT}, e);
        CHECK(n == 1 && *(const uint8_t *) mnl_attr_get_payload(e[0].tb[NFTA_REJECT_ICMP_CODE]) == 4);

        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_GOTO, .name = {"endpoint-", "X", false}}, e);
        CHECK(n == 1 && u32(e[0].tb[NFTA_IMMEDIATE_DREG]) == NFT_REG_VERDICT);
        CHECK_STREQ(verdict(e[0].tb[NFTA_IMMEDIATE_DATA], v, sizeof v), "-4 endpoint-X");
        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_JUMP, .name = {"services", NULL, false}}, e);
        CHECK_STREQ(verdict(e[0].tb[NFTA_IMMEDIATE_DATA], v, sizeof v), "-3 services");
        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_DROP}, e);
        CHECK_STREQ(verdict(e[0].tb[NFTA_IMMEDIATE_DATA], v, sizeof v), "0");
        n = one_rule(&m, &(struct nftir_stmt) {.kind = NFTIR_RETURN}, e);
        CHECK_STREQ(verdict(e[0].tb[NFTA_IMMEDIATE_DATA], v, sizeof v), "-5");
        nftmsg_done(&v6);
        nftmsg_done(&m);
}

/* A rule of several statements, with a comment, in its chain. */
static void test_rule(void) {
        struct nftmsg m;
        struct expr e[MAX_EXPRS];
        char names[128];
        struct nftir_rule r = {.s = {{.kind = NFTIR_ADDR, .cidr = cidr("10.96.0.10/32")},
                                     {.kind = NFTIR_GOTO, .name = {"service-", "X", false}}},
                               .n = 2,
                               .comment = "ns/svc:http cluster IP"};
        struct nftir_chain c = {.name = {"services", NULL, false}, .table = 2, .rules = &r, .n_rules = 1};
        const struct nlattr *tb[MAX_ATTRS];
        nftmsg_init(&m, 4, 0);
        nftmsg_rules(&m, &c);
        CHECK(m.n == 1 && (msg_at(&m, 0)->nlmsg_flags & NLM_F_APPEND));
        attrs(msg_at(&m, 0), tb);
        CHECK_STREQ(str(tb[NFTA_RULE_TABLE]), "kube-proxy-2");
        CHECK_STREQ(str(tb[NFTA_RULE_CHAIN]), "services");
        CHECK(mnl_attr_get_payload_len(tb[NFTA_RULE_USERDATA]) == 2 + strlen(r.comment) + 1);
        size_t n = exprs(msg_at(&m, 0), e);
        CHECK_STREQ(expr_names(e, n, names, sizeof names), "payload cmp immediate");
        nftmsg_done(&m);
}

static void test_elements(void) {
        uint8_t key[NFTMSG_KEY_MAX];
        struct nftir_elem e = {.set = "service-ips", .table = 1, .with_addr = true, .addr = cidr("10.96.0.10/32").addr,
                               .proto = IPPROTO_TCP, .port = 443, .verdict = NFTIR_GOTO,
                               .chain = {"service-", "X", false}, .comment = "ns/svc:https"};
        CHECK(nftmsg_elem_key(4, &e, key) == 12);
        CHECK(memcmp(key, (const uint8_t[]) {10, 96, 0, 10, 6, 0, 0, 0, 1, 187, 0, 0}, 12) == 0);
        struct nftir_elem ports = {.set = "service-nodeports", .proto = IPPROTO_UDP, .port = 30001,
                                   .verdict = NFTIR_DROP};
        CHECK(nftmsg_elem_key(4, &ports, key) == 8 && key[0] == 17 && key[4] == 0x75 && key[5] == 0x31);
        struct nftir_elem v6 = {.set = "cluster-ips", .with_addr = true, .addr = cidr("fd00::1/128").addr};
        CHECK(nftmsg_elem_key(6, &v6, key) == 16 && key[0] == 0xfd && key[15] == 1);

        struct nftmsg m;
        const struct nlattr *tb[MAX_ATTRS], *el, *a[MAX_ATTRS];
        char hex[64], v[128];
        nftmsg_init(&m, 4, 0);
        nftmsg_elem(&m, &e);
        nftmsg_elem(&m, &ports);
        nftmsg_elem_del(&m, "service-ips", key, 4);
        attrs(msg_at(&m, 0), tb);
        CHECK_STREQ(str(tb[NFTA_SET_ELEM_LIST_TABLE]), "kube-proxy-1");
        CHECK_STREQ(str(tb[NFTA_SET_ELEM_LIST_SET]), "service-ips");
        mnl_attr_for_each_nested(el, tb[NFTA_SET_ELEM_LIST_ELEMENTS]) nested(el, a);
        CHECK_STREQ(value(a[NFTA_SET_ELEM_KEY], hex, sizeof hex), "0a60000a0600000001bb0000");
        CHECK_STREQ(verdict(a[NFTA_SET_ELEM_DATA], v, sizeof v), "-4 service-X");
        CHECK(a[NFTA_SET_ELEM_USERDATA] != NULL);
        attrs(msg_at(&m, 1), tb);
        mnl_attr_for_each_nested(el, tb[NFTA_SET_ELEM_LIST_ELEMENTS]) nested(el, a);
        CHECK_STREQ(verdict(a[NFTA_SET_ELEM_DATA], v, sizeof v), "0");
        attrs(msg_at(&m, 2), tb);
        CHECK((msg_at(&m, 2)->nlmsg_type & 0xff) == NFT_MSG_DELSETELEM);
        mnl_attr_for_each_nested(el, tb[NFTA_SET_ELEM_LIST_ELEMENTS]) nested(el, a);
        CHECK(!a[NFTA_SET_ELEM_DATA] && !a[NFTA_SET_ELEM_USERDATA]);
        nftmsg_done(&m);
}

/* Appended messages continue the sequence; ranges take whole messages. */
static void test_append(void) {
        struct nftmsg a, b;
        nftmsg_init(&a, 4, 10);
        nftmsg_init(&b, 4, 500);
        nftmsg_batch_begin(&a);
        nftmsg_table(&a);
        for (int i = 0; i < 3; i++) {
                char name[16];
                snprintf(name, sizeof name, "c%d", i);
                nftmsg_chain_flush(&b, name);
        }
        const struct nlmsghdr *second = msg_at(&b, 1);
        size_t off = (size_t) ((const char *) second - b.b.data);
        nftmsg_append_range(&a, &b, off, NLMSG_ALIGN(second->nlmsg_len));
        nftmsg_append(&a, &b);
        CHECK(a.n == 5 && msgs(&a) == 6 && a.seq == 16);
        for (size_t i = 0; i < 6; i++)
                CHECK(msg_at(&a, i)->nlmsg_seq == 11 + i);
        const struct nlattr *tb[MAX_ATTRS];
        const char *want[] = {"c1", "c0", "c1", "c2"};
        for (size_t i = 0; i < 4; i++) {
                attrs(msg_at(&a, 2 + i), tb);
                CHECK_STREQ(str(tb[NFTA_RULE_CHAIN]), want[i]);
        }
        CHECK(a.b.data + a.last == (const char *) msg_at(&a, 5));
        nftmsg_append_range(&a, &b, 0, 0);     /* nothing */
        CHECK(a.n == 5);
        nftmsg_done(&a);
        nftmsg_done(&b);
}

/* One-element messages merged into one per table and set, every element
 * kept, in order; large sets in several messages of at most 32 kB. */
static void test_merge(void) {
        struct nftmsg src, m;
        nftmsg_init(&src, 4, 0);
        nftmsg_init(&m, 4, 0);
        for (int i = 0; i < 2000; i++) {
                struct nftir_elem e = {.set = i % 2 ? "service-ips" : "cluster-ips", .table = (uint16_t) (i % 3 == 0),
                                       .with_addr = true, .addr = cidr("10.96.0.0/32").addr};
                e.addr.bytes[2] = (uint8_t) (i >> 8);
                e.addr.bytes[3] = (uint8_t) i;
                nftmsg_elem(&src, &e);
        }
        nftmsg_append_elems_merged(&m, &src);
        /* Four (table, set) pairs, 500 elements each. */
        size_t seen[4] = {0}, n = msgs(&m);
        int last[4] = {-1, -1, -1, -1};
        bool ordered = true;
        CHECK(n >= 4 && n < 16);
        for (size_t i = 0; i < n; i++) {
                const struct nlmsghdr *nlh = msg_at(&m, i);
                const struct nlattr *tb[MAX_ATTRS], *el, *a[MAX_ATTRS];
                CHECK(nlh->nlmsg_len <= 33 * 1024);
                attrs(nlh, tb);
                int k = (strcmp(str(tb[NFTA_SET_ELEM_LIST_SET]), "service-ips") == 0) * 2 +
                        (strcmp(str(tb[NFTA_SET_ELEM_LIST_TABLE]), "kube-proxy-1") == 0);
                mnl_attr_for_each_nested(el, tb[NFTA_SET_ELEM_LIST_ELEMENTS]) {
                        const struct nlattr *d[MAX_ATTRS];
                        nested(el, a);
                        nested(a[NFTA_SET_ELEM_KEY], d);
                        const uint8_t *p = mnl_attr_get_payload(d[NFTA_DATA_VALUE]);
                        int i_elem = p[2] << 8 | p[3];
                        ordered &= i_elem > last[k] && (i_elem % 2 == 1) == (k >= 2) && (i_elem % 3 == 0) == (k % 2);
                        last[k] = i_elem;
                        seen[k]++;
                }
        }
        CHECK(ordered);
        CHECK(seen[0] + seen[1] + seen[2] + seen[3] == 2000);
        CHECK(seen[0] > 0 && seen[1] > 0 && seen[2] > 0 && seen[3] > 0);
        nftmsg_done(&src);
        nftmsg_done(&m);
}

int main(void) {
        TEST_RUN(test_framing);
        TEST_RUN(test_table);
        TEST_RUN(test_sets);
        TEST_RUN(test_chains_and_by_name);
        TEST_RUN(test_addresses);
        TEST_RUN(test_interval_set);
        TEST_RUN(test_statements);
        TEST_RUN(test_rule);
        TEST_RUN(test_elements);
        TEST_RUN(test_append);
        TEST_RUN(test_merge);
        TEST_DONE();
}
