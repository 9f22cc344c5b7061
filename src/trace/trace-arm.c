/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One nf_tables batch makes the trace's table: the table (flag owner),
 * two base chains of type filter, policy accept, at priority -350 on
 * prerouting and output, and in each the rule
 *
 *   [ip saddr S] [ip daddr D] [meta l4proto P [th sport SP] [th dport DP]] meta nftrace set 1
 *
 * written as the kernel's expressions (payload, meta, cmp, immediate).
 * Nothing else is touched, and a packet that does not match only meets
 * one rule that does not match it.
 */
#include "trace/trace-arm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trace/trace-filter.h"

#define PRIORITY (-350)

int trace_socket_open(struct mnl_socket **ret) {
        struct mnl_socket *nl = mnl_socket_open(NETLINK_NETFILTER);
        int group = NFNLGRP_NFTRACE;
        if (!nl)
                return -errno;
        if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0 ||
            mnl_socket_setsockopt(nl, NETLINK_ADD_MEMBERSHIP, &group, sizeof group) < 0) {
                int r = -errno;
                mnl_socket_close(nl);
                return r;
        }
        *ret = nl;
        return 0;
}

static struct nlmsghdr *msg(char *buf, size_t *off, uint16_t type, uint16_t flags, uint8_t family, uint32_t seq,
                            uint16_t res_id) {
        struct nlmsghdr *n = mnl_nlmsg_put_header(buf + *off);
        n->nlmsg_type = type;
        n->nlmsg_flags = NLM_F_REQUEST | flags;
        n->nlmsg_seq = seq;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(n, sizeof *g);
        g->nfgen_family = family;
        g->version = NFNETLINK_V0;
        g->res_id = htons(res_id);
        return n;
}

static void done(size_t *off, struct nlmsghdr *n) {
        *off += NLMSG_ALIGN(n->nlmsg_len);
}

static void expr_begin(struct nlmsghdr *n, const char *name, struct nlattr **elem, struct nlattr **data) {
        *elem = mnl_attr_nest_start(n, NFTA_LIST_ELEM);
        mnl_attr_put_strz(n, NFTA_EXPR_NAME, name);
        *data = mnl_attr_nest_start(n, NFTA_EXPR_DATA);
}

static void expr_end(struct nlmsghdr *n, struct nlattr *elem, struct nlattr *data) {
        mnl_attr_nest_end(n, data);
        mnl_attr_nest_end(n, elem);
}

/* payload load of len bytes at base + off into reg 1, then == value. */
static void match_payload(struct nlmsghdr *n, uint32_t base, uint32_t off, const void *value, uint32_t len) {
        struct nlattr *e, *d, *v;
        expr_begin(n, "payload", &e, &d);
        mnl_attr_put_u32(n, NFTA_PAYLOAD_DREG, htonl(NFT_REG_1));
        mnl_attr_put_u32(n, NFTA_PAYLOAD_BASE, htonl(base));
        mnl_attr_put_u32(n, NFTA_PAYLOAD_OFFSET, htonl(off));
        mnl_attr_put_u32(n, NFTA_PAYLOAD_LEN, htonl(len));
        expr_end(n, e, d);
        expr_begin(n, "cmp", &e, &d);
        mnl_attr_put_u32(n, NFTA_CMP_SREG, htonl(NFT_REG_1));
        mnl_attr_put_u32(n, NFTA_CMP_OP, htonl(NFT_CMP_EQ));
        v = mnl_attr_nest_start(n, NFTA_CMP_DATA);
        mnl_attr_put(n, NFTA_DATA_VALUE, len, value);
        mnl_attr_nest_end(n, v);
        expr_end(n, e, d);
}

