/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode's endpoint choice (userspace/pick.c):
 *  - equal chances: 60,000 picks over 3 endpoints land within 5 standard
 *    deviations of 20,000 each; a retry never returns the failed endpoint;
 *  - ClientIP affinity: a client keeps its endpoint while it comes back
 *    within the timeout of its last connection, picks afresh after it, or
 *    when its endpoint leaves the list or failed; without affinity
 *    nothing is remembered;
 *  - a table shared by two pickers (a service's cluster IP and node
 *    port): a client keeps its endpoint through either, where that
 *    endpoint is in the picker's list;
 *  - no endpoint: -ENOENT; a client flood is swept once entries expire.
 */
#include "userspace/pick.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test.h"
#include "util/inet.h"

static struct fwd_addr ep(const char *ip, unsigned port) {
        struct fwd_addr a = {.port = (uint16_t) port};
        CHECK(inet_addr_parse(ip, &a.ip) == 0);
        return a;
}

static struct inet_addr ip(const char *s) {
        struct inet_addr a;
        CHECK(inet_addr_parse(s, &a) == 0);
        return a;
}

static void test_equal_chances_and_retries(void) {
        const struct fwd_addr eps[3] = {ep("10.0.0.1", 80), ep("10.0.0.2", 80), ep("10.0.0.3", 80)};
        struct picker *p = picker_new();
        unsigned hits[3] = {0};
        const unsigned n = 60000;
        struct fwd_addr got;

        picker_seed(12345);
        CHECK(p);
        CHECK(picker_pick(p, NULL, NULL, 0, &got) == -ENOENT);
        CHECK(picker_set(p, eps, 3, 0, NULL) == 0);
        for (unsigned i = 0; i < n; i++) {
                CHECK(picker_pick(p, NULL, NULL, 0, &got) == 0);
                for (int k = 0; k < 3; k++)
                        hits[k] += fwd_addr_equal(&got, &eps[k]);
        }
        double mean = n / 3.0, sd = sqrt(n * (1 / 3.0) * (2 / 3.0));
        for (int k = 0; k < 3; k++)
                CHECK(fabs(hits[k] - mean) < 5 * sd);
        CHECK(hits[0] + hits[1] + hits[2] == n);
        /* A retry goes to one of the others, each about half the time. */
        unsigned other[3] = {0};
        for (unsigned i = 0; i < 2000; i++) {
                CHECK(picker_pick(p, NULL, &eps[1], 0, &got) == 0);
                CHECK(!fwd_addr_equal(&got, &eps[1]));
                for (int k = 0; k < 3; k++)
                        other[k] += fwd_addr_equal(&got, &eps[k]);
        }
        CHECK(other[0] > 800 && other[2] > 800);
        /* One endpoint, and it failed: none left. */
        CHECK(picker_set(p, eps, 1, 0, NULL) == 0);
        CHECK(picker_pick(p, NULL, &eps[0], 0, &got) == -ENOENT);
        CHECK(picker_n_clients(p) == 0);
        picker_free(p);
}

