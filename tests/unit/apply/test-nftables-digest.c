/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rule-digest canonicaliser (apply/nftables-digest.h): a rule as
 * kproxy encodes it and the same rule as the kernel dumps it have one
 * digest, and different rules do not. The kernel's form is made here from
 * kproxy's bytes the ways the kernel's dumps differ (nests without
 * NLA_F_NESTED, an expression's attributes in another order, zero
 * defaults it adds, a nat's maximum registers, a counter's values), so
 * the test needs no kernel; tests/netns/test-nftsync.sh checks it against
 * one.
 */
#include <netinet/in.h>

#include <endian.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "apply/nftables-digest.h"
#include "render/nftir.h"
#include "render/nftmsg.h"
#include "test.h"
#include "util/inet.h"

static struct inet_cidr cidr(const char *s) {
        struct inet_cidr c;
        if (inet_cidr_parse(s, &c) < 0)
                abort();
        return c;
}

/* Copies a, its nests without NLA_F_NESTED (the kernel's dumps leave the
 * flag out). */
static void copy_bare(struct nlmsghdr *out, const struct nlattr *a) {
        if (!(a->nla_type & NLA_F_NESTED)) {
                mnl_attr_put(out, mnl_attr_get_type(a), mnl_attr_get_payload_len(a), mnl_attr_get_payload(a));
                return;
        }
        const struct nlattr *c;
        struct nlattr *n = mnl_attr_nest_start(out, mnl_attr_get_type(a));
        n->nla_type &= (uint16_t) ~NLA_F_NESTED;
        mnl_attr_for_each_nested(c, a) copy_bare(out, c);
        mnl_attr_nest_end(out, n);
}

/* One expression as the kernel dumps it: its attributes in reverse
 * order, and what the kernel adds. */
static void kernel_expr(struct nlmsghdr *out, const struct nlattr *elem, bool counter_values) {
        const struct nlattr *x, *name = NULL, *data = NULL, *a[32];
        int n = 0;
        mnl_attr_for_each_nested(x, elem) {
                if (mnl_attr_get_type(x) == NFTA_EXPR_NAME)
                        name = x;
                else if (mnl_attr_get_type(x) == NFTA_EXPR_DATA)
                        data = x;
        }
        const char *nm = mnl_attr_get_str(name);
        struct nlattr *e = mnl_attr_nest_start(out, NFTA_LIST_ELEM);
        e->nla_type &= (uint16_t) ~NLA_F_NESTED;
        mnl_attr_put_strz(out, NFTA_EXPR_NAME, nm);
        struct nlattr *d = mnl_attr_nest_start(out, NFTA_EXPR_DATA);
        d->nla_type &= (uint16_t) ~NLA_F_NESTED;
        if (data)
                mnl_attr_for_each_nested(x, data) a[n++] = x;
        const struct nlattr *addr_min = NULL, *proto_min = NULL;
        for (int i = n - 1; i >= 0; i--) {
                uint16_t t = mnl_attr_get_type(a[i]);
                if (strcmp(nm, "nat") == 0 && t == NFTA_NAT_FLAGS) {
                        /* An address range is flagged so. */
                        mnl_attr_put_u32(out, t, mnl_attr_get_u32(a[i]) | htonl(NF_NAT_RANGE_MAP_IPS));
                        continue;
                }
                if (strcmp(nm, "nat") == 0 && t == NFTA_NAT_REG_ADDR_MIN)
                        addr_min = a[i];
                if (strcmp(nm, "nat") == 0 && t == NFTA_NAT_REG_PROTO_MIN)
                        proto_min = a[i];
                copy_bare(out, a[i]);
        }
        if (strcmp(nm, "lookup") == 0)
                mnl_attr_put_u32(out, NFTA_LOOKUP_FLAGS, 0);
        else if (strcmp(nm, "bitwise") == 0)
                mnl_attr_put_u32(out, NFTA_BITWISE_OP, htonl(NFT_BITWISE_BOOL));
        else if (strcmp(nm, "numgen") == 0)
                mnl_attr_put_u32(out, NFTA_NG_OFFSET, 0);
        else if (strcmp(nm, "dynset") == 0) {
                mnl_attr_put_u64(out, NFTA_DYNSET_TIMEOUT, 0);
                mnl_attr_put_u32(out, NFTA_DYNSET_FLAGS, 0);
        } else if (strcmp(nm, "counter") == 0 && counter_values) {
                mnl_attr_put_u64(out, NFTA_COUNTER_BYTES, htobe64(123456));
                mnl_attr_put_u64(out, NFTA_COUNTER_PACKETS, htobe64(789));
        }
        /* The maximum registers, the same as the minimum ones. */
        if (addr_min)
                mnl_attr_put(out, NFTA_NAT_REG_ADDR_MAX, 4, mnl_attr_get_payload(addr_min));
        if (proto_min)
                mnl_attr_put(out, NFTA_NAT_REG_PROTO_MAX, 4, mnl_attr_get_payload(proto_min));
        mnl_attr_nest_end(out, d);
        mnl_attr_nest_end(out, e);
}

