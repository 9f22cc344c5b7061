/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nfnetlink_acct requests: NFNL_MSG_ACCT_NEW to create a counter (without
 * NLM_F_REPLACE an existing one answers EBUSY and keeps its count) and
 * NFNL_MSG_ACCT_GET with a name to read one (ENOENT when it does not
 * exist). The kernel handles a request inside sendmsg() and queues its
 * answer before returning, so the answer is read without waiting: the
 * metrics server on the event loop never blocks on a scrape.
 */
#include "apply/nfacct.h"

#include <endian.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_acct.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "util/cleanup.h"
#include "util/log.h"

static const char *const nfacct_counter_table[_NFACCT_COUNTER_MAX] = {
        [NFACCT_COUNTER_CT_STATE_INVALID] = "ct_state_invalid_dropped_pkts",
        [NFACCT_COUNTER_LOCALHOST_NODEPORTS] = "localhost_nps_accepted_pkts",
};

const char *nfacct_counter_to_string(enum nfacct_counter c) {
        return c >= 0 && c < _NFACCT_COUNTER_MAX ? nfacct_counter_table[c] : NULL;
}

struct nfacct {
        struct mnl_socket *nl;
        unsigned portid;
        unsigned seq;
};

struct nfacct *nfacct_close(struct nfacct *a) {
        if (!a)
                return NULL;
        if (a->nl)
                mnl_socket_close(a->nl);
        free(a);
        return NULL;
}

static void nfacct_closep(struct nfacct **a) {
        nfacct_close(*a);
}

int nfacct_open(struct nfacct **ret) {
        _cleanup_(nfacct_closep) struct nfacct *a = calloc(1, sizeof *a);

        if (!a)
                return -ENOMEM;
        a->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
        if (!a->nl)
                return -errno;
        if (mnl_socket_bind(a->nl, 0, MNL_SOCKET_AUTOPID) < 0)
                return -errno;
        a->portid = mnl_socket_get_portid(a->nl);
        a->seq = (unsigned) time(NULL);
        *ret = TAKE_PTR(a);
        return 0;
}

struct nfacct_reply {
        bool found;
        uint64_t packets;
};

static int nfacct_attr_cb(const struct nlattr *attr, void *data) {
        struct nfacct_reply *r = data;

        if (mnl_attr_get_type(attr) == NFACCT_PKTS && mnl_attr_validate(attr, MNL_TYPE_U64) >= 0) {
                r->packets = be64toh(mnl_attr_get_u64(attr));
                r->found = true;
        }
        return MNL_CB_OK;
}

static int nfacct_msg_cb(const struct nlmsghdr *nlh, void *data) {
        return mnl_attr_parse(nlh, sizeof(struct nfgenmsg), nfacct_attr_cb, data);
}

/* One request about name; its answer goes through cb (may be NULL: only
 * the acknowledgement matters). Returns 0 or the kernel's -errno. */
static int nfacct_request(struct nfacct *a, uint16_t msg, uint16_t flags, const char *name, mnl_cb_t cb,
                          void *data) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        struct nfgenmsg *nfg;
        unsigned seq = ++a->seq;
        int r;

        nlh->nlmsg_type = (NFNL_SUBSYS_ACCT << 8) | msg;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        nlh->nlmsg_seq = seq;
        nfg = mnl_nlmsg_put_extra_header(nlh, sizeof *nfg);
        nfg->nfgen_family = AF_UNSPEC;
        nfg->version = NFNETLINK_V0;
        nfg->res_id = 0;
        mnl_attr_put_strz(nlh, NFACCT_NAME, name);
        if (mnl_socket_sendto(a->nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        /* The answer (and the acknowledgement) are queued by now. */
        for (;;) {
                ssize_t n = recv(mnl_socket_get_fd(a->nl), buf, sizeof buf, MSG_DONTWAIT);

                if (n < 0)
                        return errno == EAGAIN ? -ETIMEDOUT : -errno;
                r = mnl_cb_run(buf, (size_t) n, seq, a->portid, cb, data);
                if (r == MNL_CB_STOP)
                        return 0;
                if (r < 0)
                        return -errno;
        }
}

int nfacct_get(struct nfacct *a, enum nfacct_counter c, uint64_t *ret_packets) {
        struct nfacct_reply reply = {0};
        int r;

        if (!a || !nfacct_counter_to_string(c))
                return -EINVAL;
        r = nfacct_request(a, NFNL_MSG_ACCT_GET, 0, nfacct_counter_to_string(c), nfacct_msg_cb, &reply);
        if (r < 0)
                return r;
        if (!reply.found)
                return -EBADMSG;
        *ret_packets = reply.packets;
        return 0;
}

bool nfacct_ensure_all(void) {
        _cleanup_(nfacct_closep) struct nfacct *a = NULL;
        bool all = true;
        int r;

        r = nfacct_open(&a);
        if (r < 0) {
                log_v(2, "nfacct counters are not available: %s", strerror(-r));
                return false;
        }
        for (int i = 0; i < _NFACCT_COUNTER_MAX; i++) {
                r = nfacct_request(a, NFNL_MSG_ACCT_NEW, NLM_F_CREATE, nfacct_counter_table[i], NULL, NULL);
                if (r < 0 && r != -EBUSY) {
                        log_v(2, "nfacct counter %s is not available: %s", nfacct_counter_table[i], strerror(-r));
                        all = false;
                }
        }
        return all;
}
