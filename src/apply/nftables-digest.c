/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the rule digests: a chain that already holds what kproxy
 * would write is left alone, and telling so must not need the chain's
 * rules kept anywhere. So a rule message is folded into a 64-bit digest of
 * a canonical form that the bytes kproxy sends and the kernel's dump of
 * them share: attributes of an expression in type order (the kernel dumps
 * in its own order), without flags or padding, without what the kernel
 * adds when dumping (canon_default(), canon_nat()), and without a
 * counter's values. Which attributes nest is known per expression, as the
 * kernel's dumps do not flag nests. Pure: bytes in, numbers out.
 */
#include <netinet/in.h>

#include "apply/nftables-digest.h"

#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdbool.h>
#include <string.h>

#include "util/fnv.h"

#define CANON_MAX_ATTRS 16

struct canon_attr {
        uint16_t type;
        const uint8_t *p;
        uint16_t len;   /* of the payload */
};

/* Splits an attribute stream; returns how many (at most max), or -1 when
 * malformed or longer. */
static int canon_split(const uint8_t *p, size_t len, struct canon_attr *out, int max) {
        int n = 0;
        while (len >= sizeof(struct nlattr)) {
                struct nlattr a;
                memcpy(&a, p, sizeof a);
                if (a.nla_len < sizeof a || a.nla_len > len || n == max)
                        return -1;
                out[n++] = (struct canon_attr) {(uint16_t) (a.nla_type & NLA_TYPE_MASK), p + sizeof a,
                                                (uint16_t) (a.nla_len - sizeof a)};
                size_t total = MNL_ALIGN(a.nla_len);
                if (total >= len)
                        return n;
                p += total;
                len -= total;
        }
        return len == 0 ? n : -1;
}

static void canon_sort(struct canon_attr *a, int n) {
        for (int i = 1; i < n; i++)
                for (int j = i; j > 0 && a[j - 1].type > a[j].type; j--) {
                        struct canon_attr t = a[j];
                        a[j] = a[j - 1];
                        a[j - 1] = t;
                }
}

static uint64_t canon_raw(uint64_t h, const struct canon_attr *a) {
        h = fnv64(h, &a->type, sizeof a->type);
        h = fnv64(h, &a->len, sizeof a->len);
        return fnv64(h, a->p, a->len);
}

static uint64_t canon_expr(uint64_t h, const uint8_t *p, size_t len, int depth);

/* NFTA_DATA_*: a value, or a verdict (a nest of code and chain). */
static uint64_t canon_data(uint64_t h, const uint8_t *p, size_t len) {
        struct canon_attr a[CANON_MAX_ATTRS], v[CANON_MAX_ATTRS];
        int n = canon_split(p, len, a, CANON_MAX_ATTRS);
        if (n < 0)
                return fnv64(h ^ 1, p, len);
        canon_sort(a, n);
        for (int i = 0; i < n; i++) {
                int m = a[i].type == NFTA_DATA_VERDICT ? canon_split(a[i].p, a[i].len, v, CANON_MAX_ATTRS) : -1;
                if (m < 0) {
                        h = canon_raw(h, &a[i]);
                        continue;
                }
                h = fnv64(h, &a[i].type, sizeof a[i].type);
                canon_sort(v, m);
                for (int j = 0; j < m; j++)
                        h = canon_raw(h, &v[j]);
        }
        return h;
}

/* Which attributes of an expression are nests: data, or expressions. */
static int canon_nest_kind(const char *name, uint16_t type) {
        if ((strcmp(name, "cmp") == 0 && type == NFTA_CMP_DATA) ||
            (strcmp(name, "immediate") == 0 && type == NFTA_IMMEDIATE_DATA) ||
            (strcmp(name, "bitwise") == 0 &&
             (type == NFTA_BITWISE_MASK || type == NFTA_BITWISE_XOR || type == NFTA_BITWISE_DATA)) ||
            (strcmp(name, "range") == 0 && (type == NFTA_RANGE_FROM_DATA || type == NFTA_RANGE_TO_DATA)))
                return 1;
        if (strcmp(name, "dynset") == 0 && (type == NFTA_DYNSET_EXPR || type == NFTA_DYNSET_EXPRESSIONS))
                return 2;
        return 0;
}

/* What the kernel's dumps add to what was sent, as zeros: a lookup's
 * flags, a bitwise's operation (a mask and xor), a numgen's offset, a
 * dynset's timeout and flags. */
