/* SPDX-License-Identifier: Apache-2.0 */
/*
 * x_tables' trace through nfnetlink_log (trace-xt.h). ip_tables and
 * ip6_tables report a marked packet at each rule with nf_log_trace(), to
 * the logger bound to the family in the network namespace
 * (/proc/sys/net/netfilter/nf_log/<NFPROTO>). That is nf_log_syslog's by
 * default, which prints nothing for a namespace other than the first; the
 * trace binds nfnetlink_log instead, which sends each report as a packet
 * of group 0 with the prefix "TRACE: raw:PREROUTING:rule:2 " and the
 * packet from its network header on. The group is taken with a queue
 * threshold of one, so every report leaves at once, in order with the
 * nf_tables trace's notifications on the same socket.
 */
#include "trace/trace-xt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netfilter/nf_tables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply/sysctl.h"
#include "trace/trace-arm.h"
#include "trace/trace-event.h"

#define NFLOG "nfnetlink_log"
#define COPY_RANGE 128          /* the network and transport headers */

static void logger_path(uint8_t family, char *out, size_t len) {
        snprintf(out, len, "/proc/sys/net/netfilter/nf_log/%d", family == 6 ? NFPROTO_IPV6 : NFPROTO_IPV4);
}

/* The family's legacy tables: /proc/net/ip_tables_names lists those that
 * exist in this namespace. */
static bool any_legacy_table(uint8_t family) {
        FILE *f = fopen(family == 6 ? "/proc/net/ip6_tables_names" : "/proc/net/ip_tables_names", "re");
        char line[64];
        bool any = false;
        if (!f)
                return false;
        while (!any && fgets(line, sizeof line, f))
                any = line[0] != '\n' && line[0] != '\0';
        fclose(f);
        return any;
}

static struct nlmsghdr *config(char *buf, uint8_t nfproto, uint32_t seq) {
        struct nlmsghdr *n = mnl_nlmsg_put_header(buf);
        n->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
        n->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
        n->nlmsg_seq = seq;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(n, sizeof *g);
        g->nfgen_family = nfproto;
        g->version = NFNETLINK_V0;
        g->res_id = htons(0);   /* group 0: where nf_log_trace's reports go */
        return n;
}

/* Group 0 for this socket: bound, whole headers copied, each report sent
 * at once; or given up (bind false). */
static int group(struct mnl_socket *nl, uint8_t family, bool bind) {
        char buf[256];
        uint32_t seq = trace_nl_seq();
        struct nlmsghdr *n = config(buf, family == 6 ? NFPROTO_IPV6 : NFPROTO_IPV4, seq);
        struct nfulnl_msg_config_cmd cmd = {.command = bind ? NFULNL_CFG_CMD_BIND : NFULNL_CFG_CMD_UNBIND};
        mnl_attr_put(n, NFULA_CFG_CMD, sizeof cmd, &cmd);
        if (bind) {
                struct nfulnl_msg_config_mode mode = {.copy_range = htonl(COPY_RANGE),
                                                      .copy_mode = NFULNL_COPY_PACKET};
                mnl_attr_put(n, NFULA_CFG_MODE, sizeof mode, &mode);
                mnl_attr_put_u32(n, NFULA_CFG_QTHRESH, htonl(1));
        }
        return trace_nl_send(nl, buf, n->nlmsg_len, seq, seq);
}

int trace_xt_arm(struct mnl_socket *nl, uint8_t family, struct trace_xt *x) {
        char path[64];
        int r;

        *x = (struct trace_xt) {.family = family};
        if (!any_legacy_table(family))
                return 0;
        logger_path(family, path, sizeof path);
        r = sysctl_read_word(sysctl_root(), path, x->logger, sizeof x->logger);
        if (r < 0)
                return r;
        r = group(nl, family, true);
        if (r < 0)
                return r;
        r = sysctl_write(sysctl_root(), path, NFLOG);
        if (r < 0) {
                (void) group(nl, family, false);
                return r;
        }
        x->armed = true;
        return 0;
}

int trace_xt_disarm(struct mnl_socket *nl, struct trace_xt *x) {
        char path[64], now[32];
        int r = 0;
        if (!x->armed)
                return 0;
        x->armed = false;
        logger_path(x->family, path, sizeof path);
        /* Put back only what the trace set: not a binding made since. */
        if (sysctl_read_word(sysctl_root(), path, now, sizeof now) == 0 && strcmp(now, NFLOG) == 0 &&
            strcmp(x->logger, NFLOG) != 0)
                r = sysctl_write(sysctl_root(), path, x->logger);
        int g = group(nl, x->family, false);
        return r < 0 ? r : g;
}

/* "TRACE: raw:PREROUTING:rule:2 ": the table, the chain, what happened
 * (a rule matched, the end of a user chain returned, a base chain's
 * policy), the rule's number. */
