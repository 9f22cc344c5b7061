/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The connection book (http/mhd-conns.c) on its own, with a clock passed by
 * hand: the limits per client and per server, which connection makes room,
 * and the deadlines of idle connections.
 */
#include "http/mhd-conns.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "test.h"

/* ---- the book ---- */

static struct sockaddr_storage sa(const char *ip) {
        struct sockaddr_storage ss = {0};

        if (strchr(ip, ':')) {
                struct sockaddr_in6 *s6 = (struct sockaddr_in6 *) &ss;
                s6->sin6_family = AF_INET6;
                CHECK(inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1);
        } else {
                struct sockaddr_in *s4 = (struct sockaddr_in *) &ss;
                s4->sin_family = AF_INET;
                CHECK(inet_pton(AF_INET, ip, &s4->sin_addr) == 1);
        }
        return ss;
}

static struct mhd_conn *add(struct mhd_conns *set, int fd, const char *ip, uint64_t now) {
        struct sockaddr_storage ss = sa(ip);
        struct mhd_conn *c = mhd_conns_add(set, fd, (struct sockaddr *) &ss, now);

        CHECK(c && mhd_conn_fd(c) == fd);
        return c;
}

static struct mhd_conn *victim(const struct mhd_conns *set, const char *ip) {
        struct sockaddr_storage ss = sa(ip);
        return mhd_conns_victim(set, (struct sockaddr *) &ss);
}

static void test_book_limits(void) {
        struct mhd_conns *set = mhd_conns_new(3, 2, 100);
        struct mhd_conn *a0, *a1, *b0, *c0, *c1;

        CHECK(!victim(set, "10.0.0.1"));
        a0 = add(set, 10, "10.0.0.1", 0);
        a1 = add(set, 11, "::ffff:10.0.0.1", 1);       /* the same client, through a dual-stack socket */
        CHECK(mhd_conns_held(set) == 2);
        CHECK(victim(set, "10.0.0.1") == a0);           /* its share is full: its longest waiting */
        CHECK(victim(set, "::ffff:10.0.0.1") == a0);
        mhd_conns_busy(a0, 5);
        CHECK(victim(set, "10.0.0.1") == a1);           /* idle before busy */
        CHECK(!victim(set, "10.0.0.2"));                /* another client, and the server has room */
        b0 = add(set, 12, "10.0.0.2", 2);
        CHECK(mhd_conns_held(set) == 3);
        CHECK(victim(set, "2001:db8::1") == a1);        /* the server is full: the longest waiting idle one */
        mhd_conns_closing(a1);
        CHECK(mhd_conns_held(set) == 2);                /* closing holds no slot */
        mhd_conns_idle(a1, 50);                         /* and stays closing */
        mhd_conns_busy(a1, 50);
        CHECK(mhd_conns_held(set) == 2);
        CHECK(!victim(set, "2001:db8::1"));
        c0 = add(set, 13, "2001:db8::1", 3);
        /* An IPv6 client is its /64. */
        CHECK(victim(set, "2001:db8::2") == b0);        /* c's share has room; the server's longest idle */
        mhd_conns_busy(b0, 6);
        mhd_conns_busy(c0, 7);
        CHECK(victim(set, "2001:db8:0:1::1") == a0);    /* everyone busy: the longest busy (a0, since 5) */
        mhd_conns_remove(a1);
        mhd_conns_remove(a0);
        CHECK(mhd_conns_held(set) == 2);
        CHECK(!victim(set, "2001:db8::2"));             /* c holds one of two */
        c1 = add(set, 14, "2001:db8::ffff", 8);
        CHECK(victim(set, "2001:db8::3") == c1);        /* now two: c's own, the idle one before c0 */
        mhd_conns_busy(c1, 9);
        CHECK(victim(set, "2001:db8::3") == c0);        /* both busy: c's longest */
        CHECK(!mhd_conns_free(set));                    /* with records still in it */
}

static void test_book_deadlines(void) {
        struct mhd_conns *set = mhd_conns_new(4, 0, 100);
        struct mhd_conn *x, *y;
        uint64_t due = 0;

        CHECK(!mhd_conns_deadline(set, &due));
        CHECK(!mhd_conns_expired(set, UINT64_MAX));
        CHECK(!mhd_conns_oldest(set));
        x = add(set, 20, "192.0.2.1", 1000);
        y = add(set, 21, "192.0.2.1", 1010);
        CHECK(mhd_conns_deadline(set, &due) && due == 1100);
        CHECK(mhd_conns_oldest(set) == x);
        CHECK(!mhd_conns_expired(set, 1099));
        CHECK(mhd_conns_expired(set, 1100) == x);
        mhd_conns_busy(x, 1050);                        /* a request: no longer waiting */
        CHECK(mhd_conns_deadline(set, &due) && due == 1110);
        CHECK(!mhd_conns_expired(set, 1100));
        mhd_conns_idle(x, 1080);                        /* answered: waits again, from now */
        CHECK(mhd_conns_oldest(set) == y);
        mhd_conns_closing(y);
        CHECK(mhd_conns_deadline(set, &due) && due == 1180);
        CHECK(mhd_conns_expired(set, 5000) == x);
        /* per_client 0: the whole server's share. */
        add(set, 22, "192.0.2.1", 1100);
        add(set, 23, "192.0.2.1", 1101);
        CHECK(!victim(set, "192.0.2.1"));
        add(set, 24, "192.0.2.1", 1102);
        CHECK(victim(set, "192.0.2.1") == x);
        mhd_conns_remove(y);
        mhd_conns_free(set);
        CHECK(!mhd_conns_free(NULL));
}

int main(void) {
        TEST_RUN(test_book_limits);
        TEST_RUN(test_book_deadlines);
        TEST_DONE();
}
