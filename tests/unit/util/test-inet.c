/* SPDX-License-Identifier: Apache-2.0 */
#include "util/inet.h"
#include "test.h"

static void test_parse_format(void) {
        struct inet_addr a;
        char s[INET_ADDR_STRLEN];

        CHECK(inet_addr_parse("10.180.0.1", &a) == 0 && a.family == 4);
        CHECK_STREQ(inet_addr_format(&a, s), "10.180.0.1");
        /* Leading zeros read as decimal, as Kubernetes' sloppy parser does. */
        CHECK(inet_addr_parse("010.001.000.001", &a) == 0);
        CHECK_STREQ(inet_addr_format(&a, s), "10.1.0.1");
        CHECK(inet_addr_parse("FD00:10:0::1", &a) == 0 && a.family == 6);
        CHECK_STREQ(inet_addr_format(&a, s), "fd00:10::1");
        CHECK(inet_addr_parse("256.0.0.1", &a) < 0);
        CHECK(inet_addr_parse("1.2.3", &a) < 0);
        CHECK(inet_addr_parse("1.2.3.4 ", &a) < 0);
        CHECK(inet_addr_parse("", &a) < 0);
        CHECK(inet_addr_parse("1.2.3.4; rm -rf /", &a) < 0);
        CHECK(inet_addr_parse("fe80::1%eth0", &a) < 0);
        CHECK(inet_addr_parse("0001.2.3.4", &a) < 0);
}

static void test_cidr(void) {
        struct inet_cidr c;
        struct inet_addr a;
        char s[INET_CIDR_STRLEN];

        CHECK(inet_cidr_parse(" 203.0.113.5/25 ", &c) == 0);
        CHECK_STREQ(inet_cidr_format(&c, s), "203.0.113.0/25");
        CHECK(inet_addr_parse("203.0.113.127", &a) == 0 && inet_cidr_contains(&c, &a));
        CHECK(inet_addr_parse("203.0.113.128", &a) == 0 && !inet_cidr_contains(&c, &a));
        CHECK(inet_cidr_parse("0.0.0.0/0", &c) == 0 && c.prefix == 0 && inet_cidr_contains(&c, &a));
        CHECK(inet_cidr_parse("fd00:10::/64", &c) == 0);
        CHECK(inet_addr_parse("fd00:10::5", &a) == 0 && inet_cidr_contains(&c, &a));
        CHECK(inet_addr_parse("10.0.0.1", &a) == 0 && !inet_cidr_contains(&c, &a));
        CHECK(inet_cidr_parse("10.0.0.0/33", &c) < 0);
        CHECK(inet_cidr_parse("10.0.0.0", &c) < 0);
        CHECK(inet_cidr_parse("10.0.0.0/", &c) < 0);
        CHECK(inet_cidr_parse("10.0.0.0/8x", &c) < 0);
        CHECK(inet_addr_parse("127.0.0.53", &a) == 0 && inet_addr_is_loopback(&a));
        CHECK(inet_addr_parse("::1", &a) == 0 && inet_addr_is_loopback(&a));
}

static void test_addr_in(void) {
        struct inet_addr v[2], a;

        CHECK(inet_addr_parse("10.0.0.1", &v[0]) == 0 && inet_addr_parse("fd00::1", &v[1]) == 0);
        CHECK(inet_addr_parse("fd00::1", &a) == 0 && inet_addr_in(&a, v, 2) && !inet_addr_in(&a, v, 1));
        /* The same bytes in the other family are another address. */
        CHECK(inet_addr_parse("10.0.0.1", &a) == 0 && inet_addr_in(&a, v, 2));
        a.family = 6;
        CHECK(!inet_addr_in(&a, v, 2));
        CHECK(!inet_addr_in(&a, NULL, 0));
}

int main(void) {
        TEST_RUN(test_parse_format);
        TEST_RUN(test_cidr);
        TEST_RUN(test_addr_in);
        TEST_DONE();
}
