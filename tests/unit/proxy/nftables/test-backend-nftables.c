/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nftables mode's backend (proxy/nftables/backend.c) as the sync loop
 * drives it, on the kernel of a network namespace of the test's own (no
 * root needed: tests/unit/netns.h):
 *
 * - a full sync writes the table, with upstream's names, and the tally of
 *   Local policies without a local endpoint; a partial sync adds the one
 *   changed service; a resync rewrites nothing;
 * - another process changing kproxy's table reaches the core through
 *   env->changed() from the change monitor, and a deleted table through
 *   the periodic check as well;
 * - leftovers are the tables when the mode is not running, and removing
 *   them (or --cleanup) deletes them;
 * - render gives the text and, asked for netlink, a batch.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply/nftables.h"
#include "cluster.h"
#include "cmd.h"
#include "config/config.h"
#include "ev/ev.h"
#include "host/host.h"
#include "host/render-params.h"
#include "model/model.h"
#include "netns.h"
#include "proxy/backend.h"
#include "proxy/backends.h"
#include "render/render.h"
#include "test.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "util/inet.h"

struct rig {
        struct kproxy_config cfg;
        struct host_facts host;
        struct inet_cidr hostaddr;
        struct render_params p;
        struct model *m;
        struct ev_loop *loop;
        const struct backend_ops *ops;
        struct backend *b;
        uint8_t family;
        int n_changed;
        uint8_t changed_family;
        char why[200];
};

/* env->changed, as the core hears it: the loop stops to let the test look. */
static void on_changed(void *core, uint8_t family, const char *why) {
        struct rig *r = core;
        r->n_changed++;
        r->changed_family = family;
        snprintf(r->why, sizeof r->why, "%s", why);
        ev_stop(r->loop);
}

static void on_timeout(struct ev_loop *l, void *userdata) {
        (void) userdata;
        ev_stop(l);
}

/* Runs the loop until the backend reports a change (or 10 s pass). */
static void wait_changed(struct rig *r) {
        struct ev_timer *t = ev_timer_add(r->loop, 10000, on_timeout, NULL);
        CHECK(ev_run(r->loop) == 0);
        if (r->n_changed > 0)   /* stopped by the change: the timeout is still armed */
                ev_timer_cancel(r->loop, t);
}

static void rig_init(struct rig *r) {
        memset(r, 0, sizeof *r);
        r->family = 4;
        config_init(&r->cfg);
        r->cfg.mode = PROXY_MODE_NFTABLES;
        r->cfg.cluster_cidr = strdup("10.244.0.0/16");
        CHECK(inet_cidr_parse("192.168.0.2/24", &r->hostaddr) == 0);
        r->host.addrs = &r->hostaddr;
        r->host.n_addrs = 1;
        /* node-9 has none of cluster_small()'s endpoints: svc-c's Local
         * policy finds no local endpoint. */
        CHECK(render_params_init(&r->p, 4, &r->cfg, "node-9", NULL, &r->host, NULL) == 0);
        r->m = model_new();
        cluster_small(r->m, false);
        r->loop = ev_loop_new();
        CHECK(r->loop);
        r->ops = backend_for_mode(PROXY_MODE_NFTABLES);
        CHECK(r->ops && strcmp(r->ops->name, "nftables") == 0);
        const struct backend_env env = {.loop = r->loop, .config = &r->cfg, .host = &r->host,
                                        .families = &r->family, .n_families = 1, .changed = on_changed, .core = r};
        CHECK(r->ops->create(&env, &r->b) == 0);
}

static void rig_done(struct rig *r) {
        r->b = r->ops->destroy(r->b);
        CHECK(r->ops->cleanup(&r->cfg, &r->host) == 0);
        r->loop = ev_loop_free(r->loop);
        model_free(r->m);
        render_params_done(&r->p);
        config_done(&r->cfg);
}

static int rig_sync(struct rig *r, enum backend_sync_kind kind, const struct hmap *changed, struct backend_stats *st) {
        const struct hmap none = HMAP_INIT_STRINGS;
        const struct backend_sync s = {.kind = kind, .model = r->m, .params = &r->p, .changed = changed ? changed : &none,
                                       .all_changed = kind != BACKEND_SYNC_PARTIAL};
        return r->ops->sync(r->b, r->family, &s, st);
}

/* What `nft list table ip kube-proxy` prints (empty when there is no table). */
static char *table_text(void) {
        char *t = test_cmd_output("nft list table ip kube-proxy 2>/dev/null");
        CHECK(t != NULL);
        return t;
}

static bool table_has(const char *what) {
        char *t = table_text();
        bool has = t && strstr(t, what) != NULL;
        free(t);
        return has;
}

