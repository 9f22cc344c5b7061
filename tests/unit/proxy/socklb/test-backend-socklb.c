/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket load balancing's backend (proxy/socklb/backend.c) against a fake
 * of its maps (sockbpf-fake.h), so without root or eBPF:
 *
 * - create attaches to the configured cgroup and makes the pin directory;
 * - a full sync writes, in one batch, an entry per service address with
 *   endpoints (a node port on each node address but loopback), none for a
 *   service without endpoints, and prunes what a previous run left;
 * - a partial sync writes only the changed service, and deletes what it
 *   no longer has;
 * - the kernel refusing a batch is an error and a count in its metrics;
 * - a UDP endpoint that leaves has the sockets connected to it closed by
 *   the reaper the sync kicks;
 * - render prints the plan, --cleanup unpins.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "config/config.h"
#include "ev/ev.h"
#include "host/host.h"
#include "host/render-params.h"
#include "model/model.h"
#include "proxy/backend.h"
#include "proxy/socklb/backend.h"
#include "render/render.h"
#include "sockbpf-fake.h"
#include "test.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "util/inet.h"

struct rig {
        struct kproxy_config cfg;
        struct host_facts host;
        struct inet_cidr hostaddr[2];
        struct render_params p;
        struct model *m;
        struct ev_loop *loop;
        struct backend *b;
        uint8_t family;
        char dir[64], pins[96];
};

static void no_changed(void *core, uint8_t family, const char *why) {
        (void) core, (void) family, (void) why;
}

static void rig_init(struct rig *r, bool with_loop) {
        memset(r, 0, sizeof *r);
        r->family = 4;
        config_init(&r->cfg);
        r->cfg.mode = PROXY_MODE_NFTABLES;
        r->cfg.socket_lb = true;
        strcpy(r->dir, "/tmp/kproxy-test-socklb-XXXXXX");
        CHECK(mkdtemp(r->dir) != NULL);
        snprintf(r->pins, sizeof r->pins, "%s/pins", r->dir);
        r->cfg.socket_lb_pin_dir = strdup(r->pins);
        r->cfg.socket_lb_cgroup = strdup("/sys/fs/cgroup/unified/test");
        /* The node's addresses as the host probe has them: each address
         * with its prefix. */
        CHECK(inet_cidr_parse("192.168.0.0/24", &r->hostaddr[0]) == 0);
        CHECK(inet_addr_parse("192.168.0.2", &r->hostaddr[0].addr) == 0);
        CHECK(inet_cidr_parse("127.0.0.0/8", &r->hostaddr[1]) == 0);
        CHECK(inet_addr_parse("127.0.0.1", &r->hostaddr[1].addr) == 0);
        r->host.addrs = r->hostaddr;
        r->host.n_addrs = 2;
        CHECK(render_params_init(&r->p, 4, &r->cfg, "node-1", NULL, &r->host, NULL) == 0);
        r->m = model_new();
        cluster_small(r->m, false);
        r->loop = with_loop ? ev_loop_new() : NULL;
        const struct backend_env env = {.loop = r->loop, .config = &r->cfg, .host = &r->host,
                                        .families = &r->family, .n_families = 1, .changed = no_changed, .core = r};
        CHECK(backend_socklb.create(&env, &r->b) == 0);
        CHECK(r->b && r->b->ops == &backend_socklb);
}

static void rig_done(struct rig *r) {
        r->b = backend_socklb.destroy(r->b);
        CHECK(fake.open_handles == 0);
        CHECK(backend_socklb.cleanup(&r->cfg, &r->host) == 0);
        CHECK_STREQ(fake.unpinned, r->pins);
        CHECK(rmdir(r->pins) == 0 && rmdir(r->dir) == 0);
        r->loop = ev_loop_free(r->loop);
        model_free(r->m);
        render_params_done(&r->p);
        config_done(&r->cfg);
}