static bool canon_default(const char *name, const struct canon_attr *a) {
        static const struct {
                const char *name;
                uint16_t type;
        } zeros[] = {
                {"lookup", NFTA_LOOKUP_FLAGS},   {"bitwise", NFTA_BITWISE_OP}, {"numgen", NFTA_NG_OFFSET},
                {"dynset", NFTA_DYNSET_TIMEOUT}, {"dynset", NFTA_DYNSET_FLAGS},
        };
        for (size_t i = 0; i < sizeof zeros / sizeof zeros[0]; i++) {
                if (a->type != zeros[i].type || strcmp(name, zeros[i].name) != 0)
                        continue;
                for (uint16_t j = 0; j < a->len; j++)
                        if (a->p[j])
                                return false;
                return true;
        }
        return false;
}

/* A nat's ranges as the kernel dumps them: the maximum registers even when
 * they are the minimum ones, and the flag of an address range. Rewritten
 * (in a, with storage in flags) to what kproxy sends: no maximum registers
 * equal to the minimum ones, no address-range flag. */
static int canon_nat(struct canon_attr *a, int n, uint32_t *flags) {
        const struct canon_attr *addr_min = NULL, *proto_min = NULL;
        for (int i = 0; i < n; i++) {
                if (a[i].type == NFTA_NAT_REG_ADDR_MIN)
                        addr_min = &a[i];
                else if (a[i].type == NFTA_NAT_REG_PROTO_MIN)
                        proto_min = &a[i];
        }
        int m = 0;
        for (int i = 0; i < n; i++) {
                const struct canon_attr *min = a[i].type == NFTA_NAT_REG_ADDR_MAX    ? addr_min
                                               : a[i].type == NFTA_NAT_REG_PROTO_MAX ? proto_min
                                                                                     : NULL;
                if (min && min->len == a[i].len && memcmp(min->p, a[i].p, a[i].len) == 0)
                        continue;
                if (a[i].type == NFTA_NAT_FLAGS && a[i].len == 4 && addr_min) {
                        memcpy(flags, a[i].p, 4);
                        *flags &= ~htonl(NF_NAT_RANGE_MAP_IPS);
                        a[i].p = (const uint8_t *) flags;
                }
                a[m++] = a[i];
        }
        return m;
}

/* One expression: NFTA_EXPR_NAME and NFTA_EXPR_DATA. */
static uint64_t canon_expr(uint64_t h, const uint8_t *p, size_t len, int depth) {
        struct canon_attr e[CANON_MAX_ATTRS], a[CANON_MAX_ATTRS];
        const struct canon_attr *name = NULL, *data = NULL;
        char nm[32] = "";
        int n = canon_split(p, len, e, CANON_MAX_ATTRS);
        for (int i = 0; i < n; i++) {
                if (e[i].type == NFTA_EXPR_NAME)
                        name = &e[i];
                else if (e[i].type == NFTA_EXPR_DATA)
                        data = &e[i];
        }
        if (n < 0 || !name || name->len == 0 || name->len >= sizeof nm || depth > 4)
                return fnv64(h ^ 2, p, len);
        memcpy(nm, name->p, name->len);
        nm[name->len] = '\0';
        h = fnv64(h, nm, strlen(nm) + 1);
        /* A counter's values are traffic, not the rule (iptables-nft puts
         * one in every rule). */
        if (strcmp(nm, "counter") == 0)
                return h;
        int m = data ? canon_split(data->p, data->len, a, CANON_MAX_ATTRS) : 0;
        if (m < 0)
                return fnv64(h ^ 3, data->p, data->len);
        uint32_t nat_flags;
        if (strcmp(nm, "nat") == 0)
                m = canon_nat(a, m, &nat_flags);
        canon_sort(a, m);
        for (int i = 0; i < m; i++) {
                if (canon_default(nm, &a[i]))
                        continue;
                switch (canon_nest_kind(nm, a[i].type)) {
                case 1:
                        h = fnv64(h, &a[i].type, sizeof a[i].type);
                        h = canon_data(h, a[i].p, a[i].len);
                        break;
                case 2:
                        h = fnv64(h, &a[i].type, sizeof a[i].type);
                        h = canon_expr(h, a[i].p, a[i].len, depth + 1);
                        break;
                default:
                        h = canon_raw(h, &a[i]);
                }
        }
        return h;
}

/* NFTA_RULE_EXPRESSIONS: NFTA_LIST_ELEMs, in order. */
static uint64_t canon_exprs(uint64_t h, const uint8_t *p, size_t len) {
        while (len >= sizeof(struct nlattr)) {
                struct nlattr a;
                memcpy(&a, p, sizeof a);
                if (a.nla_len < sizeof a || a.nla_len > len)
                        break;
                h = canon_expr(h, p + sizeof a, a.nla_len - sizeof a, 0);
                size_t total = MNL_ALIGN(a.nla_len);
                if (total >= len)
                        return h;
                p += total;
                len -= total;
        }
        return fnv64(h ^ 4, p, len);
}