static void test_full_partial_and_resync(void) {
        struct rig r;
        struct backend_stats st;
        rig_init(&r);

        CHECK(rig_sync(&r, BACKEND_SYNC_FULL, NULL, &st) == 0);
        CHECK(!st.kernel_refused && !st.recheck);
        CHECK(st.no_local_internal == 0 && st.no_local_external == 1);     /* svc-c */
        CHECK(nftables_table_present(4));
        CHECK(table_has("chain services") && table_has("ns/svc-a/tcp/http") && !table_has("ns/svc-z"));

        /* A new service, synced alone. */
        const struct cluster_svc z = {.name = "svc-z", .ip = "10.96.0.99", .port = 8081};
        cluster_service(r.m, &z);
        cluster_endpoints(r.m, "svc-z", 9, 1);
        struct hmap changed = HMAP_INIT_STRINGS;
        hmap_put(&changed, "ns/svc-z", (void *) "ns/svc-z");
        CHECK(rig_sync(&r, BACKEND_SYNC_PARTIAL, &changed, &st) == 0);
        CHECK(table_has("ns/svc-z/tcp/http") && table_has("10.96.0.99"));
        CHECK(st.no_local_external == 1);

        /* Nothing changed: a resync finds the kernel as it left it. */
        char *before = table_text();
        CHECK(rig_sync(&r, BACKEND_SYNC_RESYNC, NULL, &st) == 0);
        char *after = table_text();
        CHECK_STREQ(before, after);
        free(before);
        free(after);

        /* Gone from the model: gone from the table. */
        CHECK(model_service_delete(r.m, "ns/svc-z") == 0);
        CHECK(rig_sync(&r, BACKEND_SYNC_PARTIAL, &changed, &st) == 0);
        CHECK(!table_has("ns/svc-z") && table_has("ns/svc-a/tcp/http"));
        hmap_done(&changed);
        CHECK(r.n_changed == 0);        /* its own commits are not someone else's */
        rig_done(&r);
}

static void test_changes_by_others_reach_the_core(void) {
        struct rig r;
        struct backend_stats st;
        rig_init(&r);
        CHECK(rig_sync(&r, BACKEND_SYNC_FULL, NULL, &st) == 0);

        /* Another process adds a rule to one of kproxy's chains. */
        CHECK(system("nft add rule ip kube-proxy services counter") == 0);
        wait_changed(&r);
        CHECK(r.n_changed >= 1 && r.changed_family == 4);
        CHECK(strstr(r.why, "changed by another process") != NULL);

        /* The table deleted: the check finds it gone, whatever the monitor said. */
        CHECK(rig_sync(&r, BACKEND_SYNC_FULL, NULL, &st) == 0);
        r.ops->check(r.b);
        CHECK(r.n_changed == 1);        /* the table is there: nothing to say */
        CHECK(system("nft delete table ip kube-proxy") == 0);
        r.n_changed = 0;
        r.ops->check(r.b);
        CHECK(r.n_changed == 1 && r.changed_family == 4);
        CHECK(strstr(r.why, "table kube-proxy is gone") != NULL);

        /* The next full sync writes it again. */
        CHECK(rig_sync(&r, BACKEND_SYNC_FULL, NULL, &st) == 0);
        CHECK(nftables_table_present(4) && table_has("ns/svc-a/tcp/http"));
        rig_done(&r);
}

static void test_leftovers_and_cleanup(void) {
        struct rig r;
        struct backend_stats st;
        rig_init(&r);
        CHECK(!r.ops->leftovers(&r.host, false));       /* nothing written yet */
        CHECK(rig_sync(&r, BACKEND_SYNC_FULL, NULL, &st) == 0);
        r.b = r.ops->destroy(r.b);
        CHECK(nftables_table_present(4));               /* the rules stay when it stops */
        CHECK(!r.ops->leftovers(&r.host, true));        /* the running mode owns them */
        CHECK(r.ops->leftovers(&r.host, false));
        CHECK(r.ops->remove_leftovers(&r.host, true) == 0 && nftables_table_present(4));
        CHECK(r.ops->remove_leftovers(&r.host, false) == 0 && !nftables_table_present(4));
        CHECK(!r.ops->leftovers(&r.host, false));
        CHECK(r.ops->cleanup(&r.cfg, &r.host) == 0);    /* nothing there: still fine */
        rig_done(&r);
}

static void test_render(void) {
        struct rig r;
        struct buf text = BUF_INIT, msg = BUF_INIT;
        rig_init(&r);
        CHECK(r.ops->render(r.m, &r.p, NULL, 0, false, &text) == 0);
        buf_putc(&text, '\0');
        CHECK(strstr(text.data, "add table ip kube-proxy") != NULL);
        CHECK(strstr(text.data, "ns/svc-a/tcp/http") != NULL);
        CHECK(r.ops->render(r.m, &r.p, NULL, 0, true, &msg) == 0);
        CHECK(msg.len > 100 && msg.len != text.len);
        buf_done(&text);
        buf_done(&msg);
        rig_done(&r);
}

int main(void) {
        int r = test_netns_enter();
        if (r < 0) {
                printf("test-backend-nftables: skipped, no network namespace of its own (%s)\n", strerror(-r));
                return 0;
        }
        TEST_RUN(test_full_partial_and_resync);
        TEST_RUN(test_changes_by_others_reach_the_core);
        TEST_RUN(test_leftovers_and_cleanup);
        TEST_RUN(test_render);
        TEST_DONE();
}
