/* SPDX-License-Identifier: Apache-2.0 */
/* userspace/fwd-filter.h on real sockets, in a network namespace of the
 * test's own: datagrams and SYNs from outside the allowed sources never
 * reach the socket; those from inside do. A datagram from a refused source
 * is sent before one from an allowed source, so the first read shows
 * whether it was dropped (loopback delivers in order). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netns.h"
#include "test.h"
#include "userspace/fwd-filter.h"

/* The kernel's struct in6_ifreq (linux/ipv6.h clashes with netinet/in.h). */
struct test_in6_ifreq {
        struct in6_addr addr;
        uint32_t prefixlen;
        int ifindex;
};

static struct inet_cidr cidr(const char *text) {
        struct inet_cidr c;
        if (inet_cidr_parse(text, &c) < 0)
                abort();
        return c;
}

/* Adds text/128 to lo and waits (at most 5 s) until it can be bound: a new
 * IPv6 address is tentative until the kernel's address work has run, even
 * on loopback. */
static int add_lo6(const char *text) {
        struct test_in6_ifreq r = {.prefixlen = 128, .ifindex = (int) if_nametoindex("lo")};
        struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
        int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret = 0;
        inet_pton(AF_INET6, text, &r.addr);
        if (fd < 0 || ioctl(fd, SIOCSIFADDR, &r) < 0)
                ret = -errno;
        sa.sin6_addr = r.addr;
        for (int i = 0; ret == 0 && bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0; i++) {
                if (i == 5000)
                        ret = -ETIMEDOUT;
                (void) poll(NULL, 0, 1);
        }
        if (fd >= 0)
                close(fd);
        return ret;
}

static void to_sa(const char *ip, uint16_t port, struct sockaddr_storage *ss, socklen_t *len) {
        memset(ss, 0, sizeof *ss);
        if (strchr(ip, ':')) {
                struct sockaddr_in6 *s = (struct sockaddr_in6 *) ss;
                s->sin6_family = AF_INET6;
                s->sin6_port = htons(port);
                inet_pton(AF_INET6, ip, &s->sin6_addr);
                *len = sizeof *s;
        } else {
                struct sockaddr_in *s = (struct sockaddr_in *) ss;
                s->sin_family = AF_INET;
                s->sin_port = htons(port);
                inet_pton(AF_INET, ip, &s->sin_addr);
                *len = sizeof *s;
        }
}

/* A socket of type bound to ip:port (port 0: any), non-blocking. */
static int bound(const char *ip, uint16_t port, int type) {
        struct sockaddr_storage ss;
        socklen_t len;
        to_sa(ip, port, &ss, &len);
        int fd = socket(ss.ss_family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *) &ss, len) < 0)
                abort();
        return fd;
}

static void send_from(const char *src, const char *dst, uint16_t port, char tag) {
        struct sockaddr_storage ss;
        socklen_t len;
        int fd = bound(src, 0, SOCK_DGRAM);
        to_sa(dst, port, &ss, &len);
        CHECK(sendto(fd, &tag, 1, 0, (struct sockaddr *) &ss, len) == 1);
        close(fd);
}

/* The tags of the datagrams waiting on fd, in order. */
static void received(int fd, char *out, size_t cap) {
        size_t n = 0;
        while (n + 1 < cap && recv(fd, &out[n], 1, 0) == 1)
                n++;
        out[n] = '\0';
}

static void test_udp_ipv4(void) {
        const struct inet_cidr allow[] = {cidr("127.0.0.2/31"), cidr("10.0.0.0/8"), cidr("fd00::/8")};
        char got[16];
        int fd = bound("127.0.0.1", 7001, SOCK_DGRAM);

        CHECK(fwd_filter_sources(fd, 4, allow, 3) == 0);
        send_from("127.0.0.4", "127.0.0.1", 7001, 'a');        /* outside */
        send_from("127.0.0.3", "127.0.0.1", 7001, 'b');        /* the /31's second address */
        send_from("127.0.0.1", "127.0.0.1", 7001, 'c');        /* outside */
        send_from("127.0.0.2", "127.0.0.1", 7001, 'd');
        received(fd, got, sizeof got);
        CHECK_STREQ(got, "bd");

        /* Replaced, not added to. */
        const struct inet_cidr only4[] = {cidr("127.0.0.4/32")};
        CHECK(fwd_filter_sources(fd, 4, only4, 1) == 0);
        send_from("127.0.0.2", "127.0.0.1", 7001, 'e');
        send_from("127.0.0.4", "127.0.0.1", 7001, 'f');
        received(fd, got, sizeof got);
        CHECK_STREQ(got, "f");

        /* No CIDR of the family: nothing passes. */
        const struct inet_cidr only6[] = {cidr("::/0")};
        CHECK(fwd_filter_sources(fd, 4, only6, 1) == 0);
        send_from("127.0.0.4", "127.0.0.1", 7001, 'g');
        received(fd, got, sizeof got);
        CHECK_STREQ(got, "");

        /* None at all: everything passes again. */
        CHECK(fwd_filter_sources(fd, 4, NULL, 0) == 0);
        CHECK(fwd_filter_sources(fd, 4, NULL, 0) == 0);        /* no filter to remove: fine */
        send_from("127.0.0.9", "127.0.0.1", 7001, 'h');
        received(fd, got, sizeof got);
        CHECK_STREQ(got, "h");

        /* /0 passes everything of the family. */
        const struct inet_cidr all[] = {cidr("0.0.0.0/0")};
        CHECK(fwd_filter_sources(fd, 4, all, 1) == 0);
        send_from("127.0.0.9", "127.0.0.1", 7001, 'i');
        received(fd, got, sizeof got);
        CHECK_STREQ(got, "i");
        close(fd);
}

