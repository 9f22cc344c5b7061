/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of nftables mode's kernel access: kproxy talks nf_tables
 * netlink itself, so a change costs what the kernel does and no more. `nft
 * -f` (and libnftables) first reads the whole ruleset into a cache, which at
 * 20k services is more than half of a one-element change; kproxy keeps its
 * own state and sends only the batch. A batch is one transaction: the
 * kernel applies all of it or none.
 *
 * Replies: the batch's last message carries NLM_F_ACK, and the kernel
 * answers it only after the commit (or the abort), so reading up to that
 * answer collects every error of the batch. The kernel processes the batch
 * inside sendmsg(), so the replies are queued by the time it returns.
 */
#include <netinet/in.h>

#include "apply/nftables.h"

#include <endian.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "render/nftir.h"
#include "render/nftmsg.h"
#include "util/cleanup.h"
#include "util/fnv.h"
#include "util/hmap.h"
#include "util/log.h"

#define RECV_BUF (64 * 1024)
#define MONITOR_RCVBUF (32 * 1024 * 1024)

struct nftables {
        struct mnl_socket *nl;
        uint32_t portid;
        uint32_t seq;           /* for dumps and single requests */
        size_t sndbuf;
        struct mnl_socket *probe;       /* nftables_rule_digests()'s, opened on first use */
        size_t probe_read;              /* its reads, the size of the kernel's dump messages; 0: default */
};

struct nftables_monitor {
        struct mnl_socket *nl;
        uint32_t ours;
        nftables_event_fn fn;
        void *userdata;
};

