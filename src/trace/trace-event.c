/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NFT_MSG_TRACE's attributes (linux/netfilter/nf_tables.h): strings for
 * the table and chain, big-endian numbers for the rest, the verdict as a
 * nest, and the network and transport headers as raw bytes, from which
 * the packet's addresses and ports are read (the IPv4 header's length
 * from its IHL; an IPv6 header is 40 bytes, the transport header given
 * apart).
 */
#include "trace/trace-event.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

struct attrs {
        const struct nlattr *a[NFTA_TRACE_MAX + 1];
};

static int on_attr(const struct nlattr *a, void *data) {
        struct attrs *t = data;
        int type = mnl_attr_get_type(a);
        if (mnl_attr_type_valid(a, NFTA_TRACE_MAX) < 0)
                return MNL_CB_OK;       /* newer than this reader */
        t->a[type] = a;
        return MNL_CB_OK;
}

static int on_verdict(const struct nlattr *a, void *data) {
        struct trace_event *e = data;
        switch (mnl_attr_get_type(a)) {
        case NFTA_VERDICT_CODE:
                if (mnl_attr_get_payload_len(a) == 4) {
                        e->verdict = (int32_t) ntohl(mnl_attr_get_u32(a));
                        e->has_verdict = true;
                }
                break;
        case NFTA_VERDICT_CHAIN:
                snprintf(e->target, sizeof e->target, "%.*s", (int) mnl_attr_get_payload_len(a),
                         (const char *) mnl_attr_get_payload(a));
                break;
        }
        return MNL_CB_OK;
}

static void str(const struct nlattr *a, char *out, size_t len) {
        size_t n = a ? mnl_attr_get_payload_len(a) : 0;
        const char *p = a ? mnl_attr_get_payload(a) : "";
        n = strnlen(p, n);
        snprintf(out, len, "%.*s", (int) n, p);
}

static uint32_t u32(const struct nlattr *a) {
        return a && mnl_attr_get_payload_len(a) == 4 ? ntohl(mnl_attr_get_u32(a)) : 0;
}

void trace_event_headers(struct trace_event *e, const uint8_t *p, size_t n, const uint8_t *t, size_t tn) {
        if (e->family == 4 && n >= 20 && (p[0] >> 4) == 4) {
                e->src = (struct inet_addr) {.family = 4};
                e->dst = (struct inet_addr) {.family = 4};
                memcpy(e->src.bytes, p + 12, 4);
                memcpy(e->dst.bytes, p + 16, 4);
                e->proto = p[9];
        } else if (e->family == 6 && n >= 40 && (p[0] >> 4) == 6) {
                e->src = (struct inet_addr) {.family = 6};
                e->dst = (struct inet_addr) {.family = 6};
                memcpy(e->src.bytes, p + 8, 16);
                memcpy(e->dst.bytes, p + 24, 16);
                e->proto = p[6];
        } else {
                return;
        }
        e->has_tuple = true;
        if (t && tn >= 4 && (e->proto == IPPROTO_TCP || e->proto == IPPROTO_UDP || e->proto == IPPROTO_SCTP)) {
                e->sport = (uint16_t) (t[0] << 8 | t[1]);
                e->dport = (uint16_t) (t[2] << 8 | t[3]);
        }
}

static void tuple(struct trace_event *e, const struct nlattr *nh, const struct nlattr *th) {
        if (nh)
                trace_event_headers(e, mnl_attr_get_payload(nh), mnl_attr_get_payload_len(nh),
                                    th ? mnl_attr_get_payload(th) : NULL, th ? mnl_attr_get_payload_len(th) : 0);
}

int trace_event_parse(const struct nlmsghdr *n, struct trace_event *ret) {
        struct attrs t = {0};
        struct trace_event e = {0};
        const struct nfgenmsg *g;

        if (n->nlmsg_type != ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_TRACE))
                return 1;
        if (n->nlmsg_len < NLMSG_HDRLEN + sizeof *g)
                return -EINVAL;
        g = mnl_nlmsg_get_payload(n);
        if (g->nfgen_family != NFPROTO_IPV4 && g->nfgen_family != NFPROTO_IPV6)
                return 1;       /* a bridge's, an inet table's of another protocol */
        e.family = g->nfgen_family == NFPROTO_IPV6 ? 6 : 4;
        if (mnl_attr_parse(n, sizeof *g, on_attr, &t) < 0 || !t.a[NFTA_TRACE_ID] || !t.a[NFTA_TRACE_TYPE])
                return -EINVAL;
        e.id = u32(t.a[NFTA_TRACE_ID]);
        e.type = u32(t.a[NFTA_TRACE_TYPE]);
        str(t.a[NFTA_TRACE_TABLE], e.table, sizeof e.table);
        str(t.a[NFTA_TRACE_CHAIN], e.chain, sizeof e.chain);
        if (t.a[NFTA_TRACE_RULE_HANDLE] && mnl_attr_get_payload_len(t.a[NFTA_TRACE_RULE_HANDLE]) == 8)
                e.handle = be64toh(mnl_attr_get_u64(t.a[NFTA_TRACE_RULE_HANDLE]));
        if (t.a[NFTA_TRACE_VERDICT] && mnl_attr_parse_nested(t.a[NFTA_TRACE_VERDICT], on_verdict, &e) < 0)
                return -EINVAL;
        if (e.type == NFT_TRACETYPE_POLICY && t.a[NFTA_TRACE_POLICY]) {
                e.verdict = (int32_t) u32(t.a[NFTA_TRACE_POLICY]);
                e.has_verdict = true;
        }
        e.iif = u32(t.a[NFTA_TRACE_IIF]);
        e.oif = u32(t.a[NFTA_TRACE_OIF]);
        e.mark = u32(t.a[NFTA_TRACE_MARK]);
        tuple(&e, t.a[NFTA_TRACE_NETWORK_HEADER], t.a[NFTA_TRACE_TRANSPORT_HEADER]);
        *ret = e;
        return 0;
}

const char *trace_verdict_name(int32_t v) {
        switch (v) {
        case NF_ACCEPT:
                return "accept";
        case NF_DROP:
                return "drop";
        case NF_STOLEN:
                return "stolen";
        case NF_QUEUE:
                return "queue";
        case NFT_CONTINUE:
                return "continue";
        case NFT_BREAK:
                return "break";
        case NFT_JUMP:
                return "jump";
        case NFT_GOTO:
                return "goto";
        case NFT_RETURN:
                return "return";
        default:
                return "verdict";
        }
}
