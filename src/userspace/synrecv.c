/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One SOCK_DIAG_BY_FAMILY dump per family, states SYN_RECV only (the kernel
 * reports its request sockets under that state), kept as local addresses
 * sorted by port. The kernel walks its whole established hash for a dump,
 * so a caller dumps once and asks about each of its listeners.
 */
#include "userspace/synrecv.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/inet_diag.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "userspace/fwd-addr.h"
#include "util/cleanup.h"

struct synrecv {
        struct fwd_addr *v;     /* sorted by port */
        size_t n, cap;
};

struct synrecv *synrecv_free(struct synrecv *s) {
        if (!s)
                return NULL;
        free(s->v);
        free(s);
        return NULL;
}

static void synrecv_freep(struct synrecv **s) {
        synrecv_free(*s);
}

static void mnl_closep(struct mnl_socket **nl) {
        if (*nl)
                mnl_socket_close(*nl);
}

static int synrecv_add(struct synrecv *s, const struct fwd_addr *a) {
        if (s->n == s->cap) {
                size_t cap = s->cap ? s->cap * 2 : 16;
                struct fwd_addr *v = reallocarray(s->v, cap, sizeof *v);
                if (!v)
                        return -ENOMEM;
                s->v = v;
                s->cap = cap;
        }
        s->v[s->n++] = *a;
        return 0;
}

struct dump {
        struct synrecv *s;
        int error;
};

static int dump_cb(const struct nlmsghdr *nlh, void *data) {
        struct dump *d = data;
        const struct inet_diag_msg *m = mnl_nlmsg_get_payload(nlh);
        struct fwd_addr a = {0};

        if (nlh->nlmsg_type != SOCK_DIAG_BY_FAMILY || mnl_nlmsg_get_payload_len(nlh) < sizeof *m)
                return MNL_CB_OK;
        if (m->idiag_state != TCP_SYN_RECV)
                return MNL_CB_OK;
        if (m->idiag_family == AF_INET) {
                a.ip.family = 4;
                memcpy(a.ip.bytes, m->id.idiag_src, 4);
        } else if (m->idiag_family == AF_INET6) {
                a.ip.family = 6;
                memcpy(a.ip.bytes, m->id.idiag_src, 16);
        } else {
                return MNL_CB_OK;
        }
        a.port = ntohs(m->id.idiag_sport);
        d->error = synrecv_add(d->s, &a);
        return d->error < 0 ? MNL_CB_ERROR : MNL_CB_OK;
}

static int dump_family(struct mnl_socket *nl, unsigned seq, int family, struct synrecv *s) {
        _cleanup_free_ char *buf = malloc(MNL_SOCKET_BUFFER_SIZE);
        struct dump d = {.s = s};
        struct nlmsghdr *nlh;
        struct inet_diag_req_v2 *req;
        unsigned portid = mnl_socket_get_portid(nl);
        int r;

        if (!buf)
                return -ENOMEM;
        nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = SOCK_DIAG_BY_FAMILY;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
        nlh->nlmsg_seq = seq;
        req = mnl_nlmsg_put_extra_header(nlh, sizeof *req);
        req->sdiag_family = (uint8_t) family;
        req->sdiag_protocol = IPPROTO_TCP;
        req->idiag_states = 1u << TCP_SYN_RECV;
        if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        do {
                ssize_t n = mnl_socket_recvfrom(nl, buf, MNL_SOCKET_BUFFER_SIZE);
                if (n < 0)
                        return -errno;
                r = mnl_cb_run(buf, (size_t) n, seq, portid, dump_cb, &d);
                if (d.error < 0)
                        return d.error;
                if (r < 0)
                        return -errno;
        } while (r > MNL_CB_STOP);
        return 0;
}

static int cmp_port(const void *x, const void *y) {
        const struct fwd_addr *a = x, *b = y;
        return (a->port > b->port) - (a->port < b->port);
}

int synrecv_dump(struct synrecv **ret) {
        _cleanup_(synrecv_freep) struct synrecv *s = calloc(1, sizeof *s);
        _cleanup_(mnl_closep) struct mnl_socket *nl = NULL;
        unsigned seq = (unsigned) time(NULL);
        int r;

        if (!s)
                return -ENOMEM;
        nl = mnl_socket_open2(NETLINK_SOCK_DIAG, SOCK_CLOEXEC);
        if (!nl)
                return -errno;
        if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
                return -errno;
        r = dump_family(nl, seq, AF_INET, s);
        if (r >= 0)
                r = dump_family(nl, seq + 1, AF_INET6, s);
        if (r < 0)
                return r;
        if (s->n > 1)
                qsort(s->v, s->n, sizeof *s->v, cmp_port);
        *ret = TAKE_PTR(s);
        return 0;
}

bool synrecv_has(const struct synrecv *s, const struct fwd_addr *local) {
        size_t lo = 0, hi = s->n;
        bool any = inet_addr_is_unspecified(&local->ip);

        while (lo < hi) {               /* the first entry with local's port, if any */
                size_t mid = lo + (hi - lo) / 2;
                if (s->v[mid].port < local->port)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        for (size_t i = lo; i < s->n && s->v[i].port == local->port; i++)
                if (any || inet_addr_equal(&s->v[i].ip, &local->ip))
                        return true;
        return false;
}
