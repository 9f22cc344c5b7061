/* SPDX-License-Identifier: Apache-2.0 */
/* explain's query (what /debug/explain reads from a URL) and trace's
 * reading of the kernel's notifications: hostile input gives an error,
 * never a crash or a half-set query. */
#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>

#include "explain/explain.h"
#include "model/model.h"
#include "test.h"
#include "trace/trace-event.h"
#include "trace/trace-xt.h"

static void test_query_fields(void) {
        struct explain_query q = {0};
        char err[EXPLAIN_ERRLEN], s[INET_ADDR_STRLEN];

        CHECK(explain_query_set(&q, "source", "10.0.0.5", err) == 0 && q.has_src && q.src_port == 0);
        CHECK(explain_query_set(&q, "source", "10.0.0.5:4242", err) == 0 && q.src_port == 4242);
        CHECK(explain_query_set(&q, "destination", "[fd00::1]:443", err) == 0 && q.dst.family == 6 &&
              q.dst_port == 443);
        CHECK_STREQ(inet_addr_format(&q.dst, s), "fd00::1");
        CHECK(explain_query_check(&q, err) < 0);        /* IPv4 source, IPv6 destination */
        CHECK(strstr(err, "families") != NULL);
        CHECK(explain_query_set(&q, "source", "fd00::2", err) == 0 && q.src.family == 6);
        CHECK(explain_query_check(&q, err) == 0);
        CHECK(explain_query_set(&q, "protocol", "UDP", err) == 0 && q.proto == L4_UDP);
        CHECK(explain_query_set(&q, "protocol", "sctp", err) == 0 && q.proto == L4_SCTP);
        CHECK(explain_query_set(&q, "from", "node", err) == 0 && q.from == EXPLAIN_FROM_NODE);
        CHECK(explain_query_set(&q, "from", "veth1234", err) == 0 && q.from == EXPLAIN_FROM_AUTO);
        CHECK_STREQ(q.iface, "veth1234");
        CHECK(explain_query_set(&q, "ct-state", "invalid", err) == 0 && q.ct_invalid);
}

