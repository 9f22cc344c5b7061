/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A TCP handshake held half-way, for the tests of what a listener does
 * while one is under way: the client's socket drops every segment (a
 * socket filter), so it never sees the SYN-ACK, the listener keeps a
 * request socket (SYN_RECV) and retransmits the SYN-ACK after a second.
 * Released, the client takes the next SYN-ACK and the handshake completes.
 */
#include <errno.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "test.h"
#include "userspace/fwd-addr.h"
#include "userspace/synrecv.h"

/* A non-blocking connect to a, its answers dropped until released. */
static __attribute__((unused)) int tcp_held_connect(const struct fwd_addr *a) {
        static struct sock_filter drop_all[] = {BPF_STMT(BPF_RET | BPF_K, 0)};
        const struct sock_fprog prog = {.len = 1, .filter = drop_all};
        struct sockaddr_storage ss;
        socklen_t len;
        int fd;

        CHECK(fwd_addr_to_sockaddr(a, &ss, &len) == 0);
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        CHECK(fd >= 0);
        CHECK(setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) == 0);
        CHECK(connect(fd, (struct sockaddr *) &ss, len) < 0 && errno == EINPROGRESS);
        return fd;
}

static __attribute__((unused)) void tcp_held_release(int fd) {
        int zero = 0;
        CHECK(setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, &zero, sizeof zero) == 0);
}

/* The socket's TCP state (TCP_SYN_SENT, TCP_ESTABLISHED, ...) and how many
 * segments it has retransmitted. */
static __attribute__((unused)) int tcp_held_state(int fd, unsigned *ret_retrans) {
        struct tcp_info ti;
        socklen_t len = sizeof ti;

        CHECK(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0);
        if (ret_retrans)
                *ret_retrans = ti.tcpi_total_retrans;
        return ti.tcpi_state;
}

/* Whether the kernel lists a handshake under way to a (userspace/synrecv.h). */
static __attribute__((unused)) bool tcp_held_listed(const struct fwd_addr *a) {
        struct synrecv *s = NULL;

        CHECK(synrecv_dump(&s) == 0);
        bool r = synrecv_has(s, a);
        synrecv_free(s);
        return r;
}