static int socket_setup(struct mnl_socket *nl) {
        int one = 1;
        struct timeval tv = {.tv_sec = 60};
        /* Errors without the echoed request, and with the kernel's text. */
        if (mnl_socket_setsockopt(nl, NETLINK_CAP_ACK, &one, sizeof one) < 0 ||
            mnl_socket_setsockopt(nl, NETLINK_EXT_ACK, &one, sizeof one) < 0)
                return -errno;
        if (setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
                return -errno;
        return 0;
}

int nftables_open(struct nftables **ret) {
        struct nftables *n = calloc(1, sizeof *n);
        int r;

        if (!n)
                return -ENOMEM;
        n->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
        if (!n->nl) {
                r = -errno;
                free(n);
                return r;
        }
        if (mnl_socket_bind(n->nl, 0, MNL_SOCKET_AUTOPID) < 0 || (r = socket_setup(n->nl)) < 0) {
                r = -errno;
                nftables_close(n);
                return r ? r : -EIO;
        }
        n->portid = mnl_socket_get_portid(n->nl);
        n->seq = (uint32_t) time(NULL);
        *ret = n;
        return 0;
}

struct nftables *nftables_close(struct nftables *n) {
        if (!n)
                return NULL;
        if (n->nl)
                mnl_socket_close(n->nl);
        if (n->probe)
                mnl_socket_close(n->probe);
        free(n);
        return NULL;
}

uint32_t nftables_portid(const struct nftables *n) {
        return n->portid;
}

static const char *msg_type_name(uint16_t type) {
        static const char *const names[NFT_MSG_MAX] = {
                [NFT_MSG_NEWTABLE] = "add table",    [NFT_MSG_DELTABLE] = "delete table",
                [NFT_MSG_NEWCHAIN] = "add chain",    [NFT_MSG_DELCHAIN] = "delete chain",
                [NFT_MSG_NEWRULE] = "add rule",      [NFT_MSG_DELRULE] = "flush chain",
                [NFT_MSG_NEWSET] = "add set",        [NFT_MSG_DELSET] = "delete set",
                [NFT_MSG_NEWSETELEM] = "add element", [NFT_MSG_DELSETELEM] = "delete element",
        };
        type &= 0xff;
        return type < NFT_MSG_MAX && names[type] ? names[type] : "message";
}

/* The object a message is about: the chain of a rule, the set of an
 * element, else the object's own name. */
static const char *msg_object(const struct nlmsghdr *nlh) {
        uint16_t want;
        switch (nlh->nlmsg_type & 0xff) {
        case NFT_MSG_NEWCHAIN:
        case NFT_MSG_DELCHAIN:
                want = NFTA_CHAIN_NAME;
                break;
        case NFT_MSG_NEWTABLE:
        case NFT_MSG_DELTABLE:
                want = NFTA_TABLE_NAME;
                break;
        default:        /* rules: chain; sets: name; elements: set */
                want = 2;
                break;
        }
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                if (mnl_attr_get_type(a) == want && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
                        return mnl_attr_get_str(a);
        }
        return "?";
}

static const struct nlmsghdr *find_seq(const struct nftmsg *m, uint32_t seq) {
        for (size_t off = 0; off < m->b.len;) {
                const struct nlmsghdr *nlh = (const struct nlmsghdr *) (m->b.data + off);
                if (nlh->nlmsg_seq == seq)
                        return nlh;
                off += NLMSG_ALIGN(nlh->nlmsg_len);
        }
        return NULL;
}

/* The kernel's extended-ack text, if it sent one. */
static const char *ext_msg(const struct nlmsghdr *nlh) {
        if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
                return NULL;
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(struct nlmsgerr)) {
                if (mnl_attr_get_type(a) == NLMSGERR_ATTR_MSG && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
                        return mnl_attr_get_str(a);
        }
        return NULL;
}

int nftables_commit(struct nftables *n, const struct nftmsg *m, char *err, size_t errlen) {
        _cleanup_free_ char *rbuf = NULL;
        const struct nlmsghdr *first = (const struct nlmsghdr *) m->b.data;
        uint32_t first_seq, last_seq;
        int r = 0;

        if (errlen)
                err[0] = '\0';
        if (m->n == 0)
                return 0;       /* nothing to change */
        first_seq = first->nlmsg_seq;
        last_seq = ((const struct nlmsghdr *) (m->b.data + m->last))->nlmsg_seq;

        /* The whole batch goes in one message: make room for it. */
        if (m->b.len + 65536 > n->sndbuf) {
                int size = (int) (m->b.len + 65536);
                if (setsockopt(mnl_socket_get_fd(n->nl), SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) < 0 &&
                    setsockopt(mnl_socket_get_fd(n->nl), SOL_SOCKET, SO_SNDBUF, &size, sizeof size) < 0)
                        return -errno;
                n->sndbuf = (size_t) size;
        }
        if (mnl_socket_sendto(n->nl, m->b.data, m->b.len) < 0)
                return -errno;

        rbuf = malloc(RECV_BUF);
        if (!rbuf)
                return -ENOMEM;
        for (;;) {
                ssize_t len = mnl_socket_recvfrom(n->nl, rbuf, RECV_BUF);
                if (len < 0)
                        return -errno == -EAGAIN ? -ETIMEDOUT : -errno;
                for (const struct nlmsghdr *nlh = (const struct nlmsghdr *) rbuf; mnl_nlmsg_ok(nlh, (int) len);
                     nlh = mnl_nlmsg_next(nlh, (int *) &len)) {
                        if (nlh->nlmsg_type != NLMSG_ERROR || nlh->nlmsg_seq < first_seq ||
                            nlh->nlmsg_seq > last_seq)
                                continue;       /* not about this batch */
                        const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
                        if (e->error != 0 && r == 0) {
                                const struct nlmsghdr *bad = find_seq(m, nlh->nlmsg_seq);
                                const char *text = ext_msg(nlh);
                                r = e->error;
                                if (bad && nlh->nlmsg_seq != first_seq)
                                        snprintf(err, errlen, "%s %s: %s%s%s", msg_type_name(bad->nlmsg_type),
                                                 msg_object(bad), strerror(-r), text ? ": " : "", text ? text : "");
                                else
                                        snprintf(err, errlen, "commit: %s%s%s", strerror(-r), text ? ": " : "",
                                                 text ? text : "");
                        }
                        if (nlh->nlmsg_seq == last_seq)
                                return r;
                }
        }
}

/* --- dumps --- */

struct dump_ctx {
        uint16_t name_attr;
        uint16_t table_attr;
        const char *table;
        struct hmap *out;
        bool sets;
};

static int dump_cb(const struct nlmsghdr *nlh, void *data) {
        struct dump_ctx *c = data;
        const struct nlattr *a;
        const char *table = NULL, *name = NULL;
        uint32_t flags = 0;
        uint64_t timeout = 0;

        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                uint16_t t = mnl_attr_get_type(a);
                if (t == c->table_attr && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
                        table = mnl_attr_get_str(a);
                else if (t == c->name_attr && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
                        name = mnl_attr_get_str(a);
                else if (c->sets && t == NFTA_SET_FLAGS && mnl_attr_validate(a, MNL_TYPE_U32) == 0)
                        flags = ntohl(mnl_attr_get_u32(a));
                else if (c->sets && t == NFTA_SET_TIMEOUT && mnl_attr_validate(a, MNL_TYPE_U64) == 0)
                        timeout = be64toh(mnl_attr_get_u64(a));
        }
        if (!table || !name || strcmp(table, c->table) != 0 || (flags & NFT_SET_ANONYMOUS))
                return MNL_CB_OK;
        if (c->sets) {
                struct nftables_set *set = malloc(sizeof *set + strlen(name) + 1);
                if (!set)
                        return MNL_CB_ERROR;
                set->timeout_ms = timeout;
                strcpy(set->name, name);
                free(hmap_put(c->out, set->name, set));
        } else {
                char *k = strdup(name);
                if (!k)
                        return MNL_CB_ERROR;
                free(hmap_put(c->out, k, k));
        }
        return MNL_CB_OK;
}

static struct nlmsghdr *request(struct nftables *n, char *buf, uint16_t type, uint16_t flags, uint8_t family) {
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | type;
        nlh->nlmsg_flags = NLM_F_REQUEST | flags;
        nlh->nlmsg_seq = ++n->seq;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
        g->nfgen_family = family == 6 ? NFPROTO_IPV6 : NFPROTO_IPV4;
        g->version = NFNETLINK_V0;
        return nlh;
}

/* Sends nlh and runs cb over the replies until the dump or ack ends. */
static int talk(struct nftables *n, struct nlmsghdr *nlh, mnl_cb_t cb, void *data) {
        _cleanup_free_ char *rbuf = malloc(RECV_BUF);
        uint32_t seq = nlh->nlmsg_seq;
        int r;

        if (!rbuf)
                return -ENOMEM;
        if (mnl_socket_sendto(n->nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        for (;;) {
                ssize_t len = mnl_socket_recvfrom(n->nl, rbuf, RECV_BUF);
                if (len < 0)
                        return -errno;
                r = mnl_cb_run(rbuf, (size_t) len, seq, n->portid, cb, data);
                if (r < 0)
                        return -errno;
                if (r == MNL_CB_STOP)
                        return 0;
        }
}

int nftables_list(struct nftables *n, uint8_t family, const char *table, struct hmap *ret_chains,
                  struct hmap *ret_sets) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct nlmsghdr *nlh;
        int r;

        nlh = request(n, buf, NFT_MSG_GETTABLE, NLM_F_ACK, family);
        mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, table);
        r = talk(n, nlh, NULL, NULL);
        if (r < 0)
                return r;

        if (ret_chains) {
                struct dump_ctx chains = {NFTA_CHAIN_NAME, NFTA_CHAIN_TABLE, table, ret_chains, false};
                nlh = request(n, buf, NFT_MSG_GETCHAIN, NLM_F_DUMP, family);
                mnl_attr_put_strz(nlh, NFTA_CHAIN_TABLE, table);
                r = talk(n, nlh, dump_cb, &chains);
                if (r < 0 || !ret_sets)
                        return r;
        }

        struct dump_ctx sets = {NFTA_SET_NAME, NFTA_SET_TABLE, table, ret_sets, true};
        nlh = request(n, buf, NFT_MSG_GETSET, NLM_F_DUMP, family);
        mnl_attr_put_strz(nlh, NFTA_SET_TABLE, table);
        return talk(n, nlh, dump_cb, &sets);
}

int nftables_chain_present(struct nftables *n, uint8_t family, const char *table, const char *chain) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct nlmsghdr *nlh = request(n, buf, NFT_MSG_GETCHAIN, NLM_F_ACK, family);
        mnl_attr_put_strz(nlh, NFTA_CHAIN_TABLE, table);
        mnl_attr_put_strz(nlh, NFTA_CHAIN_NAME, chain);
        int r = talk(n, nlh, NULL, NULL);
        return r == 0 ? 1 : r == -ENOENT ? 0 : r;
}

/* --- rule digests --- */

/* Rule digests are of a canonical form of the expressions, so that a rule
 * as kproxy encodes it and as the kernel dumps it digest alike: attributes
 * of an expression in type order (the kernel dumps in its own order),
 * without flags or padding, without what the kernel adds when dumping
 * (canon_default(), canon_nat()), and without a counter's values. Which
 * attributes nest is known per expression, as the kernel's dumps do not
 * flag nests. */
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

/* The error of an NLMSG_ERROR message (0: an acknowledgement). */
static int reply_error(const struct nlmsghdr *nlh) {
        const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
        if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof *e))
                return -EBADMSG;
        return e->error;
}

