/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What the tests of the nftables sync's parts (full, diff, resync) share:
 * one table ("kube-proxy") over the in-memory kernel, its family's batch
 * (one transaction: the size bound 0), cluster_small()'s model, and the
 * pass a full sync or a resync is given (nftsync.c's pass_begin(), as a
 * table sees it: the services in key order, all in the main table).
 */
#include <stdlib.h>
#include <string.h>

#include "apply/nftables.h"
#include "cluster.h"
#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "model/model.h"
#include "nft-fake.h"
#include "proxy/nftables/nftsync-pass.h"
#include "proxy/nftables/nftsync-stats.h"
#include "proxy/nftables/nftsync-table.h"
#include "proxy/nftables/nftsync-txn.h"
#include "render/render.h"
#include "util/inet.h"

struct part {
        struct kproxy_config cfg;
        struct host_facts host;
        struct inet_cidr hostaddr;
        struct render_params p;
        struct model *m;
        struct nft_fake *k;
        struct nftables *nl;
        struct nftsync_batch b;
        struct nftsync_table *s;
        struct nftsync_pass ps;
        struct nftsync_stats st;
};

static inline void part_init(struct part *w) {
        memset(w, 0, sizeof *w);
        config_init(&w->cfg);
        w->cfg.mode = PROXY_MODE_NFTABLES;
        w->cfg.cluster_cidr = strdup("10.244.0.0/16");
        inet_cidr_parse("192.168.0.2/24", &w->hostaddr);
        w->host.addrs = &w->hostaddr;
        w->host.n_addrs = 1;
        if (render_params_init(&w->p, 4, &w->cfg, "node-1", NULL, &w->host, NULL) < 0)
                abort();
        w->m = model_new();
        cluster_small(w->m, false);
        w->k = nft_fake_new();
        if (nftables_open_on(nft_fake_open, w->k, &w->nl) < 0)
                abort();
        nftsync_batch_init(&w->b, 4, w->nl, 0);
        w->s = nftsync_table_new(0, w->nl, &w->b);
}

/* The pass of a full sync or a resync over w's model now. */
static inline void part_pass(struct part *w) {
        size_t n;
        const struct svc **svcs = model_services_sorted(w->m, &n);
        w->ps = (struct nftsync_pass) {.m = w->m, .p = &w->p, .svcs = svcs, .n_svcs = n,
                                       .shards = calloc(n + 1, 1), .main_recs = &w->s->recs};
        memset(&w->st, 0, sizeof w->st);
}

static inline void part_pass_done(struct part *w) {
        free((void *) w->ps.svcs);
        free((void *) w->ps.shards);
        w->ps = (struct nftsync_pass) {.m = w->m, .p = &w->p};
}

/* What the table's part queued, sent as one transaction. */
static inline int part_send(struct part *w) {
        int r = nftsync_txn_send(&w->b, &w->st);
        nftsync_txn_reset(&w->b, true);
        return r;
}

static inline void part_done(struct part *w) {
        nftsync_table_free(w->s);
        nftsync_batch_done(&w->b);
        nftables_close(w->nl);
        nft_fake_free(w->k);
        model_free(w->m);
        render_params_done(&w->p);
        config_done(&w->cfg);
}