/* The rule message nlh as the kernel's dump of it, in buf. */
static const struct nlmsghdr *kernel_rule(const struct nlmsghdr *nlh, char *buf, bool counter_values) {
        struct nlmsghdr *out = mnl_nlmsg_put_header(buf);
        out->nlmsg_type = nlh->nlmsg_type;
        out->nlmsg_flags = NLM_F_MULTI;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(out, sizeof *g);
        *g = *(const struct nfgenmsg *) mnl_nlmsg_get_payload(nlh);
        const struct nlattr *a, *el;
        mnl_attr_put_u64(out, NFTA_RULE_HANDLE, htobe64(42));
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                if (mnl_attr_get_type(a) != NFTA_RULE_EXPRESSIONS) {
                        copy_bare(out, a);
                        continue;
                }
                struct nlattr *list = mnl_attr_nest_start(out, NFTA_RULE_EXPRESSIONS);
                list->nla_type &= (uint16_t) ~NLA_F_NESTED;
                mnl_attr_for_each_nested(el, a) kernel_expr(out, el, counter_values);
                mnl_attr_nest_end(out, list);
        }
        return out;
}

/* The digest of one rule of the statements (with comment) as kproxy
 * encodes it, and (*ret_kernel) as the kernel dumps it. */
static uint64_t digest(const struct nftir_stmt *s, size_t n, const char *comment, uint64_t *ret_kernel) {
        struct nftir_rule r = {.n = n, .comment = comment};
        if (n)
                memcpy(r.s, s, n * sizeof *s);
        struct nftir_chain c = {.name = {"a-chain", NULL, false}, .rules = &r, .n_rules = 1};
        struct nftmsg m;
        char buf[8192];
        nftmsg_init(&m, 4, 0);
        nftmsg_rules(&m, &c);
        const struct nlmsghdr *nlh = (const struct nlmsghdr *) (m.b.data + m.last);
        uint64_t d = nftables_rule_msg_digest(NFTABLES_DIGEST_INIT, nlh);
        if (ret_kernel)
                *ret_kernel = nftables_rule_msg_digest(NFTABLES_DIGEST_INIT, kernel_rule(nlh, buf, false));
        nftmsg_done(&m);
        return d;
}

/* Every statement kproxy writes, one rule each, digests as the kernel's
 * form of it does; and no two of them alike. */
