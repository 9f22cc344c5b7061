/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The forwarders' service sockets (userspace/fwd-sock.c), on loopback:
 *  - opened: TCP listening, UDP bound, non-blocking, the kernel's port;
 *    a second socket binds the same address beside the first
 *    (SO_REUSEPORT, what a successor process does);
 *  - adopted: each kind as its own forwarder's, made non-blocking; refused
 *    (-ENOTSOCK) as the other kind, and for a connected-but-not-listening
 *    TCP socket, an unbound UDP one, a pipe.
 */
#include "userspace/fwd-sock.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <unistd.h>

#include "test.h"

static struct fwd_addr loopback(uint16_t port) {
        struct fwd_addr a = {.port = port};
        inet_addr_parse("127.0.0.1", &a.ip);
        return a;
}

static bool nonblocking(int fd) {
        return (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0;
}

static void test_open_and_beside(void) {
        static const int types[] = {SOCK_STREAM, SOCK_DGRAM};

        for (size_t i = 0; i < 2; i++) {
                struct fwd_addr any = loopback(0), got, again;
                int fd = fwd_sock_open(&any, types[i], 16, &got);
                CHECK(fd >= 0);
                CHECK(got.port != 0 && fwd_addr_equal(&got, &(struct fwd_addr) {any.ip, got.port}));
                CHECK(nonblocking(fd));
                CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
                int fd2 = fwd_sock_open(&got, types[i], 16, &again);
                CHECK(fd2 >= 0 && fwd_addr_equal(&got, &again));
                close(fd2);
                close(fd);
        }
        struct fwd_addr none = {.port = 80};
        CHECK(fwd_sock_open(&none, SOCK_STREAM, 1, &(struct fwd_addr) {0}) == -EAFNOSUPPORT);
        CHECK(fwd_sock_open(&none, SOCK_RAW, 1, &(struct fwd_addr) {0}) == -EINVAL);
}

static void test_adopt(void) {
        struct fwd_addr any = loopback(0), tcp_addr, udp_addr, got;
        int tcp = fwd_sock_open(&any, SOCK_STREAM, 16, &tcp_addr);
        int udp = fwd_sock_open(&any, SOCK_DGRAM, 0, &udp_addr);
        int p[2];

        CHECK(tcp >= 0 && udp >= 0);
        /* As a predecessor hands them over: blocking again. */
        fcntl(tcp, F_SETFL, 0);
        fcntl(udp, F_SETFL, 0);
        CHECK(fwd_sock_adopt(tcp, SOCK_STREAM, &got) == 0 && fwd_addr_equal(&got, &tcp_addr) && nonblocking(tcp));
        CHECK(fwd_sock_adopt(udp, SOCK_DGRAM, &got) == 0 && fwd_addr_equal(&got, &udp_addr) && nonblocking(udp));
        CHECK(fwd_sock_adopt(tcp, SOCK_DGRAM, &got) == -ENOTSOCK);
        CHECK(fwd_sock_adopt(udp, SOCK_STREAM, &got) == -ENOTSOCK);

        /* A TCP socket that is not listening, a UDP one that is not bound. */
        int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_storage ss;
        socklen_t len;
        CHECK(fwd_addr_to_sockaddr(&tcp_addr, &ss, &len) == 0 && connect(c, (struct sockaddr *) &ss, len) == 0);
        CHECK(fwd_sock_adopt(c, SOCK_STREAM, &got) == -ENOTSOCK);
        CHECK(fwd_sock_adopt(u, SOCK_DGRAM, &got) == -ENOTSOCK);
        CHECK(pipe2(p, O_CLOEXEC) == 0);
        CHECK(fwd_sock_adopt(p[0], SOCK_STREAM, &got) == -ENOTSOCK);
        CHECK(fwd_sock_adopt(p[0], SOCK_DGRAM, &got) == -ENOTSOCK);
        CHECK(fwd_sock_adopt(-1, SOCK_DGRAM, &got) == -EINVAL);
        close(p[0]);
        close(p[1]);
        close(c);
        close(u);
        close(tcp);
        close(udp);
}

int main(void) {
        TEST_RUN(test_open_and_beside);
        TEST_RUN(test_adopt);
        TEST_DONE();
}
