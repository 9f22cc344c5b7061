/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Render benchmark: loads a state file once (timed: read + JSON decode +
 * model), then renders the full iptables-restore input several times
 * (timed: the renderer alone, what the daemon pays per full sync), and
 * prints one line of key=value results.
 *
 * usage: bench-render STATE NODE CLUSTER_CIDR [REPEAT]
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "kube/decode.h"
#include "kube/load.h"
#include "model/model.h"
#include "render/render.h"
#include "util/buf.h"

#include "bench-util.h"

static double cpu_now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
        if (argc < 4) {
                fprintf(stderr, "usage: %s STATE NODE CLUSTER_CIDR [REPEAT]\n", argv[0]);
                return 2;
        }
        int repeat = argc > 4 ? atoi(argv[4]) : 5;
        struct kproxy_config cfg;
        struct host_facts host = {.random_fully = true, .nfacct = true};
        struct render_params p;
        struct model *m = model_new();
        char err[KUBE_LOAD_ERRLEN];

        config_init(&cfg);
        cfg.cluster_cidr = strdup(argv[3]);
        double t0 = bench_now(), c0 = cpu_now();
        if (kube_load_file(argv[1], bench_add, m, err) < 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
        }
        double load_wall = bench_now() - t0, load_cpu = cpu_now() - c0;
        render_params_init(&p, 4, &cfg, argv[2], model_node(m), &host, NULL);

        double best_wall = 1e9, best_cpu = 1e9;
        size_t bytes = 0;
        for (int i = 0; i < repeat; i++) {
                struct buf out = BUF_INIT;
                t0 = bench_now();
                c0 = cpu_now();
                render_iptables(m, &p, NULL, &out);
                double w = bench_now() - t0, c = cpu_now() - c0;
                if (w < best_wall)
                        best_wall = w;
                if (c < best_cpu)
                        best_cpu = c;
                bytes = out.len;
                buf_done(&out);
        }
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("services=%zu load_wall=%.4f load_cpu=%.4f render_wall=%.4f render_cpu=%.4f output_bytes=%zu "
               "peak_rss_mib=%.1f\n",
               model_n_services(m), load_wall, load_cpu, best_wall, best_cpu, bytes, (double) ru.ru_maxrss / 1024);
        render_params_done(&p);
        model_free(m);
        free(cfg.cluster_cidr);
        cfg.cluster_cidr = NULL;
        config_done(&cfg);
        return 0;
}