static int prefix(const char *p, size_t n, struct trace_event *e) {
        char s[384], *f[4], *save = NULL;
        unsigned long num;
        char *end;
        if (n >= sizeof s || n < 7 || strncmp(p, "TRACE: ", 7) != 0)
                return 1;
        memcpy(s, p + 7, n - 7);
        s[n - 7] = '\0';
        s[strcspn(s, " ")] = '\0';
        f[0] = strtok_r(s, ":", &save);
        for (int i = 1; i < 4; i++)
                f[i] = f[i - 1] ? strtok_r(NULL, ":", &save) : NULL;
        if (!f[3] || strtok_r(NULL, ":", &save))
                return -EINVAL;
        errno = 0;
        num = strtoul(f[3], &end, 10);
        if (*end || errno || strlen(f[0]) >= sizeof e->table || strlen(f[1]) >= sizeof e->chain)
                return -EINVAL;
        if (strcmp(f[2], "rule") == 0)
                e->type = NFT_TRACETYPE_RULE;
        else if (strcmp(f[2], "return") == 0)
                e->type = NFT_TRACETYPE_RETURN;
        else if (strcmp(f[2], "policy") == 0)
                e->type = NFT_TRACETYPE_POLICY;
        else
                return -EINVAL;
        strcpy(e->table, f[0]);
        strcpy(e->chain, f[1]);
        e->handle = num;
        return 0;
}

struct attrs {
        const struct nlattr *a[NFULA_MAX + 1];
};

static int on_attr(const struct nlattr *a, void *data) {
        struct attrs *t = data;
        if (mnl_attr_type_valid(a, NFULA_MAX) >= 0)
                t->a[mnl_attr_get_type(a)] = a;
        return MNL_CB_OK;
}

int trace_xt_parse(const struct nlmsghdr *n, struct trace_event *ret) {
        struct attrs t = {0};
        struct trace_event e = {.xt = true};
        const struct nfgenmsg *g;

        if (n->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET))
                return 1;
        if (n->nlmsg_len < NLMSG_HDRLEN + sizeof *g)
                return -EINVAL;
        g = mnl_nlmsg_get_payload(n);
        if (g->nfgen_family != NFPROTO_IPV4 && g->nfgen_family != NFPROTO_IPV6)
                return 1;
        e.family = g->nfgen_family == NFPROTO_IPV6 ? 6 : 4;
        if (mnl_attr_parse(n, sizeof *g, on_attr, &t) < 0 || !t.a[NFULA_PREFIX])
                return t.a[NFULA_PREFIX] ? -EINVAL : 1;
        const char *p = mnl_attr_get_payload(t.a[NFULA_PREFIX]);
        int r = prefix(p, strnlen(p, mnl_attr_get_payload_len(t.a[NFULA_PREFIX])), &e);
        if (r != 0)
                return r;
        if (t.a[NFULA_IFINDEX_INDEV] && mnl_attr_get_payload_len(t.a[NFULA_IFINDEX_INDEV]) == 4)
                e.iif = ntohl(mnl_attr_get_u32(t.a[NFULA_IFINDEX_INDEV]));
        if (t.a[NFULA_IFINDEX_OUTDEV] && mnl_attr_get_payload_len(t.a[NFULA_IFINDEX_OUTDEV]) == 4)
                e.oif = ntohl(mnl_attr_get_u32(t.a[NFULA_IFINDEX_OUTDEV]));
        if (t.a[NFULA_MARK] && mnl_attr_get_payload_len(t.a[NFULA_MARK]) == 4)
                e.mark = ntohl(mnl_attr_get_u32(t.a[NFULA_MARK]));
        if (t.a[NFULA_PAYLOAD]) {
                const uint8_t *pk = mnl_attr_get_payload(t.a[NFULA_PAYLOAD]);
                size_t len = mnl_attr_get_payload_len(t.a[NFULA_PAYLOAD]);
                size_t hl = e.family == 6 ? 40 : len > 0 ? (size_t) (pk[0] & 0xf) * 4 : 0;
                trace_event_headers(&e, pk, len, hl >= 20 && hl < len ? pk + hl : NULL, hl < len ? len - hl : 0);
        }
        *ret = e;
        return 0;
}

/* Whether this namespace's nfnetlink_log has an instance on group 0:
 * /proc/net/netfilter/nfnetlink_log, a line per instance, the group
 * first. */
static bool group0_taken(void) {
        FILE *f = fopen("/proc/net/netfilter/nfnetlink_log", "re");
        char line[256];
        bool taken = false;
        if (!f)
                return false;
        while (!taken && fgets(line, sizeof line, f))
                taken = strtoul(line, NULL, 10) == 0 && line[strspn(line, " ")] == '0';
        fclose(f);
        return taken;
}

int trace_xt_cleanup(uint8_t family) {
        char path[64], now[32];
        const char *own = family == 6 ? "nf_log_ipv6" : "nf_log_ipv4";
        logger_path(family, path, sizeof path);
        if (sysctl_read_word(sysctl_root(), path, now, sizeof now) < 0 || strcmp(now, NFLOG) != 0 ||
            group0_taken())
                return 0;
        int r = sysctl_write(sysctl_root(), path, own);
        if (r == -ENOENT)
                r = sysctl_write(sysctl_root(), path, "NONE");
        return r < 0 ? r : 1;
}
