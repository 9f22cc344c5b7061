/* SPDX-License-Identifier: Apache-2.0 */
/*
 * iptables mode's backend (proxy/iptables/backend.c) as the sync loop
 * drives it, through iptables-nft on the kernel of a network namespace of
 * the test's own (no root needed: tests/unit/netns.h):
 *
 * - the mode's node set-up turns route_localnet on (in a scratch /proc);
 * - a full sync writes upstream's chains and reports the tables' rule
 *   counts and the Local tally; a partial sync adds the changed service;
 * - the periodic check: the canary there says nothing, a flushed canary
 *   is reported to the core (env->changed) and made again;
 * - leftovers are the chains when the mode is not running, on either
 *   backend; removing them and --cleanup delete the chains and the file
 *   --state-dir kept;
 * - render gives iptables-restore input.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apply/iptables-known.h"
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
        char state_dir[64];
        int n_changed;
        char why[200];
};

static void on_changed(void *core, uint8_t family, const char *why) {
        struct rig *r = core;
        CHECK(family == 4);
        r->n_changed++;
        snprintf(r->why, sizeof r->why, "%s", why);
}

static void rig_init(struct rig *r) {
        memset(r, 0, sizeof *r);
        r->family = 4;
        config_init(&r->cfg);
        r->cfg.mode = PROXY_MODE_IPTABLES;
        r->cfg.cluster_cidr = strdup("10.244.0.0/16");
        strcpy(r->state_dir, "/tmp/kproxy-test-ipt-XXXXXX");
        CHECK(mkdtemp(r->state_dir) != NULL);
        r->cfg.state_dir = strdup(r->state_dir);
        CHECK(inet_cidr_parse("192.168.0.2/24", &r->hostaddr) == 0);
        r->host.addrs = &r->hostaddr;
        r->host.n_addrs = 1;
        host_probe_iptables(&r->host, IPTABLES_BACKEND_NFT);
        CHECK(!r->host.iptables_missing && r->host.iptables_nft);
        /* node-9 has none of cluster_small()'s endpoints: svc-c's Local
         * policy finds no local endpoint. */
        CHECK(render_params_init(&r->p, 4, &r->cfg, "node-9", NULL, &r->host, NULL) == 0);
        r->m = model_new();
        cluster_small(r->m, false);
        r->loop = ev_loop_new();
        CHECK(r->loop);
        r->ops = backend_for_mode(PROXY_MODE_IPTABLES);
        CHECK(r->ops && strcmp(r->ops->name, "iptables") == 0);
        const struct backend_env env = {.loop = r->loop, .config = &r->cfg, .host = &r->host,
                                        .families = &r->family, .n_families = 1, .changed = on_changed, .core = r};
        CHECK(r->ops->create(&env, &r->b) == 0);
}

static void rig_done(struct rig *r) {
        r->b = r->ops->destroy(r->b);
        CHECK(r->ops->cleanup(&r->cfg, &r->host) == 0);
        CHECK(rmdir(r->state_dir) == 0);
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

static bool nat_has(const char *what) {
        char *t = test_cmd_output("iptables-nft-save -t nat 2>/dev/null");
        CHECK(t != NULL);
        bool has = t && strstr(t, what) != NULL;
        free(t);
        return has;
}

static void test_setup_turns_route_localnet_on(void) {
        struct kproxy_config cfg;
        struct host_facts host = {0};
        char root[64] = "/tmp/kproxy-test-ipt-root-XXXXXX", path[160], v[8] = "";
        config_init(&cfg);
        cfg.mode = PROXY_MODE_IPTABLES;
        CHECK(mkdtemp(root) != NULL);
        const char *dirs[] = {"/proc", "/proc/sys", "/proc/sys/net", "/proc/sys/net/ipv4", "/proc/sys/net/ipv4/conf",
                              "/proc/sys/net/ipv4/conf/all"};
        for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
                snprintf(path, sizeof path, "%s%s", root, dirs[i]);
                CHECK(mkdir(path, 0755) == 0);
        }
        snprintf(path, sizeof path, "%s/proc/sys/net/ipv4/conf/all/route_localnet", root);
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        CHECK(fd >= 0 && write(fd, "0\n", 2) == 2);
        close(fd);

        CHECK(backend_for_mode(PROXY_MODE_IPTABLES)->setup(&cfg, &host, "node-1", root) == 0);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        CHECK(fd >= 0 && read(fd, v, sizeof v - 1) > 0);
        close(fd);
        CHECK(v[0] == '1');

        CHECK(unlink(path) == 0);
        for (size_t i = sizeof dirs / sizeof *dirs; i-- > 0;) {
                snprintf(path, sizeof path, "%s%s", root, dirs[i]);
                CHECK(rmdir(path) == 0);
        }
        CHECK(rmdir(root) == 0);
        config_done(&cfg);
}