static void test_udp_ipv6(void) {
        const char *addrs[] = {"fd00:1::2", "fd00:1:0:0:8000::5", "fd00:2::3"};
        char got[16];
        for (size_t i = 0; i < 3; i++)
                CHECK(add_lo6(addrs[i]) == 0);
        /* A prefix that ends inside the third word, and one in the second. */
        const struct inet_cidr allow[] = {cidr("fd00:1::/65"), cidr("10.0.0.0/8"), cidr("fd00:2::/31")};
        int fd = bound("::1", 7002, SOCK_DGRAM);

        CHECK(fwd_filter_sources(fd, 6, allow, 3) == 0);
        send_from("fd00:1:0:0:8000::5", "::1", 7002, 'a');     /* bit 65 set: outside /65 */
        send_from("fd00:2::3", "::1", 7002, 'b');              /* in fd00:2::/31 (the third CIDR's) */
        send_from("::1", "::1", 7002, 'c');                    /* outside */
        send_from("fd00:1::2", "::1", 7002, 'd');
        received(fd, got, sizeof got);
        CHECK_STREQ(got, "bd");
        close(fd);
}

/* A SYN from outside is dropped before any handshake: the client's
 * connect stays unanswered while one from inside is accepted. */
static void test_tcp_listener(void) {
        const struct inet_cidr allow[] = {cidr("127.0.0.2/32")};
        struct sockaddr_storage ss;
        socklen_t len;
        int l = bound("127.0.0.1", 7003, SOCK_STREAM);

        CHECK(listen(l, 8) == 0);
        CHECK(fwd_filter_sources(l, 4, allow, 1) == 0);
        to_sa("127.0.0.1", 7003, &ss, &len);
        int out = bound("127.0.0.5", 0, SOCK_STREAM), in = bound("127.0.0.2", 0, SOCK_STREAM);
        CHECK(connect(out, (struct sockaddr *) &ss, len) < 0 && errno == EINPROGRESS);
        int r = connect(in, (struct sockaddr *) &ss, len);
        CHECK(r == 0 || errno == EINPROGRESS);
        struct pollfd p = {.fd = in, .events = POLLOUT};
        CHECK(poll(&p, 1, 5000) == 1);
        int err = -1;
        socklen_t el = sizeof err;
        CHECK(getsockopt(in, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);

        /* The allowed client's connection is the only one queued. */
        struct sockaddr_in peer;
        socklen_t pl = sizeof peer;
        int a = accept(l, (struct sockaddr *) &peer, &pl);
        CHECK(a >= 0 && peer.sin_addr.s_addr == htonl(0x7f000002));
        CHECK(accept(l, NULL, NULL) < 0 && errno == EAGAIN);
        /* The other was never answered: neither connected nor refused. */
        p = (struct pollfd) {.fd = out, .events = POLLOUT};
        CHECK(poll(&p, 1, 0) == 0);
        CHECK(getsockopt(out, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);
        if (a >= 0)
                close(a);
        close(in);
        close(out);
        close(l);
}

static void test_too_many(void) {
        struct inet_cidr many[FWD_FILTER_MAX_CIDRS + 1];
        int fd = bound("127.0.0.1", 7004, SOCK_DGRAM);

        for (size_t i = 0; i < FWD_FILTER_MAX_CIDRS + 1; i++) {
                char text[64];
                snprintf(text, sizeof text, "fd00:%zx::/127", i);
                many[i] = cidr(text);
        }
        /* The most of the longest kind fit the kernel's limit... */
        CHECK(fwd_filter_sources(fd, 6, many, FWD_FILTER_MAX_CIDRS) == 0);
        /* ...and one more is refused, not cut short. */
        CHECK(fwd_filter_sources(fd, 6, many, FWD_FILTER_MAX_CIDRS + 1) == -E2BIG);
        /* Only the family's count. */
        CHECK(fwd_filter_sources(fd, 4, many, FWD_FILTER_MAX_CIDRS + 1) == 0);
        close(fd);
}

int main(void) {
        int r = test_netns_enter();
        if (r < 0) {
                printf("%s: skipped, no network namespace of its own (%s)\n", __FILE__, strerror(-r));
                return 0;
        }
        TEST_RUN(test_udp_ipv4);
        TEST_RUN(test_udp_ipv6);
        TEST_RUN(test_tcp_listener);
        TEST_RUN(test_too_many);
        TEST_DONE();
}
