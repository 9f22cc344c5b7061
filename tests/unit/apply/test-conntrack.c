/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The stale-entry matcher of apply/conntrack.c on plain structs, no kernel:
 * which (original destination, reply source) pairs the reconciler deletes.
 * tests/netns/test-conntrack.sh checks the same rules against real
 * conntrack entries.
 */
#include <errno.h>
#include <stdbool.h>
#include <time.h>

#include "apply/conntrack.h"
#include "test.h"

/* The test hooks of apply/conntrack.c (deliberately not in conntrack.h). */
struct conntrack_index;
int conntrack_index_new(uint8_t family, const struct ct_frontend *frontends, size_t n,
                        struct conntrack_index **ret);
struct conntrack_index *conntrack_index_free(struct conntrack_index *x);
bool conntrack_index_is_stale(const struct conntrack_index *x, const struct inet_addr *orig_dst,
                              uint16_t orig_dport, const struct inet_addr *reply_src, uint16_t reply_sport);
bool conntrack_index_has_addr(const struct conntrack_index *x, const struct inet_addr *a);

static struct inet_addr ip(const char *s) {
        struct inet_addr a = {0};
        if (inet_addr_parse(s, &a) < 0)
                abort();
        return a;
}

/* is_stale with text addresses, for readable checks. */
static bool stale(const struct conntrack_index *x, const char *dst, uint16_t dport, const char *src,
                  uint16_t sport) {
        struct inet_addr d = ip(dst), s = ip(src);
        return conntrack_index_is_stale(x, &d, dport, &s, sport);
}

static void test_cluster_ip(void) {
        const struct ct_backend be[] = {
                {ip("10.244.1.5"), 5353},
                {ip("10.244.2.7"), 5353},
        };
        const struct ct_frontend fe[] = {
                {.ip = ip("10.96.0.10"), .port = 53, .backends = be, .n_backends = 2},
        };
        struct conntrack_index *x = NULL;

        CHECK(conntrack_index_new(4, fe, 1, &x) == 0 && x);
        /* DNAT-ed to a serving endpoint: a live flow, kept. */
        CHECK(!stale(x, "10.96.0.10", 53, "10.244.1.5", 5353));
        CHECK(!stale(x, "10.96.0.10", 53, "10.244.2.7", 5353));
        /* DNAT-ed to an endpoint that is gone. */
        CHECK(stale(x, "10.96.0.10", 53, "10.244.3.9", 5353));
        /* Right pod, old target port: the port is part of the backend. */
        CHECK(stale(x, "10.96.0.10", 53, "10.244.1.5", 53));
        /* Created while the service had no endpoint: not DNAT-ed at all. */
        CHECK(stale(x, "10.96.0.10", 53, "10.96.0.10", 53));
        /* Not a frontend: another port of the same IP, another IP, a
         * backend's own address reached directly. */
        CHECK(!stale(x, "10.96.0.10", 54, "10.244.9.9", 1));
        CHECK(!stale(x, "10.96.0.11", 53, "10.244.9.9", 1));
        CHECK(!stale(x, "10.244.1.5", 5353, "10.244.1.5", 5353));
        /* The other family never matches an IPv4 index. */
        CHECK(!stale(x, "::ffff:10.96.0.10", 53, "fd00::1", 5353));
        x = conntrack_index_free(x);
        CHECK(x == NULL);
}

/* Ports cross the API in host order: 53 is not 13568 (53 byte-swapped). */
static void test_port_byte_order(void) {
        const struct ct_backend be[] = {{ip("10.244.1.5"), 5353}};
        const struct ct_frontend fe[] = {{.ip = ip("10.96.0.10"), .port = 53, .backends = be, .n_backends = 1}};
        struct conntrack_index *x = NULL;

        CHECK(conntrack_index_new(4, fe, 1, &x) == 0);
        CHECK(!stale(x, "10.96.0.10", 13568, "10.244.9.9", 5353));
        CHECK(stale(x, "10.96.0.10", 53, "10.244.1.5", 6420));
        conntrack_index_free(x);
}

