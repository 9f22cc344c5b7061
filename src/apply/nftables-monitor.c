/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The change monitor: nf_tables' notifications of kproxy's tables, less
 * kproxy's own (those carry its port id) and the affinity sets' elements
 * (they fill and expire by themselves). The kernel's socket always: a
 * test's in-memory kernel has no notifications.
 */
#include <netinet/in.h>

#include "apply/nftables-monitor.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "apply/nftables-commit.h"
#include "apply/nftables-handle.h"
#include "render/nftir.h"
#include "util/cleanup.h"

#define MONITOR_RCVBUF (32 * 1024 * 1024)
#define MONITOR_RECV_BUF (64 * 1024)

struct nftables_monitor {
        struct mnl_socket *nl;
        uint32_t ours;
        nftables_event_fn fn;
        void *userdata;
};

int nftables_monitor_open(const struct nftables *n, nftables_event_fn fn, void *userdata,
                          struct nftables_monitor **ret) {
        struct nftables_monitor *m = calloc(1, sizeof *m);
        int size = MONITOR_RCVBUF, r;

        if (!m)
                return -ENOMEM;
        m->ours = nftables_portid(n);
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
        snprintf(what, sizeof what, "%s %s (netlink port %u)", nftables_msg_type_name(type), obj ? obj : table,
                 nlh->nlmsg_pid);
        m->fn(m->userdata, NFTABLES_EVENT_FOREIGN, g->nfgen_family == NFPROTO_IPV6 ? 6 : 4, what);
}

void nftables_monitor_drain(struct nftables_monitor *m) {
        _cleanup_free_ char *rbuf = malloc(MONITOR_RECV_BUF);
        if (!rbuf)
                return;
        for (;;) {
                ssize_t len = mnl_socket_recvfrom(m->nl, rbuf, MONITOR_RECV_BUF);
                if (len < 0) {
                        if (errno == ENOBUFS) {
                                m->fn(m->userdata, NFTABLES_EVENT_LOST, 0, "notifications dropped");
                                continue;
                        }
                        return;         /* EAGAIN: drained */
                }
                int left = (int) len;
                for (const struct nlmsghdr *nlh = (const struct nlmsghdr *) rbuf; mnl_nlmsg_ok(nlh, left);
                     nlh = mnl_nlmsg_next(nlh, &left))
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
