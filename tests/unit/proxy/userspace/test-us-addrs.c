/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode's service addresses (proxy/userspace/us-addrs.c) on a
 * kube-proxy0 of a network namespace of the test's own (no root needed:
 * tests/unit/netns.h): an address two services want stays until both let
 * go of it; what the interface held before (a predecessor's, someone
 * else's) is read as wanted by nobody and pruned unless a service takes
 * it; a full sync's forget() lets go of everything; a deleted interface
 * is seen, and made again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "netns.h"
#include "proxy/userspace/us-addrs.h"
#include "test.h"
#include "userspace/plan.h"
#include "util/buf.h"
#include "util/inet.h"

/* kube-proxy0 holds want: `ip -4 -o addr`'s addresses, one a line. */
static void check_link(const char *want) {
        char *have = test_cmd_output("ip -4 -o addr show dev " US_LINK " 2>/dev/null | awk '{print $4}'");
        CHECK_STREQ(have, want);
        free(have);
}

static int cmp_lines(const void *x, const void *y) {
        return strcmp(*(char *const *) x, *(char *const *) y);
}

/* The description's lines, sorted (it lists them in no order), are want's. */
static void check_described(const struct us_addrs *a, const char *want) {
        struct buf b = BUF_INIT, sorted = BUF_INIT;
        char *line[8], *save = NULL;
        size_t n = 0;
        us_addrs_describe(a, &b);
        buf_putc(&b, '\0');
        for (char *l = strtok_r(b.data, "\n", &save); l && n < 8; l = strtok_r(NULL, "\n", &save))
                line[n++] = l;
        qsort(line, n, sizeof *line, cmp_lines);
        for (size_t i = 0; i < n; i++)
                buf_printf(&sorted, "%s\n", line[i]);
        buf_putc(&sorted, '\0');
        CHECK_STREQ(sorted.data, want);
        buf_done(&b);
        buf_done(&sorted);
}

/* A plan of n (address, service) pairs, sorted as plans are. */
static struct userspace_plan plan_of(struct userspace_addr *v, size_t n, const char *const pairs[][2]) {
        for (size_t i = 0; i < n; i++) {
                memset(&v[i], 0, sizeof v[i]);
                CHECK(inet_addr_parse(pairs[i][0], &v[i].a) == 0);
                v[i].svc_key = pairs[i][1];
        }
        return (struct userspace_plan) {.addrs = v, .n_addrs = n};
}

static void test_shared_address_stays_until_both_let_go(void) {
        struct us_addrs a;
        struct userspace_addr v[3];
        const char *const pairs[][2] = {{"10.96.0.10", "ns/a"}, {"10.96.0.10", "ns/b"}, {"192.0.2.5", "ns/b"}};
        struct userspace_plan pl = plan_of(v, 3, pairs);

        CHECK(us_addrs_init(&a) == 0);
        CHECK(!us_addrs_link_present(&a));
        CHECK(us_addrs_link_ensure(&a) == 0 && us_addrs_link_present(&a));
        CHECK(us_addrs_read(&a, 4) == 0);
        CHECK(us_addrs_take(&a, 4, &pl) == 0);
        CHECK(us_addrs_prune(&a, 4) == 0);
        check_link("10.96.0.10/32\n192.0.2.5/32\n");
        check_described(&a, "address 10.96.0.10\naddress 192.0.2.5\n");

        /* b is synced alone and now wants nothing. */
        us_addrs_drop(&a, 4, "ns/b");
        CHECK(us_addrs_prune(&a, 4) == 0);
        check_link("10.96.0.10/32\n");
        us_addrs_drop(&a, 4, "ns/b");           /* twice: nothing more to let go of */
        us_addrs_drop(&a, 4, "ns/a");
        CHECK(us_addrs_prune(&a, 4) == 0);
        check_link("");
        check_described(&a, "");
        us_addrs_done(&a);
}

static void test_read_then_full_sync(void) {
        struct us_addrs a;
        struct userspace_addr v[1];
        const char *const pairs[][2] = {{"10.96.0.11", "ns/a"}};
        struct userspace_plan pl = plan_of(v, 1, pairs);

        CHECK(us_addrs_init(&a) == 0);
        CHECK(us_addrs_link_ensure(&a) == 0);
        /* A predecessor's two addresses: one still wanted, one not. */
        CHECK(system("ip addr add 10.96.0.11/32 dev " US_LINK) == 0);
        CHECK(system("ip addr add 10.96.0.77/32 dev " US_LINK) == 0);
        CHECK(us_addrs_read(&a, 4) == 0);
        check_described(&a, "address 10.96.0.11\naddress 10.96.0.77\n");
        CHECK(us_addrs_take(&a, 4, &pl) == 0);  /* already there: not added twice */
        CHECK(us_addrs_prune(&a, 4) == 0);
        check_link("10.96.0.11/32\n");

        /* A full sync that plans nothing lets go of everything. */
        us_addrs_forget(&a, 4);
        CHECK(us_addrs_prune(&a, 4) == 0);
        check_link("");

        /* Someone deletes the interface: seen; made again, it takes addresses. */
        CHECK(system("ip link del " US_LINK) == 0);
        CHECK(!us_addrs_link_present(&a));
        CHECK(us_addrs_take(&a, 4, &pl) < 0);   /* no interface to add to */
        CHECK(us_addrs_link_ensure(&a) == 0 && us_addrs_link_present(&a));
        us_addrs_forget(&a, 4);
        CHECK(us_addrs_take(&a, 4, &pl) == 0);
        check_link("10.96.0.11/32\n");
        us_addrs_done(&a);
        CHECK(system("ip link del " US_LINK) == 0);
}

int main(void) {
        int r = test_netns_enter();
        if (r < 0) {
                printf("test-us-addrs: skipped, no network namespace of its own (%s)\n", strerror(-r));
                return 0;
        }
        TEST_RUN(test_shared_address_stays_until_both_let_go);
        TEST_RUN(test_read_then_full_sync);
        TEST_DONE();
}