static void test_no_backends(void) {
        const struct ct_frontend fe[] = {{.ip = ip("10.96.0.10"), .port = 53}};
        struct conntrack_index *x = NULL;

        /* The header's contract: with no backend nothing is valid. (Upstream
         * skips such services; the caller does that by not passing them.) */
        CHECK(conntrack_index_new(4, fe, 1, &x) == 0);
        CHECK(stale(x, "10.96.0.10", 53, "10.244.1.5", 5353));
        CHECK(stale(x, "10.96.0.10", 53, "10.96.0.10", 53));
        conntrack_index_free(x);

        CHECK(conntrack_index_new(4, NULL, 0, &x) == 0);
        CHECK(!stale(x, "10.96.0.10", 53, "10.96.0.10", 53));
        conntrack_index_free(x);
}

static void test_node_port(void) {
        const struct ct_backend be[] = {{ip("10.244.1.5"), 5353}};
        const struct ct_frontend fe[] = {
                /* The address of a NodePort frontend is ignored, even when set. */
                {.ip = ip("192.0.2.1"), .port = 30053, .node_port = 1, .backends = be, .n_backends = 1},
        };
        struct conntrack_index *x = NULL;

        CHECK(conntrack_index_new(4, fe, 1, &x) == 0);
        CHECK(!stale(x, "172.18.0.2", 30053, "10.244.1.5", 5353));
        CHECK(!stale(x, "192.0.2.1", 30053, "10.244.1.5", 5353));
        CHECK(stale(x, "172.18.0.2", 30053, "10.244.3.9", 5353));
        CHECK(stale(x, "127.0.0.1", 30053, "127.0.0.1", 30053));
        CHECK(!stale(x, "172.18.0.2", 30054, "10.244.3.9", 5353));
        conntrack_index_free(x);
}

/* A service IP:port frontend decides for its own flows even when its port
 * is some other service's NodePort: the data path matches service IPs
 * before NodePorts. */
static void test_ip_frontend_before_node_port(void) {
        const struct ct_backend a[] = {{ip("10.244.1.5"), 5353}};
        const struct ct_backend b[] = {{ip("10.244.2.7"), 8053}};
        const struct ct_frontend fe[] = {
                {.ip = ip("10.96.0.10"), .port = 30053, .backends = a, .n_backends = 1},
                {.port = 30053, .node_port = 1, .backends = b, .n_backends = 1},
        };
        struct conntrack_index *x = NULL;

        CHECK(conntrack_index_new(4, fe, 2, &x) == 0);
        CHECK(!stale(x, "10.96.0.10", 30053, "10.244.1.5", 5353));
        CHECK(stale(x, "10.96.0.10", 30053, "10.244.2.7", 8053));
        CHECK(!stale(x, "172.18.0.2", 30053, "10.244.2.7", 8053));
        CHECK(stale(x, "172.18.0.2", 30053, "10.244.1.5", 5353));
        conntrack_index_free(x);
}

/* Two frontends with the same IP:port (say, a shared external IP) merge:
 * a backend of either is valid, whatever the order they come in. */
static void test_duplicate_frontends(void) {
        const struct ct_backend a[] = {{ip("10.244.1.5"), 5353}, {ip("10.244.1.5"), 5353}};
        const struct ct_backend b[] = {{ip("10.244.2.7"), 5353}};
        const struct ct_frontend fe[] = {
                {.ip = ip("203.0.113.7"), .port = 53, .backends = a, .n_backends = 2},
                {.ip = ip("203.0.113.7"), .port = 53, .backends = b, .n_backends = 1},
        };
        struct conntrack_index *x = NULL;

        CHECK(conntrack_index_new(4, fe, 2, &x) == 0);
        CHECK(!stale(x, "203.0.113.7", 53, "10.244.1.5", 5353));
        CHECK(!stale(x, "203.0.113.7", 53, "10.244.2.7", 5353));
        CHECK(stale(x, "203.0.113.7", 53, "10.244.3.9", 5353));
        conntrack_index_free(x);
}

static void test_ipv6_and_family_filter(void) {
        const struct ct_backend be[] = {
                {ip("fd00:10:244::5"), 5353},
                {ip("10.244.1.5"), 5353},       /* wrong family: can never be a reply source */
        };
        const struct ct_frontend fe[] = {
                {.ip = ip("fd00:10:96::a"), .port = 53, .backends = be, .n_backends = 2},
                {.ip = ip("10.96.0.10"), .port = 53, .backends = be + 1, .n_backends = 1},
        };
        struct conntrack_index *x = NULL;

        CHECK(conntrack_index_new(6, fe, 2, &x) == 0);
        CHECK(!stale(x, "fd00:10:96::a", 53, "fd00:10:244::5", 5353));
        CHECK(stale(x, "fd00:10:96::a", 53, "fd00:10:244::6", 5353));
        CHECK(stale(x, "fd00:10:96::a", 53, "fd00:10:96::a", 53));
        /* The IPv4 frontend is not part of an IPv6 index. */
        CHECK(!stale(x, "10.96.0.10", 53, "10.244.3.9", 5353));
        conntrack_index_free(x);

        CHECK(conntrack_index_new(5, fe, 2, &x) == -EINVAL);
        CHECK(conntrack_reconcile_udp(0, fe, 2) == -EINVAL);
}