static void match_l4proto(struct nlmsghdr *n, uint8_t proto) {
        struct nlattr *e, *d, *v;
        expr_begin(n, "meta", &e, &d);
        mnl_attr_put_u32(n, NFTA_META_KEY, htonl(NFT_META_L4PROTO));
        mnl_attr_put_u32(n, NFTA_META_DREG, htonl(NFT_REG_1));
        expr_end(n, e, d);
        expr_begin(n, "cmp", &e, &d);
        mnl_attr_put_u32(n, NFTA_CMP_SREG, htonl(NFT_REG_1));
        mnl_attr_put_u32(n, NFTA_CMP_OP, htonl(NFT_CMP_EQ));
        v = mnl_attr_nest_start(n, NFTA_CMP_DATA);
        mnl_attr_put(n, NFTA_DATA_VALUE, 1, &proto);
        mnl_attr_nest_end(n, v);
        expr_end(n, e, d);
}

static void set_nftrace(struct nlmsghdr *n) {
        struct nlattr *e, *d, *v;
        uint8_t one = 1;
        expr_begin(n, "immediate", &e, &d);
        mnl_attr_put_u32(n, NFTA_IMMEDIATE_DREG, htonl(NFT_REG_1));
        v = mnl_attr_nest_start(n, NFTA_IMMEDIATE_DATA);
        mnl_attr_put(n, NFTA_DATA_VALUE, 1, &one);
        mnl_attr_nest_end(n, v);
        expr_end(n, e, d);
        expr_begin(n, "meta", &e, &d);
        mnl_attr_put_u32(n, NFTA_META_KEY, htonl(NFT_META_NFTRACE));
        mnl_attr_put_u32(n, NFTA_META_SREG, htonl(NFT_REG_1));
        expr_end(n, e, d);
}

static void rule(char *buf, size_t *off, uint8_t nfproto, uint32_t seq, const char *chain,
                 const struct trace_filter *f) {
        struct nlmsghdr *n = msg(buf, off, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE,
                                 NLM_F_CREATE | NLM_F_APPEND | NLM_F_ACK, nfproto, seq, 0);
        bool v6 = f->family == 6;
        mnl_attr_put_strz(n, NFTA_RULE_TABLE, TRACE_TABLE);
        mnl_attr_put_strz(n, NFTA_RULE_CHAIN, chain);
        struct nlattr *list = mnl_attr_nest_start(n, NFTA_RULE_EXPRESSIONS);
        if (f->has_src)
                match_payload(n, NFT_PAYLOAD_NETWORK_HEADER, v6 ? 8 : 12, f->src.bytes, v6 ? 16 : 4);
        if (f->has_dst)
                match_payload(n, NFT_PAYLOAD_NETWORK_HEADER, v6 ? 24 : 16, f->dst.bytes, v6 ? 16 : 4);
        if (f->proto) {
                match_l4proto(n, (uint8_t) f->proto);
                uint16_t sp = htons(f->sport), dp = htons(f->dport);
                if (f->sport)
                        match_payload(n, NFT_PAYLOAD_TRANSPORT_HEADER, 0, &sp, 2);
                if (f->dport)
                        match_payload(n, NFT_PAYLOAD_TRANSPORT_HEADER, 2, &dp, 2);
        }
        set_nftrace(n);
        mnl_attr_nest_end(n, list);
        done(off, n);
}

static void base_chain(char *buf, size_t *off, uint8_t nfproto, uint32_t seq, const char *name, uint32_t hook) {
        struct nlmsghdr *n = msg(buf, off, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_ACK,
                                 nfproto, seq, 0);
        mnl_attr_put_strz(n, NFTA_CHAIN_TABLE, TRACE_TABLE);
        mnl_attr_put_strz(n, NFTA_CHAIN_NAME, name);
        struct nlattr *h = mnl_attr_nest_start(n, NFTA_CHAIN_HOOK);
        mnl_attr_put_u32(n, NFTA_HOOK_HOOKNUM, htonl(hook));
        mnl_attr_put_u32(n, NFTA_HOOK_PRIORITY, htonl((uint32_t) PRIORITY));
        mnl_attr_nest_end(n, h);
        mnl_attr_put_strz(n, NFTA_CHAIN_TYPE, "filter");
        mnl_attr_put_u32(n, NFTA_CHAIN_POLICY, htonl(NF_ACCEPT));
        done(off, n);
}