static void test_kernel_form(void) {
        const struct nftir_stmt stmts[] = {
                {.kind = NFTIR_CT_NEW},
                {.kind = NFTIR_ADDR, .cidr = cidr("10.96.0.10/32")},
                {.kind = NFTIR_ADDR, .saddr = true, .neg = true, .cidr = cidr("10.96.0.0/12")},
                {.kind = NFTIR_ADDR_SET, .name = {"cluster-ips", NULL, false}},
                {.kind = NFTIR_IIFNAME, .name = {"eth*", NULL, false}},
                {.kind = NFTIR_FIB_LOCAL, .saddr = true},
                {.kind = NFTIR_NUMGEN, .n = 4},
                {.kind = NFTIR_VMAP, .with_addr = true, .name = {"service-ips", NULL, false}},
                {.kind = NFTIR_VMAP, .name = {"service-nodeports", NULL, false}},
                {.kind = NFTIR_MARK_OR, .n = 0x4000},
                {.kind = NFTIR_MARK_XOR, .n = 0x4000},
                {.kind = NFTIR_MARK_CLEAR, .n = 0x4000},
                {.kind = NFTIR_UPDATE_SADDR, .name = {"affinity-x", NULL, false}},
                {.kind = NFTIR_L4PROTO, .proto = IPPROTO_TCP},
                {.kind = NFTIR_DNAT, .cidr = cidr("10.244.0.5/32"), .port = 8080},
                {.kind = NFTIR_MASQ},
                {.kind = NFTIR_REJECT},
                {.kind = NFTIR_JUMP, .name = {"services", NULL, false}},
                {.kind = NFTIR_GOTO, .name = {"endpoint-", "X", false}},
                {.kind = NFTIR_DROP},
                {.kind = NFTIR_RETURN},
        };
        const size_t n = sizeof stmts / sizeof *stmts;
        uint64_t d[sizeof stmts / sizeof *stmts], k;
        for (size_t i = 0; i < n; i++) {
                d[i] = digest(&stmts[i], 1, NULL, &k);
                if (d[i] != k)
                        fprintf(stderr, "statement %zu: kproxy's %016llx, the kernel's %016llx\n", i,
                                (unsigned long long) d[i], (unsigned long long) k);
                CHECK(d[i] == k && d[i] != NFTABLES_DIGEST_INIT);
                for (size_t j = 0; j < i; j++)
                        CHECK(d[i] != d[j]);
        }
        /* Several statements, and a comment. */
        uint64_t a = digest(stmts + 1, 3, "ns/svc:http", &k);
        CHECK(a == k);
        CHECK(a != digest(stmts + 1, 3, "ns/svc:https", NULL) && a != digest(stmts + 1, 3, NULL, NULL));
        CHECK(a != digest(stmts + 2, 3, "ns/svc:http", NULL));
}

/* The same statement kind, other values: other digests. */
static void test_values_count(void) {
        struct nftir_stmt s = {.kind = NFTIR_DNAT, .cidr = cidr("10.244.0.5/32"), .port = 8080};
        uint64_t a = digest(&s, 1, NULL, NULL);
        s.port = 8081;
        CHECK(digest(&s, 1, NULL, NULL) != a);
        s.port = 8080;
        s.cidr = cidr("10.244.0.6/32");
        CHECK(digest(&s, 1, NULL, NULL) != a);
        struct nftir_stmt g = {.kind = NFTIR_GOTO, .name = {"endpoint-", "X", false}};
        a = digest(&g, 1, NULL, NULL);
        g.name.body = "Y";
        CHECK(digest(&g, 1, NULL, NULL) != a);
        uint64_t go = digest(&g, 1, NULL, NULL);
        g.kind = NFTIR_JUMP;
        CHECK(digest(&g, 1, NULL, NULL) != go);
}

/* A list of ranges is an anonymous set the kernel names: its rule has no
 * digest a dump could match, and the sync always writes it
 * (proxy/nftables/nftsync-full.c). The rule message itself still digests. */
static void test_anonymous_set(void) {
        const struct inet_cidr ranges[2] = {cidr("10.0.0.0/8"), cidr("192.168.0.0/16")};
        struct nftir_stmt s = {.kind = NFTIR_ADDR_LIST, .saddr = true, .neg = true, .cidrs = ranges, .n_cidrs = 2};
        uint64_t k, d = digest(&s, 1, NULL, &k);
        CHECK(d == k);
}

/* A counter's values are traffic, not the rule: they do not count, the
 * counter does. */