/* conntrack_flush_unnatted()'s frontends: an address on any port, which
 * never stands for an IP:port frontend of the same address (or the other way
 * round). */
static bool has(const struct conntrack_index *x, const char *a) {
        struct inet_addr v = ip(a);
        return conntrack_index_has_addr(x, &v);
}

static void test_address_only(void) {
        const struct ct_frontend fe[] = {
                {.ip = ip("10.96.0.10"), .port = 80, .any_port = 1},
                {.ip = ip("fd00:10:96::a"), .any_port = 1},
                {.ip = ip("10.96.0.20"), .port = 80},
        };
        struct conntrack_index *x = NULL;

        CHECK(conntrack_index_new(4, fe, 3, &x) == 0);
        CHECK(has(x, "10.96.0.10"));
        CHECK(!has(x, "10.96.0.20"));   /* an IP:port frontend */
        CHECK(!has(x, "10.96.0.11"));
        CHECK(!has(x, "fd00:10:96::a"));        /* the other family's index */
        /* The address-only one is no IP:port frontend, on its port or any. */
        CHECK(!stale(x, "10.96.0.10", 80, "10.244.1.5", 8080));
        CHECK(!stale(x, "10.96.0.10", 0, "10.244.1.5", 8080));
        CHECK(stale(x, "10.96.0.20", 80, "10.244.1.5", 8080));
        conntrack_index_free(x);

        CHECK(conntrack_index_new(6, fe, 3, &x) == 0);
        CHECK(has(x, "fd00:10:96::a"));
        CHECK(!has(x, "10.96.0.10"));
        conntrack_index_free(x);
}

/* Thousands of UDP services: building and querying stays fast (a quadratic
 * matcher would take minutes here). */
static void test_scale(void) {
        enum { N = 20000, B = 3 };
        struct ct_frontend *fe = calloc(N, sizeof *fe);
        struct ct_backend *be = calloc((size_t) N * B, sizeof *be);
        struct conntrack_index *x = NULL;
        struct timespec t0, t1;
        size_t kept = 0, gone = 0;

        CHECK(fe && be);
        if (!fe || !be)
                goto out;
        for (size_t i = 0; i < N; i++) {
                fe[i].ip = (struct inet_addr) {.family = 4, .bytes = {10, 96, (uint8_t) (i >> 8), (uint8_t) i}};
                fe[i].port = (uint16_t) (53 + i % 7);
                fe[i].backends = be + i * B;
                fe[i].n_backends = B;
                for (size_t j = 0; j < B; j++)
                        be[i * B + j] = (struct ct_backend) {
                                {.family = 4, .bytes = {10, 244, (uint8_t) (i >> 8), (uint8_t) i}},
                                (uint16_t) (5000 + j)};
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK(conntrack_index_new(4, fe, N, &x) == 0);
        for (size_t i = 0; i < N; i++) {
                for (size_t j = 0; j <= B; j++) {
                        struct inet_addr src = be[i * B].ip;
                        if (conntrack_index_is_stale(x, &fe[i].ip, fe[i].port, &src, (uint16_t) (5000 + j)))
                                gone++;
                        else
                                kept++;
                }
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        CHECK(kept == (size_t) N * B);
        CHECK(gone == N);
        CHECK((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 2000);
        conntrack_index_free(x);
out:
        free(fe);
        free(be);
}

int main(void) {
        TEST_RUN(test_cluster_ip);
        TEST_RUN(test_port_byte_order);
        TEST_RUN(test_no_backends);
        TEST_RUN(test_node_port);
        TEST_RUN(test_ip_frontend_before_node_port);
        TEST_RUN(test_duplicate_frontends);
        TEST_RUN(test_ipv6_and_family_filter);
        TEST_RUN(test_address_only);
        TEST_RUN(test_scale);
        TEST_DONE();
}