int trace_nl_send(struct mnl_socket *nl, char *buf, size_t len, uint32_t first, uint32_t last) {
        char rbuf[MNL_SOCKET_BUFFER_SIZE];
        uint32_t portid = mnl_socket_get_portid(nl);
        int err = 0;
        if (mnl_socket_sendto(nl, buf, len) < 0)
                return -errno;
        for (uint32_t acked = 0; acked < last - first + 1;) {
                ssize_t n = mnl_socket_recvfrom(nl, rbuf, sizeof rbuf);
                if (n < 0)
                        return -errno;
                for (const struct nlmsghdr *h = (const struct nlmsghdr *) rbuf; mnl_nlmsg_ok(h, (int) n);
                     h = mnl_nlmsg_next(h, (int *) &n)) {
                        if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_pid != portid || h->nlmsg_seq < first ||
                            h->nlmsg_seq > last)
                                continue;       /* a trace, or someone else's */
                        const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
                        if (e->error < 0 && err == 0)
                                err = e->error;
                        acked++;
                        if (e->error < 0)
                                return err;     /* the kernel stops at the first error */
                }
        }
        return err;
}

uint32_t trace_nl_seq(void) {
        static uint32_t seq;
        if (seq == 0)
                seq = (uint32_t) time(NULL);
        return seq += 16;
}

int trace_arm(struct mnl_socket *nl, const struct trace_filter *f) {
        char *buf = calloc(1, 16384);
        size_t off = 0;
        uint8_t nfproto = f->family == 6 ? NFPROTO_IPV6 : NFPROTO_IPV4;
        uint32_t seq = trace_nl_seq(), first = seq + 1;
        struct nlmsghdr *n;
        int r;

        if (!buf)
                return -ENOMEM;
        n = msg(buf, &off, NFNL_MSG_BATCH_BEGIN, 0, NFPROTO_UNSPEC, seq, NFNL_SUBSYS_NFTABLES);
        done(&off, n);
        n = msg(buf, &off, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK,
                nfproto, ++seq, 0);
        mnl_attr_put_strz(n, NFTA_TABLE_NAME, TRACE_TABLE);
        mnl_attr_put_u32(n, NFTA_TABLE_FLAGS, htonl(NFT_TABLE_F_OWNER));
        done(&off, n);
        base_chain(buf, &off, nfproto, ++seq, "prerouting", NF_INET_PRE_ROUTING);
        base_chain(buf, &off, nfproto, ++seq, "output", NF_INET_LOCAL_OUT);
        rule(buf, &off, nfproto, ++seq, "prerouting", f);
        rule(buf, &off, nfproto, ++seq, "output", f);
        n = msg(buf, &off, NFNL_MSG_BATCH_END, 0, NFPROTO_UNSPEC, seq + 1, NFNL_SUBSYS_NFTABLES);
        done(&off, n);
        r = trace_nl_send(nl, buf, off, first, seq);
        free(buf);
        return r;
}

int trace_disarm(struct mnl_socket *nl, uint8_t family) {
        char buf[1024];
        size_t off = 0;
        uint32_t seq = trace_nl_seq();
        struct nlmsghdr *n = msg(buf, &off, NFNL_MSG_BATCH_BEGIN, 0, NFPROTO_UNSPEC, seq, NFNL_SUBSYS_NFTABLES);
        done(&off, n);
        n = msg(buf, &off, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_DELTABLE, NLM_F_ACK,
                family == 6 ? NFPROTO_IPV6 : NFPROTO_IPV4, seq + 1, 0);
        mnl_attr_put_strz(n, NFTA_TABLE_NAME, TRACE_TABLE);
        done(&off, n);
        n = msg(buf, &off, NFNL_MSG_BATCH_END, 0, NFPROTO_UNSPEC, seq + 2, NFNL_SUBSYS_NFTABLES);
        done(&off, n);
        return trace_nl_send(nl, buf, off, seq + 1, seq + 1);
}
