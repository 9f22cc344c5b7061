/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What no record wants goes (proxy/nftables/nftsync-list.c), on its own:
 * from a table whose records are a real service's (svc-d: chains and an
 * affinity set), listed with a stray chain and a stray set beside them, only
 * the strays are removed: the chain flushed in the body and deleted in the
 * tail, the set deleted in the tail; and nothing at all when nothing was
 * listed (a resync that trusts the kernel's count).
 */
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "model/model.h"
#include "proxy/nftables/nftsync-list.h"
#include "proxy/nftables/nftsync-rec.h"
#include "proxy/nftables/nftsync-stats.h"
#include "proxy/nftables/nftsync-table.h"
#include "proxy/nftables/nftsync-txn.h"
#include "proxy/nftables/nftsync-unit.h"
#include "render/render.h"
#include "test.h"
#include "util/hmap.h"
#include "util/inet.h"

static void test_only_strays_go(void) {
        struct kproxy_config cfg;
        struct host_facts host = {0};
        struct inet_cidr hostaddr;
        struct render_params p;
        struct nftsync_batch b;
        struct nftsync_txn t;
        struct nftsync_unit u;
        struct nftsync_stats st = {0};
        struct hmap chains = HMAP_INIT, sets = HMAP_INIT;
        char *end;

        config_init(&cfg);
        cfg.mode = PROXY_MODE_NFTABLES;
        cfg.cluster_cidr = strdup("10.244.0.0/16");
        inet_cidr_parse("192.168.0.2/24", &hostaddr);
        host.addrs = &hostaddr;
        host.n_addrs = 1;
        if (render_params_init(&p, 4, &cfg, "node-1", NULL, &host, NULL) < 0)
                abort();
        struct model *m = model_new();
        cluster_small(m, false);

        nftsync_batch_init(&b, 4, NULL, 0);
        struct nftsync_table *s = nftsync_table_new(0, NULL, &b);
        nftsync_txn_init(&t, &b, 0);
        nftsync_unit_init(&u, 4, 0, &b.ids);
        CHECK(nftsync_unit_render(&u, m, &p, "ns/svc-d", NULL, NULL, NULL, NULL) == 0);
        CHECK(u.n_ch > 0 && u.n_st > 0);
        nftsync_table_keep(s, nftsync_unit_record(&u, "ns/svc-d", &end));

        /* Nothing listed: nothing to remove. */
        nftsync_list_remove_unwanted(s, &chains, &sets, &t, &st);
        CHECK(nftsync_txn_size(&t) == 0);

        for (size_t i = 0; i < u.n_ch; i++)
                hmap_put(&chains, u.ch[i].name, "");
        for (size_t i = 0; i < u.n_st; i++)
                hmap_put(&sets, u.st[i].name, "");
        hmap_put(&chains, "someone-elses-chain", "");
        hmap_put(&sets, "someone-elses-set", "");
        nftsync_list_remove_unwanted(s, &chains, &sets, &t, &st);
        CHECK(st.chains_deleted == 1);
        CHECK(t.body.n == 1 && t.tail.n == 2 && t.head.n == 0 && t.add_el.n == 0);

        hmap_done(&chains);
        hmap_done(&sets);
        nftsync_unit_done(&u);
        nftsync_txn_done(&t);
        nftsync_table_free(s);
        nftsync_batch_done(&b);
        model_free(m);
        render_params_done(&p);
        config_done(&cfg);
}

int main(void) {
        TEST_RUN(test_only_strays_go);
        TEST_DONE();
}