/* A round's answers wait in the socket's queue until the send returns: a
 * few hundred bytes each (the kernel trims them), so 128 stay far below
 * the queue's size, raised to PROBE_RCVBUF where allowed. */
#define PROBE_ROUND 128
#define PROBE_RCVBUF (4 * 1024 * 1024)
#define PROBE_RECV_BUF 8192     /* the default of probe_read */

/* Reads replies until fn, called for each message, says it has seen the
 * last (1) or fails (-errno). */
static int read_replies(const struct nftables *nft, char *rbuf, int (*fn)(const struct nlmsghdr *nlh, void *ctx),
                        void *ctx) {
        for (;;) {
                ssize_t len = mnl_socket_recvfrom(nft->probe, rbuf, nft->probe_read);
                if (len < 0)
                        return -errno;
                int left = (int) len;
                for (const struct nlmsghdr *nlh = (const void *) rbuf; mnl_nlmsg_ok(nlh, left);
                     nlh = mnl_nlmsg_next(nlh, &left)) {
                        int r = fn(nlh, ctx);
                        if (r != 0)
                                return r < 0 ? r : 0;
                }
        }
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

struct lookups {
        uint32_t seq0;
        size_t n, pending;
        uint64_t *spec;         /* 0: no such chain */
};

static int on_lookup(const struct nlmsghdr *nlh, void *ctx) {
        struct lookups *l = ctx;
        uint32_t i = nlh->nlmsg_seq - l->seq0;
        if (i >= l->n)
                return 0;
        if (nlh->nlmsg_type == NLMSG_ERROR) {
                int err = reply_error(nlh);
                if (err == 0)
                        return 0;
                if (err != -ENOENT)
                        return err;
                l->spec[i] = 0;
        } else if ((nlh->nlmsg_type & 0xff) == NFT_MSG_NEWCHAIN) {
                l->spec[i] = nftables_chain_spec(nlh);
        } else {
                return 0;
        }
        return --l->pending == 0;
}

/* Which of names[0..n) exist: their lookups (consecutive sequence
 * numbers) in one send on n's probe socket; spec[i] set (0: none). */
static int probe_chains(struct nftables *nft, uint8_t family, const char *table, const char *const *names, size_t n,
                        uint64_t *spec, char *rbuf) {
        if (n == 0)
                return 0;
        _cleanup_free_ char *buf = malloc(n * (64 + NFT_CHAIN_MAXNAMELEN));
        size_t off = 0;
        if (!buf)
                return -ENOMEM;
        uint32_t seq0 = nft->seq + 1;
        for (size_t i = 0; i < n; i++) {
                struct nlmsghdr *nlh = request(nft, buf + off, NFT_MSG_GETCHAIN, 0, family);
                mnl_attr_put_strz(nlh, NFTA_CHAIN_TABLE, table);
                mnl_attr_put_strz(nlh, NFTA_CHAIN_NAME, names[i]);
                off += nlh->nlmsg_len;
        }
        if (mnl_socket_sendto(nft->probe, buf, off) < 0)
                return -errno;
        struct lookups l = {seq0, n, n, spec};
        return read_replies(nft, rbuf, on_lookup, &l);
}

struct rules_dump {
        uint32_t seq;
        struct nftables_chain_digest *d;
        nftables_target_fn fn;
        void *userdata;
};

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

static int on_rule(const struct nlmsghdr *nlh, void *ctx) {
        struct rules_dump *rd = ctx;
        if (nlh->nlmsg_seq != rd->seq)
                return 0;
        if (nlh->nlmsg_flags & NLM_F_DUMP_INTR)
                return -EINTR;  /* the table changed meanwhile */
        if (nlh->nlmsg_type == NLMSG_DONE)
                return 1;
        if (nlh->nlmsg_type == NLMSG_ERROR)
                return reply_error(nlh);        /* 0: an acknowledgement */
        if ((nlh->nlmsg_type & 0xff) == NFT_MSG_NEWRULE) {
                rd->d->digest = nftables_rule_msg_digest(rd->d->digest, nlh);
                if (rd->fn)
                        nftables_rule_targets(nlh, rd->fn, rd->userdata);
        }
        return 0;
}

/* The rules of one chain, folded into d (a dump on n's probe socket). */
static int probe_rules(struct nftables *nft, uint8_t family, const char *table, const char *name,
                       struct nftables_chain_digest *d, char *rbuf, nftables_target_fn fn, void *userdata) {
        char buf[128 + NFT_CHAIN_MAXNAMELEN];
        struct nlmsghdr *req = request(nft, buf, NFT_MSG_GETRULE, NLM_F_DUMP, family);
        mnl_attr_put_strz(req, NFTA_RULE_TABLE, table);
        mnl_attr_put_strz(req, NFTA_RULE_CHAIN, name);
        if (mnl_socket_sendto(nft->probe, req, req->nlmsg_len) < 0)
                return -errno;
        struct rules_dump rd = {req->nlmsg_seq, d, fn, userdata};
        return read_replies(nft, rbuf, on_rule, &rd);
}

int nftables_rule_digests(struct nftables *n, uint8_t family, const char *table, const char *const *names,
                          size_t n_names, struct hmap *ret) {
        return nftables_rule_digests_walk(n, family, table, names, n_names, ret, NULL, NULL);
}

int nftables_rule_digests_walk(struct nftables *n, uint8_t family, const char *table, const char *const *names,
                               size_t n_names, struct hmap *ret, nftables_target_fn fn, void *userdata) {
        if (!n->probe_read)
                n->probe_read = PROBE_RECV_BUF;
        _cleanup_free_ char *rbuf = malloc(n->probe_read);
        uint64_t spec[PROBE_ROUND];
        int r = 0;

        if (!rbuf)
                return -ENOMEM;
        /* Its own socket: its small reads keep the kernel's dump messages
         * small (it sizes them by the largest read so far). */
        if (!n->probe) {
                int size = PROBE_RCVBUF;
                n->probe = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
                if (!n->probe)
                        return -errno;
                if (setsockopt(mnl_socket_get_fd(n->probe), SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0)
                        (void) setsockopt(mnl_socket_get_fd(n->probe), SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
                if (mnl_socket_bind(n->probe, 0, MNL_SOCKET_AUTOPID) < 0 || (r = socket_setup(n->probe)) < 0) {
                        r = r ? r : -errno;
                        mnl_socket_close(n->probe);
                        n->probe = NULL;
                        return r;
                }
        }
        for (size_t done = 0; r == 0 && done < n_names; done += PROBE_ROUND) {
                size_t k = n_names - done < PROBE_ROUND ? n_names - done : PROBE_ROUND;
                r = probe_chains(n, family, table, names + done, k, spec, rbuf);
                for (size_t i = 0; r == 0 && i < k; i++) {
                        if (!spec[i])
                                continue;
                        const char *name = names[done + i];
                        struct nftables_chain_digest *d = malloc(sizeof *d + strlen(name) + 1);
                        if (!d) {
                                r = -ENOMEM;
                                break;
                        }
                        d->digest = NFTABLES_DIGEST_INIT;
                        d->spec = spec[i];
                        strcpy(d->name, name);
                        free(hmap_put(ret, d->name, d));
                        r = probe_rules(n, family, table, name, d, rbuf, fn, userdata);
                }
        }
        if (r < 0) {
                /* Replies of an interrupted round may still be queued. */
                mnl_socket_close(n->probe);
                n->probe = NULL;
        }
        return r;
}

void nftables_set_dump_messages(struct nftables *n, size_t bytes) {
        if (!n->probe)
                n->probe_read = bytes;
}

void nftables_names_done(struct hmap *names) {
        const char *k;
        void *v;
        for (size_t i = 0; hmap_next(names, &i, &k, &v);)
                free(v);
        hmap_done(names);
}

/* --- the monitor --- */

int nftables_monitor_open(const struct nftables *n, nftables_event_fn fn, void *userdata,
                          struct nftables_monitor **ret) {
        struct nftables_monitor *m = calloc(1, sizeof *m);
        int size = MONITOR_RCVBUF, r;

        if (!m)
                return -ENOMEM;
        m->ours = n->portid;
        m->fn = fn;
        m->userdata = userdata;
        m->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (!m->nl) {
                r = -errno;
                free(m);
                return r;
        }
        /* Our own large transactions notify a lot; the sync reads the
         * socket after each one, so a generous buffer never overflows. */
        if (setsockopt(mnl_socket_get_fd(m->nl), SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0)
                (void) setsockopt(mnl_socket_get_fd(m->nl), SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
        if (mnl_socket_bind(m->nl, 1u << (NFNLGRP_NFTABLES - 1), MNL_SOCKET_AUTOPID) < 0) {
                r = -errno;
                nftables_monitor_close(m);
                return r;
        }
        *ret = m;
        return 0;
}

struct nftables_monitor *nftables_monitor_close(struct nftables_monitor *m) {
        if (!m)
                return NULL;
        if (m->nl)
                mnl_socket_close(m->nl);
        free(m);
        return NULL;
}

int nftables_monitor_fd(const struct nftables_monitor *m) {
        return mnl_socket_get_fd(m->nl);
}

static void monitor_msg(struct nftables_monitor *m, const struct nlmsghdr *nlh) {
        uint16_t type = nlh->nlmsg_type & 0xff;
        const struct nfgenmsg *g = mnl_nlmsg_get_payload(nlh);
        const char *table = NULL, *obj = NULL;
        const struct nlattr *a;
        char what[300];

        if ((nlh->nlmsg_type >> 8) != NFNL_SUBSYS_NFTABLES || type == NFT_MSG_NEWGEN || nlh->nlmsg_pid == m->ours)
                return;
        if (nlh->nlmsg_len < NLMSG_LENGTH(sizeof *g) ||
            (g->nfgen_family != NFPROTO_IPV4 && g->nfgen_family != NFPROTO_IPV6))
                return;
        /* Every object's table is attribute 1; its name (or a rule's chain,
         * an element's set) is 2, but a chain's name is 3. */
        mnl_attr_for_each(a, nlh, sizeof *g) {
                uint16_t t = mnl_attr_get_type(a);
                if (mnl_attr_validate(a, MNL_TYPE_NUL_STRING) < 0)
                        continue;
                if (t == 1)
                        table = mnl_attr_get_str(a);
                else if ((t == 2 && type != NFT_MSG_NEWCHAIN && type != NFT_MSG_DELCHAIN) ||
                         (t == 3 && (type == NFT_MSG_NEWCHAIN || type == NFT_MSG_DELCHAIN)))
                        obj = mnl_attr_get_str(a);
        }
        if (!table || nftir_table_index(table) < 0)
                return;
        /* Affinity sets fill and expire by themselves. */
        if ((type == NFT_MSG_NEWSETELEM || type == NFT_MSG_DELSETELEM) && obj && strncmp(obj, "affinity-", 9) == 0)
                return;
        snprintf(what, sizeof what, "%s %s (netlink port %u)", msg_type_name(type), obj ? obj : table,
                 nlh->nlmsg_pid);
        m->fn(m->userdata, NFTABLES_EVENT_FOREIGN, g->nfgen_family == NFPROTO_IPV6 ? 6 : 4, what);
}

void nftables_monitor_drain(struct nftables_monitor *m) {
        _cleanup_free_ char *rbuf = malloc(RECV_BUF);
        if (!rbuf)
                return;
        for (;;) {
                ssize_t len = mnl_socket_recvfrom(m->nl, rbuf, RECV_BUF);
                if (len < 0) {
                        if (errno == ENOBUFS) {
                                m->fn(m->userdata, NFTABLES_EVENT_LOST, 0, "notifications dropped");
                                continue;
                        }
                        return;         /* EAGAIN: drained */
                }
                for (const struct nlmsghdr *nlh = (const struct nlmsghdr *) rbuf; mnl_nlmsg_ok(nlh, (int) len);
                     nlh = mnl_nlmsg_next(nlh, (int *) &len))
                        monitor_msg(m, nlh);
        }
}

int nftables_monitor_listen(struct nftables_monitor *m, bool on) {
        int group = NFNLGRP_NFTABLES;
        if (mnl_socket_setsockopt(m->nl, on ? NETLINK_ADD_MEMBERSHIP : NETLINK_DROP_MEMBERSHIP, &group,
                                  sizeof group) < 0)
                return -errno;
        return 0;
}

static int gen_cb(const struct nlmsghdr *nlh, void *data) {
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                if (mnl_attr_get_type(a) == NFTA_GEN_ID && mnl_attr_validate(a, MNL_TYPE_U32) == 0)
                        *(uint32_t *) data = ntohl(mnl_attr_get_u32(a));
        }
        return MNL_CB_OK;
}

int nftables_genid(struct nftables *n, uint32_t *ret) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        uint32_t gen = 0;
        struct nlmsghdr *nlh = request(n, buf, NFT_MSG_GETGEN, NLM_F_ACK, 4);
        int r = talk(n, nlh, gen_cb, &gen);
        if (r == 0)
                *ret = gen;
        return r;
}

/* --- cleanup --- */

static int table_name_cb(const struct nlmsghdr *nlh, void *data) {
        bool *present = data;
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
                if (mnl_attr_get_type(a) == NFTA_TABLE_NAME && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0) {
                        int i = nftir_table_index(mnl_attr_get_str(a));
                        if (i >= 0)
                                present[i] = true;
                }
        return MNL_CB_OK;
}

int nftables_drop_tables(struct nftables *n, uint8_t family, unsigned from) {
        char buf[MNL_SOCKET_BUFFER_SIZE], err[512];
        bool present[NFTIR_TABLES_MAX + 1] = {false};
        int r, ret = 0;

        r = talk(n, request(n, buf, NFT_MSG_GETTABLE, NLM_F_DUMP, family), table_name_cb, present);
        if (r < 0)
                return log_error_errno(r, "Failed to list the IPv%u nftables tables", family);
        for (unsigned i = from; i <= NFTIR_TABLES_MAX; i++) {
                char tbuf[NFTIR_TABLE_NAME_MAX];
                struct nftmsg m;
                if (!present[i])
                        continue;
                nftmsg_init(&m, family, n->seq);
                m.table = (uint16_t) i;
                nftmsg_batch_begin(&m);
                nftmsg_table_del(&m);
                nftmsg_batch_end(&m);
                r = nftables_commit(n, &m, err, sizeof err);
                n->seq = m.seq;
                nftmsg_done(&m);
                const char *name = nftir_table_name(i, tbuf);
                if (r == 0)
                        log_info("Deleted nftables table %s %s", family == 6 ? "ip6" : "ip", name);
                else if (r != -ENOENT)
                        ret = log_error_errno(r, "Failed to delete nftables table %s %s: %s",
                                              family == 6 ? "ip6" : "ip", name, err);
        }
        return ret;
}

int nftables_cleanup(void) {
        struct nftables *n = NULL;
        int r = nftables_open(&n), ret = 0;

        if (r < 0)
                return log_error_errno(r, "Failed to open nf_tables netlink");
        for (uint8_t family = 4; family <= 6; family += 2)
                if ((r = nftables_drop_tables(n, family, 0)) < 0)
                        ret = r;
        nftables_close(n);
        return ret;
}

static int table_use_cb(const struct nlmsghdr *nlh, void *data) {
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
                if (mnl_attr_get_type(a) == NFTA_TABLE_USE && mnl_attr_validate(a, MNL_TYPE_U32) == 0)
                        *(int64_t *) data = ntohl(mnl_attr_get_u32(a));
        return MNL_CB_OK;
}

int nftables_table_use(struct nftables *n, uint8_t family, const char *table, uint32_t *ret) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        int64_t use = -1;
        struct nlmsghdr *nlh = request(n, buf, NFT_MSG_GETTABLE, NLM_F_ACK, family);
        mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, table);
        int r = talk(n, nlh, table_use_cb, &use);
        if (r < 0)
                return r;
        if (use < 0)
                return -EBADMSG;
        *ret = (uint32_t) use;
        return 0;
}

bool nftables_table_present(uint8_t family) {
        struct nftables *n = NULL;
        char buf[MNL_SOCKET_BUFFER_SIZE];
        bool present = false;

        if (nftables_open(&n) < 0)
                return false;
        struct nlmsghdr *nlh = request(n, buf, NFT_MSG_GETTABLE, NLM_F_ACK, family);
        char name[NFTIR_TABLE_NAME_MAX];
        mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, nftir_table_name(0, name));
        present = talk(n, nlh, NULL, NULL) == 0;
        nftables_close(n);
        return present;
}