static void test_affinity(void) {
        const struct fwd_addr eps[3] = {ep("10.0.0.1", 80), ep("10.0.0.2", 80), ep("10.0.0.3", 80)};
        struct picker *p = picker_new();
        struct inet_addr c1 = ip("192.168.0.1"), c2 = ip("fd00::2");
        struct fwd_addr first, got;
        bool moved = false;

        CHECK(picker_set(p, eps, 3, 10, NULL) == 0);
        CHECK(picker_pick(p, &c1, NULL, 1000, &first) == 0);
        /* Within 10 s of the last connection, each time: the same endpoint,
         * even 50 s after the first. */
        for (uint64_t t = 2000; t <= 51000; t += 7000) {
                CHECK(picker_pick(p, &c1, NULL, t, &got) == 0);
                CHECK(fwd_addr_equal(&got, &first));
        }
        CHECK(picker_pick(p, &c2, NULL, 51000, &got) == 0);
        CHECK(picker_n_clients(p) == 2);
        /* More than 10 s later the choice is fresh: over 40 expiries, it
         * moves at least once (a 3^-40 chance of a false failure). */
        uint64_t t = 51000;
        for (int i = 0; i < 40 && !moved; i++) {
                t += 10001;
                CHECK(picker_pick(p, &c1, NULL, t, &got) == 0);
                moved = !fwd_addr_equal(&got, &first);
                first = got;
        }
        CHECK(moved);
        /* Its endpoint failed: another, and that one sticks. */
        struct fwd_addr failed = got;
        CHECK(picker_pick(p, &c1, &failed, t + 1, &got) == 0);
        CHECK(!fwd_addr_equal(&got, &failed));
        first = got;
        CHECK(picker_pick(p, &c1, NULL, t + 2, &got) == 0);
        CHECK(fwd_addr_equal(&got, &first));
        /* Its endpoint left the list: a remaining one. */
        struct fwd_addr rest[2];
        size_t n = 0;
        for (int k = 0; k < 3; k++)
                if (!fwd_addr_equal(&eps[k], &first))
                        rest[n++] = eps[k];
        CHECK(picker_set(p, rest, 2, 10, NULL) == 0);
        CHECK(picker_pick(p, &c1, NULL, t + 3, &got) == 0);
        CHECK(!fwd_addr_equal(&got, &first));
        /* Affinity off: forgotten. */
        CHECK(picker_set(p, rest, 2, 0, NULL) == 0);
        CHECK(picker_n_clients(p) == 0);
        CHECK(picker_pick(p, &c1, NULL, t + 4, &got) == 0);
        CHECK(picker_n_clients(p) == 0);
        picker_free(p);
}

static void test_client_flood_is_swept(void) {
        const struct fwd_addr eps[1] = {ep("10.0.0.1", 80)};
        struct picker *p = picker_new();
        struct fwd_addr got;
        char s[32];

        CHECK(picker_set(p, eps, 1, 1, NULL) == 0);
        for (unsigned i = 0; i < 10000; i++) {
                struct inet_addr c;
                snprintf(s, sizeof s, "10.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
                c = ip(s);
                /* A new client each 1 ms: at most ~1000 within a timeout. */
                CHECK(picker_pick(p, &c, NULL, i, &got) == 0);
        }
        CHECK(picker_n_clients(p) < 2 * 1000 + 64 + 1);
        picker_free(p);
        CHECK(picker_free(NULL) == NULL);
}

static void test_shared_affinity(void) {
        const struct fwd_addr eps[3] = {ep("10.0.0.1", 80), ep("10.0.0.2", 80), ep("10.0.0.3", 80)};
        struct affinity *aff = affinity_new();
        struct picker *cluster = picker_new(), *nodeport = picker_new(), *local = picker_new();
        struct inet_addr c = ip("192.168.0.7");
        struct fwd_addr first, got;

        CHECK(aff && cluster && nodeport && local);
        CHECK(picker_set(cluster, eps, 3, 10, aff) == 0);
        CHECK(picker_set(nodeport, eps, 3, 10, aff) == 0);
        CHECK(picker_set(local, &eps[2], 1, 10, aff) == 0);        /* policy Local: only .3 here */
        aff = affinity_unref(aff);                                 /* the pickers hold it */
        CHECK(picker_pick(cluster, &c, NULL, 1000, &first) == 0);
        for (int i = 0; i < 20; i++) {
                CHECK(picker_pick(i % 2 ? cluster : nodeport, &c, NULL, 1000 + (uint64_t) i, &got) == 0);
                CHECK(fwd_addr_equal(&got, &first));
        }
        CHECK(picker_n_clients(nodeport) == 1 && picker_n_clients(cluster) == 1);
        /* Through the Local picker it gets .3, which it keeps everywhere. */
        CHECK(picker_pick(local, &c, NULL, 2000, &got) == 0);
        CHECK(fwd_addr_equal(&got, &eps[2]));
        CHECK(picker_pick(cluster, &c, NULL, 2001, &got) == 0);
        CHECK(fwd_addr_equal(&got, &eps[2]));
        picker_free(cluster);
        picker_free(nodeport);
        CHECK(picker_n_clients(local) == 1);
        picker_free(local);
        CHECK(affinity_unref(NULL) == NULL);
}

int main(void) {
        TEST_RUN(test_equal_chances_and_retries);
        TEST_RUN(test_affinity);
        TEST_RUN(test_client_flood_is_swept);
        TEST_RUN(test_shared_affinity);
        TEST_DONE();
}