static void test_query_refusals(void) {
        static const char *const bad[][2] = {
                {"destination", "10.0.0.1"},            /* no port */
                {"destination", "10.0.0.1:0"},
                {"destination", "10.0.0.1:65536"},
                {"destination", "10.0.0.1:-1"},
                {"destination", "10.0.0.1:+80"},
                {"destination", "10.0.0.1:80x"},
                {"destination", "[fd00::1:80"},
                {"destination", "[fd00::1]x80"},
                {"destination", ":80"},
                {"source", "300.1.1.1"},
                {"source", "10.0.0.1; rm -rf /"},
                {"source", ""},
                {"protocol", "icmp"},
                {"protocol", "tcpudpsctp"},
                {"from", "a/b"},
                {"from", "a-name-longer-than-an-interface"},
                {"from", ""},
                {"ct-state", "established"},
                {"color", "blue"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                struct explain_query q = {0};
                char err[EXPLAIN_ERRLEN] = "";
                int r = explain_query_set(&q, bad[i][0], bad[i][1], err);
                if (r == 0)
                        fprintf(stderr, "accepted %s=%s\n", bad[i][0], bad[i][1]);
                CHECK(r < 0);
                CHECK(err[0] != '\0');
                CHECK(!q.has_dst || strcmp(bad[i][0], "destination") != 0);
        }
        /* A value far too long is cut in the message, not overflowing it. */
        char big[4096];
        memset(big, '9', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        struct explain_query q = {0};
        char err[EXPLAIN_ERRLEN];
        CHECK(explain_query_set(&q, "destination", big, err) < 0 && strlen(err) < EXPLAIN_ERRLEN);
}

/* A trace notification as the kernel builds one. */
static size_t trace_msg(char *buf, uint8_t family, const char *table, bool headers, bool short_nh) {
        struct nlmsghdr *n = mnl_nlmsg_put_header(buf);
        n->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_TRACE;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(n, sizeof *g);
        g->nfgen_family = family;
        mnl_attr_put_strz(n, NFTA_TRACE_TABLE, table);
        mnl_attr_put_strz(n, NFTA_TRACE_CHAIN, "KUBE-SERVICES");
        mnl_attr_put_u32(n, NFTA_TRACE_ID, htonl(0xabcd));
        mnl_attr_put_u32(n, NFTA_TRACE_TYPE, htonl(NFT_TRACETYPE_RULE));
        mnl_attr_put_u64(n, NFTA_TRACE_RULE_HANDLE, htobe64(42));
        struct nlattr *v = mnl_attr_nest_start(n, NFTA_TRACE_VERDICT);
        mnl_attr_put_u32(n, NFTA_VERDICT_CODE, htonl((uint32_t) NFT_JUMP));
        mnl_attr_put_strz(n, NFTA_VERDICT_CHAIN, "KUBE-SVC-X");
        mnl_attr_nest_end(n, v);
        if (headers) {
                uint8_t ip[20] = {0x45, 0, 0, 60, 0, 0, 0, 0, 64, 6, 0, 0, 10, 244, 1, 7, 10, 96, 0, 10};
                uint8_t tcp[20] = {0xa4, 0x10, 0, 80};
                mnl_attr_put(n, NFTA_TRACE_NETWORK_HEADER, short_nh ? 8 : sizeof ip, ip);
                mnl_attr_put(n, NFTA_TRACE_TRANSPORT_HEADER, sizeof tcp, tcp);
        }
        return n->nlmsg_len;
}

static void test_trace_event(void) {
        char buf[1024];
        struct trace_event e;
        char s[INET_ADDR_STRLEN];

        trace_msg(buf, NFPROTO_IPV4, "nat", true, false);
        CHECK(trace_event_parse((struct nlmsghdr *) buf, &e) == 0);
        CHECK(e.id == 0xabcd && e.family == 4 && e.handle == 42 && e.type == NFT_TRACETYPE_RULE);
        CHECK_STREQ(e.table, "nat");
        CHECK_STREQ(e.target, "KUBE-SVC-X");
        CHECK_STREQ(trace_verdict_name(e.verdict), "jump");
        CHECK(e.has_tuple && e.proto == 6 && e.sport == 0xa410 && e.dport == 80);
        CHECK_STREQ(inet_addr_format(&e.dst, s), "10.96.0.10");

        /* Headers too short to read: the event, without the packet's addresses. */
        trace_msg(buf, NFPROTO_IPV4, "nat", true, true);
        CHECK(trace_event_parse((struct nlmsghdr *) buf, &e) == 0 && !e.has_tuple);
        /* Another family's (a bridge's), or not a trace: not ours. */
        trace_msg(buf, NFPROTO_BRIDGE, "nat", false, false);
        CHECK(trace_event_parse((struct nlmsghdr *) buf, &e) == 1);
        struct nlmsghdr *n = (struct nlmsghdr *) buf;
        n->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE;
        CHECK(trace_event_parse(n, &e) == 1);
        /* Cut short: refused. */
        n->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_TRACE;
        n->nlmsg_len = NLMSG_HDRLEN + 2;
        CHECK(trace_event_parse(n, &e) == -EINVAL);
}

/* An x_tables report as nfnetlink_log sends one: the prefix, the packet
 * from its network header (len bytes of it). */
static void xt_msg(char *buf, const char *prefix, size_t len) {
        static const uint8_t pk[40] = {0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 10, 244, 1, 7, 10, 96, 0, 10,
                                       0xa4, 0x10, 0, 80};
        struct nlmsghdr *n = mnl_nlmsg_put_header(buf);
        n->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(n, sizeof *g);
        g->nfgen_family = NFPROTO_IPV4;
        mnl_attr_put_u32(n, NFULA_IFINDEX_INDEV, htonl(3));
        if (prefix)
                mnl_attr_put_strz(n, NFULA_PREFIX, prefix);
        mnl_attr_put(n, NFULA_PAYLOAD, len, pk);
}

static void test_trace_xt(void) {
        char buf[1024], s[INET_ADDR_STRLEN];
        struct trace_event e;

        xt_msg(buf, "TRACE: nat:KUBE-SVC-ABC:rule:3 ", 40);
        CHECK(trace_xt_parse((struct nlmsghdr *) buf, &e) == 0);
        CHECK(e.xt && e.family == 4 && e.type == NFT_TRACETYPE_RULE && e.handle == 3 && e.iif == 3);
        CHECK_STREQ(e.table, "nat");
        CHECK_STREQ(e.chain, "KUBE-SVC-ABC");
        CHECK(e.has_tuple && e.proto == 6 && e.sport == 0xa410 && e.dport == 80);
        CHECK_STREQ(inet_addr_format(&e.src, s), "10.244.1.7");
        xt_msg(buf, "TRACE: raw:PREROUTING:policy:2 ", 40);
        CHECK(trace_xt_parse((struct nlmsghdr *) buf, &e) == 0 && e.type == NFT_TRACETYPE_POLICY);
        xt_msg(buf, "TRACE: filter:KUBE-X:return:7 ", 40);
        CHECK(trace_xt_parse((struct nlmsghdr *) buf, &e) == 0 && e.type == NFT_TRACETYPE_RETURN);
        /* The IP header alone, or less of it: the event, the ports or the
         * addresses unknown. */
        xt_msg(buf, "TRACE: nat:OUTPUT:rule:1 ", 20);
        CHECK(trace_xt_parse((struct nlmsghdr *) buf, &e) == 0 && e.has_tuple && e.dport == 0);
        xt_msg(buf, "TRACE: nat:OUTPUT:rule:1 ", 12);
        CHECK(trace_xt_parse((struct nlmsghdr *) buf, &e) == 0 && !e.has_tuple);
        /* A LOG rule's packet (another prefix, or none) is not a trace. */
        xt_msg(buf, "dropped: ", 40);
        CHECK(trace_xt_parse((struct nlmsghdr *) buf, &e) == 1);
        xt_msg(buf, NULL, 40);
        CHECK(trace_xt_parse((struct nlmsghdr *) buf, &e) == 1);
        /* A malformed trace prefix: refused. */
        static const char *const bad[] = {"TRACE: nat:OUTPUT:rule ",  "TRACE: nat:OUTPUT:rule:x ",
                                          "TRACE: nat:OUTPUT:jump:1 ", "TRACE: a:b:rule:1:2 ",
                                          "TRACE: :::",                "TRACE: nat:OUTPUT:rule:99999999999999999999 "};
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                xt_msg(buf, bad[i], 40);
                CHECK(trace_xt_parse((struct nlmsghdr *) buf, &e) == -EINVAL);
        }
        char big[400] = "TRACE: nat:";
        memset(big + 11, 'C', sizeof big - 12);
        big[sizeof big - 1] = '\0';
        xt_msg(buf, big, 40);
        CHECK(trace_xt_parse((struct nlmsghdr *) buf, &e) != 0);
        /* Cut short: refused. */
        xt_msg(buf, "TRACE: nat:OUTPUT:rule:1 ", 40);
        ((struct nlmsghdr *) buf)->nlmsg_len = NLMSG_HDRLEN + 2;
        CHECK(trace_xt_parse((struct nlmsghdr *) buf, &e) == -EINVAL);
}

int main(void) {
        TEST_RUN(test_query_fields);
        TEST_RUN(test_query_refusals);
        TEST_RUN(test_trace_event);
        TEST_RUN(test_trace_xt);
        TEST_DONE();
}
