/* SPDX-License-Identifier: Apache-2.0 */
/*
 * userspace/synrecv.c against the kernel, over loopback in both families:
 * a handshake held half-way (tcp-held.h) is listed under its listener's
 * address and port, and under a wildcard of that port, not under another
 * port or address; released, it completes, is accepted, and is listed no
 * more. The waits are for states the kernel reports, with a deadline.
 */
#include "userspace/synrecv.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tcp-held.h"
#include "test.h"
#include "userspace/fwd-addr.h"
#include "util/inet.h"

#define DEADLINE_MS 10000       /* a SYN-ACK is retransmitted after 1 s, 3 s, 7 s */

static uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

/* Waits (polling the kernel) until a is listed or not, as want says. */
static bool wait_listed(const struct fwd_addr *a, bool want) {
        for (uint64_t end = now_ms() + DEADLINE_MS; now_ms() < end; poll(NULL, 0, 5))
                if (tcp_held_listed(a) == want)
                        return true;
        return false;
}

static void held_handshake(int family) {
        const char *lo = family == 6 ? "::1" : "127.0.0.1";
        struct fwd_addr a = {0}, other = {0}, any = {0};
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int lfd, c, s;

        CHECK(inet_addr_parse(lo, &a.ip) == 0);
        CHECK(fwd_addr_to_sockaddr(&a, &ss, &len) == 0);
        lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(lfd >= 0);
        CHECK(bind(lfd, (struct sockaddr *) &ss, len) == 0);
        CHECK(listen(lfd, 16) == 0);
        len = sizeof ss;
        CHECK(getsockname(lfd, (struct sockaddr *) &ss, &len) == 0);
        CHECK(fwd_addr_from_sockaddr((struct sockaddr *) &ss, len, &a) == 0);
        CHECK(!tcp_held_listed(&a));

        c = tcp_held_connect(&a);
        CHECK(wait_listed(&a, true));
        any.ip.family = (uint8_t) family;
        any.port = a.port;
        CHECK(tcp_held_listed(&any));
        other = a;
        other.port = a.port == 65535 ? 1 : (uint16_t) (a.port + 1);
        CHECK(!tcp_held_listed(&other));
        other = a;
        CHECK(inet_addr_parse(family == 6 ? "::2" : "127.0.0.2", &other.ip) == 0);
        CHECK(!tcp_held_listed(&other));
        CHECK(tcp_held_state(c, NULL) == TCP_SYN_SENT);

        tcp_held_release(c);
        s = accept(lfd, NULL, NULL);            /* at the next SYN-ACK */
        CHECK(s >= 0);
        CHECK(tcp_held_state(c, NULL) == TCP_ESTABLISHED);
        CHECK(!tcp_held_listed(&a));
        close(s);
        close(c);
        close(lfd);
}

static void test_held_handshake_ipv4(void) {
        held_handshake(4);
}

static void test_held_handshake_ipv6(void) {
        held_handshake(6);
}

static void test_free_null(void) {
        CHECK(synrecv_free(NULL) == NULL);
}

int main(void) {
        alarm(60);
        TEST_RUN(test_held_handshake_ipv4);
        TEST_RUN(test_held_handshake_ipv6);
        TEST_RUN(test_free_null);
        TEST_DONE();
}
