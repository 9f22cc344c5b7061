/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket load balancing's cold start, kproxy's part only (no API server):
 * loads a state file into the model, then, with the maps pinned in PIN_DIR
 * (a bpf filesystem the caller mounted) and the hooks on CGROUP (one the
 * caller made), times
 *
 *   plan     userspace_plan_build_local() of every service (best of REPEAT):
 *            the decisions, no kernel;
 *   cold     the first full sync into empty maps: wall, and how many
 *            entries it wrote;
 *   restart  a new backend over the pinned, full maps, and its first full
 *            sync (every entry rewritten, none pruned): wall.
 *
 * and prints one line of key=value results; the maps are unpinned at the
 * end. Run it in a scratch network namespace (bench/socketlb.py does).
 *
 * usage: bench-socklb STATE NODE PIN_DIR CGROUP [REPEAT]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "kube/load.h"
#include "model/model.h"
#include "proxy/socklb/backend.h"
#include "proxy/backend.h"
#include "render/render.h"
#include "sockbpf/sockbpf.h"
#include "userspace/plan.h"
#include "util/hmap.h"
#include "util/inet.h"
#include "util/log.h"

#include "bench-util.h"

static double full_sync(struct backend *b, const struct model *m, const struct render_params *p) {
        struct hmap changed = HMAP_INIT_STRINGS;
        struct backend_sync s = {.kind = BACKEND_SYNC_FULL, .model = m, .params = p, .changed = &changed,
                                 .all_changed = true};
        struct backend_stats st;
        double t0 = bench_now();
        if (backend_socklb.sync(b, 4, &s, &st) < 0) {
                fprintf(stderr, "bench-socklb: a full sync of the maps failed\n");
                exit(1);
        }
        return bench_now() - t0;
}

int main(int argc, char **argv) {
        if (argc < 5) {
                fprintf(stderr, "usage: %s STATE NODE PIN_DIR CGROUP [REPEAT]\n", argv[0]);
                return 2;
        }
        int repeat = argc > 5 ? atoi(argv[5]) : 3;
        struct kproxy_config cfg;
        struct inet_cidr addr;
        struct host_facts host = {.addrs = &addr, .n_addrs = 1};
        struct render_params p;
        struct model *m = model_new();
        char err[KUBE_LOAD_ERRLEN];
        static const uint8_t families[] = {4};

        log_set_verbosity(-1);
        config_init(&cfg);
        cfg.mode = PROXY_MODE_NFTABLES;
        cfg.socket_lb = true;
        cfg.socket_lb_pin_dir = strdup(argv[3]);
        cfg.socket_lb_cgroup = strdup(argv[4]);
        inet_cidr_parse("192.168.0.2/32", &addr);
        if (kube_load_file(argv[1], bench_add, m, err) < 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
        }
        if (render_params_init(&p, 4, &cfg, argv[2], model_node(m), &host, NULL) < 0)
                return 1;

        double plan = 1e9;
        size_t n_fe = 0;
        for (int i = 0; i < repeat; i++) {
                struct userspace_plan pl;
                double t0 = bench_now();
                if (userspace_plan_build_local(m, &p, NULL, &pl) < 0)
                        return 1;
                double d = bench_now() - t0;
                if (d < plan)
                        plan = d;
                n_fe = pl.n_fe;
                userspace_plan_done(&pl);
        }

        struct backend_env env = {.config = &cfg, .host = &host, .families = families, .n_families = 1};
        struct backend *b;
        if (backend_socklb.create(&env, &b) < 0) {
                fprintf(stderr, "bench-socklb: cannot set up the programs\n");
                return 1;
        }
        double cold = full_sync(b, m, &p);
        b = backend_socklb.destroy(b);
        if (backend_socklb.create(&env, &b) < 0)
                return 1;
        double restart = full_sync(b, m, &p);
        b = backend_socklb.destroy(b);

        /* What the maps hold, read back through a fresh handle. */
        struct sockbpf *s;
        struct sockbpf_stats st = {0};
        if (sockbpf_open(argv[3], &s) < 0 || sockbpf_stats(s, &st) < 0)
                return 1;
        sockbpf_close(s);
        printf("services=%zu frontends=%zu entries=%zu slots=%zu plan_s=%.4f cold_s=%.4f restart_s=%.4f\n",
               model_n_services(m), n_fe, st.services, st.slots, plan, cold, restart);
        if (backend_socklb.cleanup(&cfg, &host) < 0)
                return 1;
        render_params_done(&p);
        model_free(m);
        config_done(&cfg);
        return 0;
}
