/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle: each request is read to its end (a dump's DONE, or its ack)
 * before the call returns, so no answer is left for the next call.
 */
#include "util/sockdiag.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/inet_diag.h>
#include <linux/sock_diag.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

/* Reads of 32 KiB, as ss makes them: the kernel sizes a dump's batches
 * by the reads it has seen. */
#define SOCKDIAG_BUF 32768

struct sockdiag {
        struct mnl_socket *nl;
        unsigned portid, seq;
        char buf[SOCKDIAG_BUF];
};

int sockdiag_open(struct sockdiag **ret) {
        struct sockdiag *d = calloc(1, sizeof *d);
        int r;

        if (!d)
                return -ENOMEM;
        d->nl = mnl_socket_open2(NETLINK_SOCK_DIAG, SOCK_CLOEXEC);
        if (!d->nl || mnl_socket_bind(d->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
                r = -errno;
                sockdiag_close(d);
                return r;
        }
        d->portid = mnl_socket_get_portid(d->nl);
        d->seq = (unsigned) time(NULL);
        *ret = d;
        return 0;
}

struct sockdiag *sockdiag_close(struct sockdiag *d) {
        if (d) {
                if (d->nl)
                        mnl_socket_close(d->nl);
                free(d);
        }
        return NULL;
}

static struct inet_diag_req_v2 *put_req(struct sockdiag *d, uint16_t type, uint16_t flags, int family, int protocol) {
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(d->buf);
        struct inet_diag_req_v2 *req;

        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = NLM_F_REQUEST | flags;
        nlh->nlmsg_seq = ++d->seq;
        req = mnl_nlmsg_put_extra_header(nlh, sizeof *req);
        req->sdiag_family = (uint8_t) family;
        req->sdiag_protocol = (uint8_t) protocol;
        return req;
}

struct dump {
        int (*each)(const struct inet_diag_msg *m, void *ctx);
        void *ctx;
        int err;
};

/* After each() fails, the rest of the dump is read and skipped. */
static int dump_cb(const struct nlmsghdr *nlh, void *data) {
        struct dump *dp = data;

        if (dp->err < 0 || nlh->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
            mnl_nlmsg_get_payload_len(nlh) < sizeof(struct inet_diag_msg))
                return MNL_CB_OK;
        dp->err = dp->each(mnl_nlmsg_get_payload(nlh), dp->ctx);
        return MNL_CB_OK;
}

/* Sends what put_req() built and reads to its end. */
static int request(struct sockdiag *d, mnl_cb_t cb, struct dump *dp) {
        struct nlmsghdr *nlh = (struct nlmsghdr *) d->buf;
        unsigned seq = nlh->nlmsg_seq;
        int r;

        if (mnl_socket_sendto(d->nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        do {
                ssize_t n = mnl_socket_recvfrom(d->nl, d->buf, sizeof d->buf);
                if (n < 0)
                        return -errno;
                r = mnl_cb_run(d->buf, (size_t) n, seq, d->portid, cb, dp);
                if (r < 0)
                        return -errno;
        } while (r > MNL_CB_STOP);
        return dp && dp->err < 0 ? dp->err : 0;
}

int sockdiag_dump(struct sockdiag *d, int family, int protocol, uint32_t states,
                  int (*each)(const struct inet_diag_msg *m, void *ctx), void *ctx) {
        struct dump dp = {each, ctx, 0};

        put_req(d, SOCK_DIAG_BY_FAMILY, NLM_F_DUMP, family, protocol)->idiag_states = states;
        return request(d, dump_cb, &dp);
}

int sockdiag_destroy(struct sockdiag *d, int family, int protocol, const struct inet_diag_sockid *id) {
        struct inet_diag_req_v2 *req = put_req(d, SOCK_DESTROY, NLM_F_ACK, family, protocol);

        req->idiag_states = UINT32_MAX;
        req->id = *id;
        return request(d, NULL, NULL);
}
