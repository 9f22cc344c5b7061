/* SPDX-License-Identifier: Apache-2.0 */
#include "apply/nfacct.h"

#include <errno.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_acct.h>
#include <linux/netlink.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "util/cleanup.h"
#include "util/log.h"

static const char *const counters[] = {
        "ct_state_invalid_dropped_pkts",
        "localhost_nps_accepted_pkts",
};

/* One NFNL_MSG_ACCT_NEW; an existing counter answers EBUSY (no NLM_F_REPLACE:
 * its count is kept). Returns 0 or -errno. */
static int create(int fd, const char *name, unsigned seq) {
        struct {
                struct nlmsghdr nh;
                struct nfgenmsg nfg;
                struct nlattr attr;
                char name[NFACCT_NAME_MAX];
        } req;
        char reply[4096];
        size_t nlen = strlen(name) + 1;

        memset(&req, 0, sizeof req);
        req.nh.nlmsg_type = (NFNL_SUBSYS_ACCT << 8) | NFNL_MSG_ACCT_NEW;
        req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK;
        req.nh.nlmsg_seq = seq;
        req.nfg.nfgen_family = AF_UNSPEC;
        req.nfg.version = NFNETLINK_V0;
        req.attr.nla_type = NFACCT_NAME;
        req.attr.nla_len = (unsigned short) (sizeof req.attr + nlen);
        memcpy(req.name, name, nlen);
        req.nh.nlmsg_len = (unsigned) NLMSG_LENGTH(sizeof req.nfg + NLA_ALIGN(req.attr.nla_len));
        if (send(fd, &req, req.nh.nlmsg_len, 0) < 0)
                return -errno;
        ssize_t n = recv(fd, reply, sizeof reply, 0);
        if (n < 0)
                return -errno;
        const struct nlmsghdr *nh = (const struct nlmsghdr *) reply;
        if (!NLMSG_OK(nh, (size_t) n) || nh->nlmsg_type != NLMSG_ERROR)
                return -EPROTO;
        int err = ((const struct nlmsgerr *) NLMSG_DATA(nh))->error;
        return err == -EBUSY ? 0 : err;
}

bool nfacct_ensure_all(void) {
        _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        struct timeval tv = {.tv_sec = 1};
        bool all = true;

        if (fd < 0)
                return false;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        for (size_t i = 0; i < ELEMENTSOF(counters); i++) {
                int r = create(fd, counters[i], (unsigned) i + 1);
                if (r < 0) {
                        log_v(2, "nfacct counter %s is not available: %s", counters[i], strerror(-r));
                        all = false;
                }
        }
        return all;
}