static int rig_sync(struct rig *r, enum backend_sync_kind kind, const char *changed_key, struct backend_stats *st) {
        struct hmap changed = HMAP_INIT_STRINGS;
        if (changed_key)
                hmap_put(&changed, changed_key, (void *) changed_key);
        const struct backend_sync s = {.kind = kind, .model = r->m, .params = &r->p, .changed = &changed,
                                       .all_changed = !changed_key};
        int ret = backend_socklb.sync(r->b, r->family, &s, st);
        hmap_done(&changed);
        return ret;
}

static char *exposed(struct rig *r) {
        struct buf b = BUF_INIT;
        backend_socklb.expose(r->b, &b);
        buf_putc(&b, '\0');
        return b.data;
}

static bool exposes(struct rig *r, const char *line) {
        char *t = exposed(r);
        bool has = strstr(t, line) != NULL;
        free(t);
        return has;
}

static void test_create_attaches(void) {
        struct rig r;
        fake_reset();
        rig_init(&r, false);
        CHECK_STREQ(fake.attached, "/sys/fs/cgroup/unified/test");
        CHECK(access(r.pins, F_OK) == 0);
        CHECK(fake.open_handles == 1);
        rig_done(&r);
}

static void test_full_sync_writes_and_prunes(void) {
        struct rig r;
        struct backend_stats st;
        const struct sockbpf_addr ep = {.port = 8080};
        struct sockbpf_addr old = {.port = 80};

        fake_reset();
        /* A previous run's service, deleted while kproxy was stopped. */
        CHECK(inet_addr_parse("10.96.9.9", &old.ip) == 0);
        fake_apply(IPPROTO_TCP, &old, &ep, 1, 0);
        rig_init(&r, false);
        CHECK(rig_sync(&r, BACKEND_SYNC_FULL, NULL, &st) == 0 && !st.kernel_refused);
        CHECK(!fake.in_batch);
        CHECK(fake_find(IPPROTO_TCP, "10.96.9.9", 80) == NULL);

        const struct fake_service *a = fake_find(IPPROTO_TCP, "10.96.0.10", 80);
        CHECK(a && a->n_eps == 2 && a->affinity == 0);
        const struct fake_service *np = fake_find(IPPROTO_TCP, "192.168.0.2", 30001);
        CHECK(np && np->n_eps == 3);
        CHECK(fake_find(IPPROTO_TCP, "127.0.0.1", 30001) == NULL);     /* a pod's loopback is its own */
        CHECK(fake_find(IPPROTO_TCP, "0.0.0.0", 30001) == NULL);
        CHECK(fake_find(IPPROTO_TCP, "10.96.0.14", 80) == NULL);       /* svc-e: no endpoints */
        const struct fake_service *d = fake_find(IPPROTO_TCP, "10.96.0.13", 53);
        CHECK(d && d->affinity == 600);

        char line[64];
        snprintf(line, sizeof line, "kproxy_socket_lb_services %zu\n", fake.n_svc);
        CHECK(exposes(&r, line) && exposes(&r, "kproxy_socket_lb_updates_total 1\n"));
        CHECK(exposes(&r, "kproxy_socket_lb_translations_total 7\n"));

        /* The same again: a full sync rewrites what it plans, and no more. */
        size_t n = fake.n_svc;
        CHECK(rig_sync(&r, BACKEND_SYNC_FULL, NULL, &st) == 0 && fake.n_svc == n);
        rig_done(&r);
}

static void test_partial_sync_writes_the_changed_service(void) {
        struct rig r;
        struct backend_stats st;
        fake_reset();
        rig_init(&r, false);
        CHECK(rig_sync(&r, BACKEND_SYNC_FULL, NULL, &st) == 0);
        size_t n = fake.n_svc, w = fake.writes;

        cluster_endpoints(r.m, "svc-a", 1, 1);          /* svc-a down to one endpoint */
        CHECK(rig_sync(&r, BACKEND_SYNC_PARTIAL, "ns/svc-a", &st) == 0);
        CHECK(fake.writes == w + 1 && fake.n_svc == n);
        const struct fake_service *a = fake_find(IPPROTO_TCP, "10.96.0.10", 80);
        CHECK(a && a->n_eps == 1);

        CHECK(model_service_delete(r.m, "ns/svc-b") == 0);     /* its cluster IP and node port go */
        CHECK(rig_sync(&r, BACKEND_SYNC_PARTIAL, "ns/svc-b", &st) == 0);
        CHECK(fake.writes == w + 3 && fake.n_svc == n - 2);
        CHECK(!fake_find(IPPROTO_TCP, "10.96.0.11", 443) && !fake_find(IPPROTO_TCP, "192.168.0.2", 30001));
        rig_done(&r);
}

