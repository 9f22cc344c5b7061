/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kernel's link: a NETLINK_NETFILTER socket. Everything the socket
 * needs and the in-memory kernel does not is here: the options, a send
 * buffer that grows with the batches (a batch goes in one message), and
 * errno turned into -errno.
 */
#include "apply/nftables-link.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <stdlib.h>
#include <sys/socket.h>

struct socket_link {
        struct nftables_link link;
        struct mnl_socket *nl;
        uint32_t portid;
        size_t sndbuf;          /* 0: the default, not yet raised */
};

static int sock_send(struct nftables_link *l, const void *buf, size_t len) {
        struct socket_link *s = (struct socket_link *) l;
        /* The whole batch goes in one message: make room for it. */
        if (len + 65536 > s->sndbuf) {
                int size = (int) (len + 65536);
                int fd = mnl_socket_get_fd(s->nl);
                if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) < 0 &&
                    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size) < 0)
                        return -errno;
                s->sndbuf = (size_t) size;
        }
        if (mnl_socket_sendto(s->nl, buf, len) < 0)
                return -errno;
        return 0;
}

static ssize_t sock_recv(struct nftables_link *l, void *buf, size_t len) {
        ssize_t n = mnl_socket_recvfrom(((struct socket_link *) l)->nl, buf, len);
        return n < 0 ? -errno : n;
}

static uint32_t sock_portid(const struct nftables_link *l) {
        return ((const struct socket_link *) l)->portid;
}

static void sock_free(struct nftables_link *l) {
        struct socket_link *s = (struct socket_link *) l;
        if (!s)
                return;
        if (s->nl)
                mnl_socket_close(s->nl);
        free(s);
}

static const struct nftables_link_ops socket_ops = {sock_send, sock_recv, sock_portid, sock_free};

static int socket_setup(struct mnl_socket *nl, size_t rcvbuf) {
        int one = 1, fd = mnl_socket_get_fd(nl);
        struct timeval tv = {.tv_sec = 60};
        if (rcvbuf > 0) {
                int size = (int) rcvbuf;
                if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0)
                        (void) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
        }
        /* Errors without the echoed request, and with the kernel's text. */
        if (mnl_socket_setsockopt(nl, NETLINK_CAP_ACK, &one, sizeof one) < 0 ||
            mnl_socket_setsockopt(nl, NETLINK_EXT_ACK, &one, sizeof one) < 0)
                return -errno;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
                return -errno;
        if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
                return -errno;
        return 0;
}

int nftables_link_socket(void *kernel, size_t rcvbuf, struct nftables_link **ret) {
        struct socket_link *s = calloc(1, sizeof *s);
        int r;

        (void) kernel;
        if (!s)
                return -ENOMEM;
        s->link.ops = &socket_ops;
        s->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
        if (!s->nl) {
                r = -errno;
                free(s);
                return r;
        }
        r = socket_setup(s->nl, rcvbuf);
        if (r < 0) {
                sock_free(&s->link);
                return r;
        }
        s->portid = mnl_socket_get_portid(s->nl);
        *ret = &s->link;
        return 0;
}
