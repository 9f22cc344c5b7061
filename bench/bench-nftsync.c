/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nftables mode's sync, kproxy's own CPU apart from the kernel's. Loads a
 * state file into the model, then, in the network namespace it runs in
 * (a scratch one: bench/run.sh makes it), times:
 *
 *   render   the netlink messages of a whole first full sync, no kernel
 *            (best of REPEAT): what rendering costs per full sync;
 *   cold     nftsync_full() into an empty namespace: wall, user and
 *            system CPU (system is the kernel's side of the netlink calls);
 *   resync   nftsync_resync() over the loaded table with nothing changed
 *            (best of REPEAT): render and diff every service against the
 *            records, the hourly full sync's work, with one kernel query
 *            per table;
 *   restart  nftsync_full() of a new sync over the loaded table: its wall
 *            time, the part reading the table back, the kernel's commits;
 *   partial  nftsync_partial() of one service whose endpoint changed
 *            (wall, median of REPEAT, the endpoint moved and back);
 *   heap     malloc's bytes in use with the model loaded, and after the
 *            first full sync (its records added).
 *
 * and prints one line of key=value results.
 *
 * usage: bench-nftsync STATE NODE CLUSTER_CIDR SHARDS [REPEAT]
 */
#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "apply/nftables.h"
#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "kube/decode.h"
#include "kube/load.h"
#include "model/model.h"
#include "proxy/nftables/nftsync.h"
#include "render/nftmsg.h"
#include "render/render.h"
#include "util/hmap.h"
#include "util/intern.h"
#include "util/log.h"

#include "bench-util.h"

struct cpu {
        double wall, user, sys;
};

static struct cpu cpu_now(void) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return (struct cpu) {bench_now(), (double) ru.ru_utime.tv_sec + (double) ru.ru_utime.tv_usec / 1e6,
                             (double) ru.ru_stime.tv_sec + (double) ru.ru_stime.tv_usec / 1e6};
}