static void test_counter(void) {
        char b1[4096], b2[4096];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(b1);
        nlh->nlmsg_type = NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWRULE;
        mnl_nlmsg_put_extra_header(nlh, sizeof(struct nfgenmsg));
        struct nlattr *list = mnl_attr_nest_start(nlh, NFTA_RULE_EXPRESSIONS);
        struct nlattr *e = mnl_attr_nest_start(nlh, NFTA_LIST_ELEM);
        mnl_attr_put_strz(nlh, NFTA_EXPR_NAME, "counter");
        struct nlattr *d = mnl_attr_nest_start(nlh, NFTA_EXPR_DATA);
        mnl_attr_put_u64(nlh, NFTA_COUNTER_BYTES, 0);
        mnl_attr_put_u64(nlh, NFTA_COUNTER_PACKETS, 0);
        mnl_attr_nest_end(nlh, d);
        mnl_attr_nest_end(nlh, e);
        mnl_attr_nest_end(nlh, list);
        uint64_t zero = nftables_rule_msg_digest(NFTABLES_DIGEST_INIT, nlh);
        uint64_t counted = nftables_rule_msg_digest(NFTABLES_DIGEST_INIT, kernel_rule(nlh, b2, true));
        CHECK(zero == counted);
        uint64_t none = digest(NULL, 0, NULL, NULL);
        CHECK(zero != none);
}

/* Digests fold: a chain's rules in order. */
static void test_fold(void) {
        struct nftir_rule r[2] = {{.s = {{.kind = NFTIR_DROP}}, .n = 1}, {.s = {{.kind = NFTIR_RETURN}}, .n = 1}};
        struct nftir_chain ab = {.name = {"c", NULL, false}, .rules = r, .n_rules = 2};
        struct nftmsg m;
        nftmsg_init(&m, 4, 0);
        nftmsg_rules(&m, &ab);
        const struct nlmsghdr *first = (const struct nlmsghdr *) m.b.data;
        const struct nlmsghdr *second = (const struct nlmsghdr *) (m.b.data + NLMSG_ALIGN(first->nlmsg_len));
        uint64_t fwd = nftables_rule_msg_digest(nftables_rule_msg_digest(NFTABLES_DIGEST_INIT, first), second);
        uint64_t back = nftables_rule_msg_digest(nftables_rule_msg_digest(NFTABLES_DIGEST_INIT, second), first);
        CHECK(fwd != back);
        nftmsg_done(&m);
}

/* A chain's hook, priority, type and policy, as kproxy sends them and as
 * the kernel dumps them (the hook unflagged as a nest, the policy given,
 * its handle and use added). */
static void test_chain_spec(void) {
        struct nftir_chain base = {.name = {"nat-prerouting", NULL, false}, .type = "nat", .hook = "prerouting",
                                   .prio = -100};
        struct nftir_chain plain = {.name = {"services", NULL, false}};
        struct nftmsg m;
        char buf[1024];
        nftmsg_init(&m, 4, 0);
        nftmsg_chain(&m, &base);
        nftmsg_chain(&m, &plain);
        base.prio = -99;
        nftmsg_chain(&m, &base);
        const struct nlmsghdr *ours = (const struct nlmsghdr *) m.b.data;
        const struct nlmsghdr *regular = (const struct nlmsghdr *) (m.b.data + NLMSG_ALIGN(ours->nlmsg_len));
        const struct nlmsghdr *other = (const struct nlmsghdr *) (m.b.data + m.last);
        uint64_t spec = nftables_chain_spec(ours);
        CHECK(spec > 1 && nftables_chain_spec(regular) == 1 && nftables_chain_spec(other) != spec);

        struct nlmsghdr *k = mnl_nlmsg_put_header(buf);
        k->nlmsg_type = ours->nlmsg_type;
        mnl_nlmsg_put_extra_header(k, sizeof(struct nfgenmsg));
        mnl_attr_put_strz(k, NFTA_CHAIN_TABLE, "kube-proxy");
        mnl_attr_put_strz(k, NFTA_CHAIN_NAME, "nat-prerouting");
        mnl_attr_put_u64(k, NFTA_CHAIN_HANDLE, htobe64(7));
        struct nlattr *h = mnl_attr_nest_start(k, NFTA_CHAIN_HOOK);
        h->nla_type &= (uint16_t) ~NLA_F_NESTED;
        mnl_attr_put_u32(k, NFTA_HOOK_HOOKNUM, htonl(NF_INET_PRE_ROUTING));
        mnl_attr_put_u32(k, NFTA_HOOK_PRIORITY, htonl((uint32_t) -100));
        mnl_attr_nest_end(k, h);
        mnl_attr_put_u32(k, NFTA_CHAIN_POLICY, htonl(NF_ACCEPT));
        mnl_attr_put_strz(k, NFTA_CHAIN_TYPE, "nat");
        mnl_attr_put_u32(k, NFTA_CHAIN_USE, htonl(3));
        CHECK(nftables_chain_spec(k) == spec);
        nftmsg_done(&m);
}