static void test_full_and_partial(void) {
        struct rig r;
        struct backend_stats st;
        rig_init(&r);

        CHECK(rig_sync(&r, BACKEND_SYNC_FULL, NULL, &st) == 0);
        CHECK(!st.kernel_refused && st.no_local_internal == 0 && st.no_local_external == 1);    /* svc-c */
        CHECK(st.n_tables == 2 && strcmp(st.tables[1].table, "nat") == 0 && st.tables[1].total > 20);
        CHECK(nat_has(":KUBE-SERVICES") && nat_has("ns/svc-a:http cluster IP") && !nat_has("ns/svc-z"));
        char path[4096];
        CHECK(iptables_known_file(r.state_dir, 4, path, sizeof path) && access(path, F_OK) == 0);

        const struct cluster_svc z = {.name = "svc-z", .ip = "10.96.0.99", .port = 8081};
        cluster_service(r.m, &z);
        cluster_endpoints(r.m, "svc-z", 9, 1);
        struct hmap changed = HMAP_INIT_STRINGS;
        hmap_put(&changed, "ns/svc-z", (void *) "ns/svc-z");
        CHECK(rig_sync(&r, BACKEND_SYNC_PARTIAL, &changed, &st) == 0);
        CHECK(nat_has("ns/svc-z:http cluster IP") && nat_has("10.96.0.99/32"));
        CHECK(model_service_delete(r.m, "ns/svc-z") == 0);
        CHECK(rig_sync(&r, BACKEND_SYNC_PARTIAL, &changed, &st) == 0);
        CHECK(!nat_has("ns/svc-z") && nat_has("ns/svc-a:http cluster IP"));
        hmap_done(&changed);
        CHECK(r.n_changed == 0);
        rig_done(&r);
}

static void test_check_finds_a_flush(void) {
        struct rig r;
        struct backend_stats st;
        rig_init(&r);
        CHECK(rig_sync(&r, BACKEND_SYNC_FULL, NULL, &st) == 0);
        r.ops->check(r.b);
        CHECK(r.n_changed == 0);
        CHECK(system("iptables-nft -t mangle -X KUBE-PROXY-CANARY") == 0);
        r.ops->check(r.b);
        CHECK(r.n_changed == 1 && strstr(r.why, "canary is gone") != NULL);
        CHECK(system("iptables-nft -t mangle -S KUBE-PROXY-CANARY >/dev/null 2>&1") == 0);     /* made again */
        r.ops->check(r.b);
        CHECK(r.n_changed == 1);
        rig_done(&r);
}

static void test_leftovers_and_cleanup(void) {
        struct rig r;
        struct backend_stats st;
        char path[4096];
        rig_init(&r);
        CHECK(rig_sync(&r, BACKEND_SYNC_FULL, NULL, &st) == 0);
        r.b = r.ops->destroy(r.b);
        CHECK(nat_has(":KUBE-SERVICES"));               /* the rules stay when it stops */
        CHECK(!r.ops->leftovers(&r.host, true));        /* the running backend's own */
        CHECK(r.ops->leftovers(&r.host, false));
        CHECK(r.ops->remove_leftovers(&r.host, true) == 0 && nat_has(":KUBE-SERVICES"));
        CHECK(r.ops->remove_leftovers(&r.host, false) == 0 && !nat_has("KUBE-SERVICES"));
        CHECK(!r.ops->leftovers(&r.host, false));
        CHECK(iptables_known_file(r.state_dir, 4, path, sizeof path) && access(path, F_OK) == 0);
        CHECK(r.ops->cleanup(&r.cfg, &r.host) == 0);
        CHECK(access(path, F_OK) < 0 && errno == ENOENT);       /* what --state-dir kept */
        rig_done(&r);
}

static void test_render(void) {
        struct rig r;
        struct buf out = BUF_INIT;
        rig_init(&r);
        CHECK(r.ops->render(r.m, &r.p, NULL, 0, true, &out) == 0);     /* no netlink form: the text */
        buf_putc(&out, '\0');
        CHECK(strstr(out.data, "*nat\n") && strstr(out.data, "-A KUBE-SERVICES") && strstr(out.data, "COMMIT\n"));
        buf_done(&out);
        rig_done(&r);
}

int main(void) {
        int r = test_netns_enter();
        if (r < 0) {
                printf("test-backend-iptables: skipped, no network namespace of its own (%s)\n", strerror(-r));
                return 0;
        }
        TEST_RUN(test_setup_turns_route_localnet_on);
        TEST_RUN(test_full_and_partial);
        TEST_RUN(test_check_finds_a_flush);
        TEST_RUN(test_leftovers_and_cleanup);
        TEST_RUN(test_render);
        TEST_DONE();
}