static void test_refused_batch_is_an_error(void) {
        struct rig r;
        struct backend_stats st;
        fake_reset();
        rig_init(&r, false);
        fake.fail_batch_end = -EIO;
        CHECK(rig_sync(&r, BACKEND_SYNC_FULL, NULL, &st) == -EIO && st.kernel_refused);
        CHECK(fake.n_svc == 0);
        CHECK(exposes(&r, "kproxy_socket_lb_update_errors_total 1\n"));
        CHECK(rig_sync(&r, BACKEND_SYNC_FULL, NULL, &st) == 0 && fake.n_svc > 0);
        CHECK(exposes(&r, "kproxy_socket_lb_update_errors_total 1\n") && exposes(&r, "updates_total 2\n"));
        rig_done(&r);
}

struct waiting {
        struct rig *r;
        int ticks;
};

/* Every millisecond, for at most 10 s: has the reaper closed a socket? */
static void poll_closed(struct ev_loop *l, void *userdata) {
        struct waiting *w = userdata;
        if (exposes(w->r, "kproxy_socket_lb_udp_sockets_closed_total 1\n") || ++w->ticks > 10000)
                ev_stop(l);
        else
                ev_timer_add(l, 1, poll_closed, w);
}

static void test_udp_endpoint_leaving_closes_its_sockets(void) {
        struct rig r;
        struct backend_stats st;
        fake_reset();
        rig_init(&r, true);
        const struct cluster_svc dns = {.name = "dns", .ip = "10.96.0.53", .port = 53, .udp = true};
        cluster_service(r.m, &dns);
        cluster_udp_endpoints(r.m, "dns", 7, 2);        /* 10.244.7.10, .11 */
        CHECK(rig_sync(&r, BACKEND_SYNC_FULL, NULL, &st) == 0);
        CHECK(fake_find(IPPROTO_UDP, "10.96.0.53", 53) != NULL);
        fake_add_socket(1, "10.244.7.10", 8080);        /* its endpoint stays */
        fake_add_socket(2, "10.244.7.11", 8080);        /* its endpoint leaves */

        cluster_udp_endpoints(r.m, "dns", 7, 1);
        CHECK(rig_sync(&r, BACKEND_SYNC_PARTIAL, "ns/dns", &st) == 0);
        struct waiting w = {&r, 0};
        ev_timer_add(r.loop, 1, poll_closed, &w);
        CHECK(ev_run(r.loop) == 0);
        CHECK(exposes(&r, "kproxy_socket_lb_udp_sockets_closed_total 1\n"));
        CHECK(!fake.sockets[0].closed && fake.sockets[1].closed);
        rig_done(&r);
}

static void test_render(void) {
        struct rig r;
        struct buf out = BUF_INIT;
        fake_reset();
        rig_init(&r, false);
        CHECK(backend_socklb.render(r.m, &r.p, NULL, 0, false, &out) == 0);
        buf_putc(&out, '\0');
        CHECK(strstr(out.data, "tcp 10.96.0.10:80 ns/svc-a:http internal -> 10.244.1.10:8080 10.244.1.11:8080\n"));
        CHECK(strstr(out.data, "tcp 0.0.0.0:30001 ns/svc-b:http external -> "));
        CHECK(fake.writes == 0);        /* render writes nothing */
        buf_done(&out);
        rig_done(&r);
}

int main(void) {
        TEST_RUN(test_create_attaches);
        TEST_RUN(test_full_sync_writes_and_prunes);
        TEST_RUN(test_partial_sync_writes_the_changed_service);
        TEST_RUN(test_refused_batch_is_an_error);
        TEST_RUN(test_udp_endpoint_leaving_closes_its_sockets);
        TEST_RUN(test_render);
        TEST_DONE();
}