struct targets {
        char seen[256];
};

static void on_target(const char *chain, void *userdata) {
        struct targets *t = userdata;
        size_t len = strlen(t->seen);
        snprintf(t->seen + len, sizeof t->seen - len, "%s%s", len ? "," : "", chain);
}

/* The chains a rule jumps or goes to, whatever else it does. */
static void test_targets(void) {
        struct nftir_rule r[3] = {
                {.s = {{.kind = NFTIR_ADDR, .cidr = cidr("10.0.0.1/32")},
                       {.kind = NFTIR_JUMP, .name = {"mark-", "x", false}}},
                 .n = 2},
                {.s = {{.kind = NFTIR_VMAP, .name = {"service-ips", NULL, false}}}, .n = 1},
                {.s = {{.kind = NFTIR_GOTO, .name = {"endpoint-", "y", false}}}, .n = 1},
        };
        struct nftir_chain c = {.name = {"c", NULL, false}, .rules = r, .n_rules = 3};
        struct nftmsg m;
        struct targets t = {""};
        nftmsg_init(&m, 4, 0);
        nftmsg_rules(&m, &c);
        for (size_t off = 0; off < m.b.len;) {
                const struct nlmsghdr *nlh = (const struct nlmsghdr *) (m.b.data + off);
                nftables_rule_targets(nlh, on_target, &t);
                off += NLMSG_ALIGN(nlh->nlmsg_len);
        }
        CHECK_STREQ(t.seen, "mark-x,endpoint-y");
        nftmsg_done(&m);
}

/* Bytes that are not a well-formed rule digest to something, without
 * reading past them, and not to a real rule's digest. */
static void test_malformed(void) {
        char buf[512];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWRULE;
        mnl_nlmsg_put_extra_header(nlh, sizeof(struct nfgenmsg));
        struct nlattr *list = mnl_attr_nest_start(nlh, NFTA_RULE_EXPRESSIONS);
        struct nlattr *e = mnl_attr_nest_start(nlh, NFTA_LIST_ELEM);
        mnl_attr_put_strz(nlh, NFTA_EXPR_NAME, "cmp");
        struct nlattr *d = mnl_attr_nest_start(nlh, NFTA_EXPR_DATA);
        mnl_attr_put_u32(nlh, NFTA_CMP_SREG, htonl(1));
        mnl_attr_nest_end(nlh, d);
        mnl_attr_nest_end(nlh, e);
        mnl_attr_nest_end(nlh, list);
        uint64_t whole = nftables_rule_msg_digest(NFTABLES_DIGEST_INIT, nlh);
        /* The data's attribute claims more than its nest holds. */
        struct nlattr *inner = (struct nlattr *) ((char *) d + MNL_ATTR_HDRLEN);
        inner->nla_len = 200;
        uint64_t bad = nftables_rule_msg_digest(NFTABLES_DIGEST_INIT, nlh);
        CHECK(bad != whole && bad == nftables_rule_msg_digest(NFTABLES_DIGEST_INIT, nlh));
        /* An expression without a name. */
        inner->nla_len = 8;
        struct nlattr *name = (struct nlattr *) ((char *) e + MNL_ATTR_HDRLEN);
        name->nla_type = 99;
        CHECK(nftables_rule_msg_digest(NFTABLES_DIGEST_INIT, nlh) != whole);
}

int main(void) {
        TEST_RUN(test_kernel_form);
        TEST_RUN(test_values_count);
        TEST_RUN(test_anonymous_set);
        TEST_RUN(test_counter);
        TEST_RUN(test_fold);
        TEST_RUN(test_chain_spec);
        TEST_RUN(test_targets);
        TEST_RUN(test_malformed);
        TEST_DONE();
}