/* Process CPU time, precise (getrusage()'s split is tick-sampled). */
static double cputime(void) {
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static struct cpu cpu_since(struct cpu a) {
        struct cpu b = cpu_now();
        return (struct cpu) {b.wall - a.wall, b.user - a.user, b.sys - a.sys};
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

/* A copy of the service's first slice with its first endpoint's address
 * moved by delta in the last byte (IPv4 slices only). */
static struct slice *moved_slice(const struct slice *s, int delta) {
        struct slice *c = calloc(1, sizeof *c);
        c->key = strdup(s->key);
        c->service_key = strdup(s->service_key);
        c->family = s->family;
        c->n_ports = s->n_ports;
        c->ports = calloc(s->n_ports ? s->n_ports : 1, sizeof *c->ports);
        for (size_t i = 0; i < s->n_ports; i++) {
                c->ports[i] = s->ports[i];
                c->ports[i].name = strdup(s->ports[i].name);
        }
        c->n_endpoints = s->n_endpoints;
        c->endpoints = calloc(s->n_endpoints ? s->n_endpoints : 1, sizeof *c->endpoints);
        c->addrs = calloc(s->n_endpoints ? s->n_endpoints : 1, slice_addr_len(s));
        memcpy(c->addrs, s->addrs, s->n_endpoints * slice_addr_len(s));
        for (size_t i = 0; i < s->n_endpoints; i++) {
                c->endpoints[i] = s->endpoints[i];
                c->endpoints[i].hints = 0;
                if (s->endpoints[i].node)
                        c->endpoints[i].node = intern(slice_endpoint_node(&s->endpoints[i]));
        }
        if (c->n_endpoints > 0)
                c->addrs[3] = (uint8_t) (c->addrs[3] + delta);
        return c;
}

/* malloc's bytes in use, MiB: its heap's and the blocks it mapped apart
 * (every allocation over 128 KB or more: the hash maps' slots). */
static double heap_in_use(void) {
        struct mallinfo2 mi = mallinfo2();
        return (double) (mi.uordblks + mi.hblkhd) / (1 << 20);
}

int main(int argc, char **argv) {
        if (argc < 5) {
                fprintf(stderr, "usage: %s STATE NODE CLUSTER_CIDR SHARDS [REPEAT]\n", argv[0]);
                return 2;
        }
        int repeat = argc > 5 ? atoi(argv[5]) : 5;
        struct kproxy_config cfg;
        struct host_facts host = {.random_fully = true};
        struct render_params p;
        struct model *m = model_new();
        char err[KUBE_LOAD_ERRLEN];

        log_set_verbosity(-1);
        config_init(&cfg);
        cfg.mode = PROXY_MODE_NFTABLES;
        cfg.cluster_cidr = strdup(argv[3]);
        cfg.nftables_shards = atoi(argv[4]);
        if (kube_load_file(argv[1], bench_add, m, err) < 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
        }
        if (render_params_init(&p, 4, &cfg, argv[2], model_node(m), &host, NULL) < 0)
                return 1;
        malloc_trim(0);
        double heap_model = heap_in_use();

        double render = 1e9;
        size_t messages = 0, bytes = 0;
        for (int i = 0; i < repeat; i++) {
                struct nftmsg msg;
                nftmsg_init(&msg, 4, 0);
                double c = cputime();
                render_nftables_netlink(m, &p, NULL, 0, &msg);
                double d = cputime() - c;
                if (d < render)
                        render = d;
                messages = msg.n;
                bytes = msg.b.len;
                nftmsg_done(&msg);
        }

        struct nftables *nl = NULL;
        struct nftsync *sync = NULL;
        struct nftsync_stats st;
        if (nftables_open(&nl) < 0 || !(sync = nftsync_new(4, nl))) {
                fprintf(stderr, "bench-nftsync: cannot open nf_tables netlink\n");
                return 1;
        }
        struct cpu c = cpu_now();
        if (nftsync_full(sync, m, &p, NULL, 0, false, &st) < 0) {
                fprintf(stderr, "bench-nftsync: the first full sync failed\n");
                return 1;
        }
        struct cpu cold = cpu_since(c);
        size_t cold_tx = st.transactions;
        malloc_trim(0);
        double heap_synced = heap_in_use();

        double resync = 1e9, resync_wall = 0;
        for (int i = 0; i < repeat; i++) {
                double c0 = cputime(), w0 = bench_now();
                if (nftsync_resync(sync, m, &p, NULL, 0, &st) < 0 || st.messages != 0) {
                        fprintf(stderr, "bench-nftsync: a resync of an unchanged table failed or wrote %zu "
                                "messages\n", st.messages);
                        return 1;
                }
                if (cputime() - c0 < resync) {
                        resync = cputime() - c0;
                        resync_wall = bench_now() - w0;
                }
        }

        /* A restart: a new sync, no records, over the loaded table. */
        nftsync_free(sync);
        if (!(sync = nftsync_new(4, nl)))
                return 1;
        double r0 = bench_now();
        if (nftsync_full(sync, m, &p, NULL, 0, false, &st) < 0 || st.chains_written > st.chains_kept / 100 + 10) {
                fprintf(stderr, "bench-nftsync: a restart failed or wrote %zu chains\n", st.chains_written);
                return 1;
        }
        double restart = bench_now() - r0, restart_read = st.list_seconds, restart_kernel = st.kernel_seconds;

        /* One endpoint of the first service with one, moved and back. */
        size_t n_svcs = 0;
        const struct svc **svcs = model_services_sorted(m, &n_svcs);
        const struct slice *orig = NULL;
        const char *key = NULL;
        for (size_t i = 0; i < n_svcs && !orig; i++) {
                size_t n = 0;
                const struct slice **sl = model_service_slices(m, svcs[i]->key, &n);
                if (n > 0 && sl[0]->family == 4 && sl[0]->n_endpoints > 0) {
                        orig = sl[0];
                        key = svcs[i]->key;
                }
                free(sl);
        }
        double *part = calloc((size_t) repeat, sizeof *part);
        char *skey = orig ? strdup(key) : NULL;
        struct slice *base = orig ? moved_slice(orig, 0) : NULL;
        for (int i = 0; orig && i < repeat; i++) {
                struct hmap changed = HMAP_INIT;
                model_slice_upsert(m, moved_slice(base, i % 2 ? 0 : 1));
                hmap_put(&changed, skey, NULL);
                double w0 = bench_now();
                int r = nftsync_partial(sync, m, &p, &changed, &st);
                part[i] = bench_now() - w0;
                hmap_done(&changed);
                if (r < 0 || st.transactions != 1) {
                        fprintf(stderr, "bench-nftsync: a partial sync failed\n");
                        return 1;
                }
        }
        qsort(part, (size_t) repeat, sizeof *part, cmp_double);

        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("services=%zu shards=%d render_cpu=%.4f messages=%zu bytes=%zu cold_wall=%.3f cold_user=%.3f "
               "cold_sys=%.3f cold_transactions=%zu resync_wall=%.4f resync_cpu=%.4f partial_wall=%.4f "
               "restart_wall=%.3f restart_read=%.3f restart_kernel=%.3f heap_model_mib=%.1f heap_synced_mib=%.1f "
               "peak_rss_mib=%.1f\n",
               model_n_services(m), cfg.nftables_shards, render, messages, bytes, cold.wall, cold.user, cold.sys,
               cold_tx, resync_wall, resync, orig ? part[repeat / 2] : 0.0, restart, restart_read, restart_kernel,
               heap_model, heap_synced,
               (double) ru.ru_maxrss / 1024);
        free(part);
        free(skey);
        slice_free(base);
        free(svcs);
        nftsync_free(sync);
        nftables_close(nl);
        render_params_done(&p);
        model_free(m);
        config_done(&cfg);
        return 0;
}