static uint64_t rule_digest(uint64_t h, const void *exprs, size_t exprs_len, const void *udata, size_t udata_len) {
        uint32_t n = 0x52554c45;       /* a rule starts */
        h = fnv64(h, &n, sizeof n);
        h = canon_exprs(h, exprs, exprs_len);
        n = udata ? (uint32_t) udata_len : UINT32_MAX;
        h = fnv64(h, &n, sizeof n);
        return udata ? fnv64(h, udata, udata_len) : h;
}

uint64_t nftables_rule_msg_digest(uint64_t h, const struct nlmsghdr *nlh) {
        const struct nlattr *a, *exprs = NULL, *udata = NULL;
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                if (mnl_attr_get_type(a) == NFTA_RULE_EXPRESSIONS)
                        exprs = a;
                else if (mnl_attr_get_type(a) == NFTA_RULE_USERDATA)
                        udata = a;
        }
        return rule_digest(h, exprs ? mnl_attr_get_payload(exprs) : NULL, exprs ? mnl_attr_get_payload_len(exprs) : 0,
                           udata ? mnl_attr_get_payload(udata) : NULL, udata ? mnl_attr_get_payload_len(udata) : 0);
}

uint64_t nftables_chain_spec(const struct nlmsghdr *nlh) {
        const struct nlattr *a, *h;
        const char *type = "";
        uint32_t hooknum = 0, prio = 0, policy = htonl(NF_ACCEPT);
        bool base = false;
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                switch (mnl_attr_get_type(a)) {
                case NFTA_CHAIN_TYPE:
                        if (mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
                                type = mnl_attr_get_str(a);
                        break;
                case NFTA_CHAIN_POLICY:
                        if (mnl_attr_get_payload_len(a) == 4)
                                policy = mnl_attr_get_u32(a);
                        break;
                case NFTA_CHAIN_HOOK:
                        base = true;
                        mnl_attr_for_each_nested(h, a) {
                                if (mnl_attr_get_payload_len(h) != 4)
                                        continue;
                                if (mnl_attr_get_type(h) == NFTA_HOOK_HOOKNUM)
                                        hooknum = mnl_attr_get_u32(h);
                                else if (mnl_attr_get_type(h) == NFTA_HOOK_PRIORITY)
                                        prio = mnl_attr_get_u32(h);
                        }
                        break;
                }
        }
        if (!base)
                return 1;
        uint64_t d = fnv64(FNV64_INIT, &hooknum, sizeof hooknum);
        d = fnv64(d, &prio, sizeof prio);
        d = fnv64(d, &policy, sizeof policy);
        d = fnv64(d, type, strlen(type));
        return d > 1 ? d : d + 2;
}

/* The chain of an immediate jump or goto: NFTA_IMMEDIATE_DATA's verdict. */
static const char *verdict_chain(const struct nlattr *data) {
        const struct nlattr *a, *v, *chain = NULL;
        uint32_t code = 0;
        mnl_attr_for_each_nested(a, data) {
                if (mnl_attr_get_type(a) != NFTA_DATA_VERDICT)
                        continue;
                mnl_attr_for_each_nested(v, a) {
                        if (mnl_attr_get_type(v) == NFTA_VERDICT_CODE && mnl_attr_get_payload_len(v) == 4)
                                code = ntohl(mnl_attr_get_u32(v));
                        else if (mnl_attr_get_type(v) == NFTA_VERDICT_CHAIN &&
                                 mnl_attr_validate(v, MNL_TYPE_NUL_STRING) == 0)
                                chain = v;
                }
        }
        return chain && ((int32_t) code == NFT_JUMP || (int32_t) code == NFT_GOTO) ? mnl_attr_get_str(chain)
                                                                                   : NULL;
}

void nftables_rule_targets(const struct nlmsghdr *nlh, nftables_target_fn fn, void *userdata) {
        const struct nlattr *a, *el, *e, *x;
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                if (mnl_attr_get_type(a) != NFTA_RULE_EXPRESSIONS)
                        continue;
                mnl_attr_for_each_nested(el, a) {
                        const struct nlattr *name = NULL, *data = NULL;
                        mnl_attr_for_each_nested(e, el) {
                                if (mnl_attr_get_type(e) == NFTA_EXPR_NAME &&
                                    mnl_attr_validate(e, MNL_TYPE_NUL_STRING) == 0)
                                        name = e;
                                else if (mnl_attr_get_type(e) == NFTA_EXPR_DATA)
                                        data = e;
                        }
                        if (!name || !data || strcmp(mnl_attr_get_str(name), "immediate") != 0)
                                continue;
                        mnl_attr_for_each_nested(x, data) {
                                const char *chain = mnl_attr_get_type(x) == NFTA_IMMEDIATE_DATA ? verdict_chain(x)
                                                                                              : NULL;
                                if (chain)
                                        fn(chain, userdata);
                        }
                }
        }
}
