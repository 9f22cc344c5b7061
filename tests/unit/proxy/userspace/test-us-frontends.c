/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode's frontends (proxy/userspace/us-frontends.c) on
 * loopback, without root: the plan's frontends are opened; a sync that no
 * longer wants one retires it, a partial sync only among its services; two
 * services claiming one address and port leave it to the first in key
 * order; the stop's listeners refuse SYNs and close once no handshake is
 * under way; sockets are counted and listed for a hand-over.
 */
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "ev/ev.h"
#include "kube/decode.h"
#include "model/model.h"
#include "proxy/userspace/us-frontends.h"
#include "test.h"
#include "userspace/plan.h"
#include "util/hmap.h"
#include "util/inet.h"

static struct fwd_addr ep;

static struct userspace_frontend want(int proto, const char *svc) {
        struct userspace_frontend w = {.proto = proto, .svc_key = svc, .port_name = "p", .eps = &ep, .n_eps = 1};
        inet_addr_parse("127.0.0.1", &w.addr.ip);
        snprintf(w.key, sizeof w.key, "%s 127.0.0.1:0", proto == IPPROTO_TCP ? "tcp" : "udp");
        return w;
}

static size_t open_sockets(const struct us_frontends *f) {
        int fds[8];
        return us_frontends_sockets(f, fds, 8);
}

static void test_want_retire_stop(void) {
        struct ev_loop *l = ev_loop_new();
        struct model *m = model_new();
        struct us_frontends f;
        struct userspace_frontend tcp = want(IPPROTO_TCP, "ns/a"), udp = want(IPPROTO_UDP, "ns/b");
        struct fwd_tcp_stats t;
        struct fwd_udp_stats u;
        size_t n_fe;

        inet_addr_parse("127.0.0.2", &ep.ip);
        ep.port = 8080;
        us_frontends_init(&f, l, NULL, 1000, 1000);

        us_frontends_begin(&f);
        CHECK(us_frontends_want(&f, m, NULL, 4, &tcp, true) == 0);
        CHECK(us_frontends_want(&f, m, NULL, 4, &udp, true) == 0);
        us_frontends_end(&f, 4, NULL);
        CHECK(f.by_key.len == 2 && open_sockets(&f) == 2);
        us_frontends_totals(&f, &t, &u, &n_fe);
        CHECK(n_fe == 2 && t.accepted == 0);

        /* A partial sync of another service leaves both alone. */
        struct hmap only = HMAP_INIT;
        hmap_put(&only, "ns/zzz", "");
        us_frontends_begin(&f);
        us_frontends_end(&f, 4, &only);
        CHECK(f.by_key.len == 2);
        /* A full sync that wants the TCP one only: the UDP one goes. */
        us_frontends_begin(&f);
        CHECK(us_frontends_want(&f, m, NULL, 4, &tcp, false) == 0);
        us_frontends_end(&f, 4, NULL);
        CHECK(f.by_key.len == 1 && open_sockets(&f) == 1);
        /* Another family's sync leaves IPv4's alone. */
        us_frontends_begin(&f);
        us_frontends_end(&f, 6, NULL);
        CHECK(f.by_key.len == 1);

        /* The stop: the listener refuses SYNs, and with no handshake under
         * way it closes at once. */
        us_frontends_stop(&f);
        CHECK(f.stopping && f.listening == 0 && open_sockets(&f) == 0);

        hmap_done(&only);
        us_frontends_done(&f);
        model_free(m);
        ev_loop_free(l);
}

/* Two services claim one address and port: a partial sync of the later
 * one (in key order) leaves it with the earlier one, while that one is in
 * the model. */
static void test_first_in_key_order_keeps_it(void) {
        struct ev_loop *l = ev_loop_new();
        struct model *m = model_new();
        struct us_frontends f;
        struct userspace_frontend a = want(IPPROTO_TCP, "ns/a"), b = want(IPPROTO_TCP, "ns/b");
        struct hmap only = HMAP_INIT;
        char err[KUBE_ERRLEN];

        json_t *svc = json_pack("{s:{s:s, s:s}, s:{s:s, s:[{s:i}]}}", "metadata", "name", "a", "namespace", "ns",
                                "spec", "clusterIP", "10.96.0.1", "ports", "port", 80);
        struct svc *s = NULL;
        CHECK(kube_decode_service(svc, &s, err) == 0);
        model_service_upsert(m, s);
        json_decref(svc);

        inet_addr_parse("127.0.0.2", &ep.ip);
        us_frontends_init(&f, l, NULL, 1000, 1000);
        us_frontends_begin(&f);
        CHECK(us_frontends_want(&f, m, NULL, 4, &a, true) == 0);
        hmap_put(&only, "ns/b", "");
        us_frontends_begin(&f);
        CHECK(us_frontends_want(&f, m, &only, 4, &b, false) == 0);
        us_frontends_end(&f, 4, &only);
        const struct us_frontend *fe = hmap_get(&f.by_key, a.key);
        CHECK(fe && strcmp(fe->svc_key, "ns/a") == 0);

        hmap_done(&only);
        us_frontends_done(&f);
        model_free(m);
        ev_loop_free(l);
}

int main(void) {
        TEST_RUN(test_want_retire_stop);
        TEST_RUN(test_first_in_key_order_keeps_it);
        TEST_DONE();
}
