/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode's metric families (proxy/userspace/us-stats.c) from its
 * frontends' counters: the counts of frontends already gone are in the
 * totals (counters only grow), each family has its HELP and TYPE once,
 * labelled rows follow their family; and /debug/backend lists nothing for
 * a mode that serves nothing.
 */
#include <string.h>

#include "proxy/userspace/us-addrs.h"
#include "proxy/userspace/us-frontends.h"
#include "proxy/userspace/us-stats.h"
#include "test.h"
#include "util/buf.h"

static size_t count(const char *hay, const char *needle) {
        size_t n = 0;
        for (const char *p = hay; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

static void test_expose_counts_the_gone(void) {
        struct us_frontends f;
        struct buf out = BUF_INIT;

        us_frontends_init(&f, NULL, NULL, 1000, 1000);
        f.gone_tcp.accepted = 7;
        f.gone_tcp.bytes_to_endpoints = 1234;
        f.gone_udp.refused = 3;
        f.gone_udp.sessions = 5;
        us_stats_expose(&f, &out);
        buf_putc(&out, '\0');
        const char *t = out.data;
        CHECK(strstr(t, "\nkproxy_userspace_connections_total 7\n") != NULL);
        CHECK(strstr(t, "kproxy_userspace_bytes_total{direction=\"to_endpoints\",protocol=\"tcp\"} 1234\n") != NULL);
        CHECK(strstr(t, "kproxy_userspace_refused_total{protocol=\"udp\"} 3\n") != NULL);
        CHECK(strstr(t, "kproxy_userspace_udp_sessions_total 5\n") != NULL);
        CHECK(strstr(t, "kproxy_userspace_frontends 0\n") != NULL);
        /* One HELP and TYPE a family, before its rows. */
        CHECK(count(t, "# TYPE kproxy_userspace_bytes_total counter\n") == 1);
        CHECK(count(t, "# HELP kproxy_userspace_refused_total ") == 1);
        CHECK(strstr(t, "# TYPE kproxy_userspace_refused_total") < strstr(t, "kproxy_userspace_refused_total{"));
        buf_done(&out);
        us_frontends_done(&f);
}

static void test_describe_nothing(void) {
        struct us_frontends f;
        struct us_addrs a = {.held = HMAP_INIT, .svc = {HMAP_INIT, HMAP_INIT}};
        struct buf out = BUF_INIT;

        us_frontends_init(&f, NULL, NULL, 1000, 1000);
        us_stats_describe(&a, &f, &out);
        CHECK(out.len == 0);
        buf_done(&out);
        us_frontends_done(&f);
}

int main(void) {
        TEST_RUN(test_expose_counts_the_gone);
        TEST_RUN(test_describe_nothing);
        TEST_DONE();
}
