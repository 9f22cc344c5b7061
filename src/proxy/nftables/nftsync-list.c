/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a full sync and a resync share: listing a table (its chain names,
 * its named sets), and removing from it what no record wants, stale or
 * someone else's.
 */
#include "proxy/nftables/nftsync-list.h"

#include <stdbool.h>
#include <stdlib.h>

#include "apply/nftables.h"
#include "proxy/nftables/nftsync-rec.h"
#include "proxy/nftables/nftsync-stats.h"
#include "proxy/nftables/nftsync-table.h"
#include "proxy/nftables/nftsync-txn.h"
#include "render/nftir.h"
#include "render/nftmsg.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/hmap.h"
#include "util/log.h"

int nftsync_list_table(struct nftsync_table *s, struct hmap *chains, struct hmap *sets, struct nftsync_stats *st) {
        double t0 = clock_mono_s();
        int r = nftables_list(s->nl, s->family, s->tname, chains, sets);
        st->list_seconds += clock_mono_s() - t0;
        st->listed_chains |= chains != NULL;
        return r;
}

/* The sets of sets (from nftables_list()) that no record in desired
 * wants, of the nat side or the others: deleted in t's tail. */
static void remove_sets(const struct nftsync_table *s, const struct hmap *sets, const struct hmap *desired, bool nat,
                        struct nftsync_txn *t) {
        const char *k;
        void *v;
        for (size_t it = 0; hmap_next(sets, &it, &k, &v);) {
                if (nftir_nat_map(k) != nat || hmap_get(desired, k))
                        continue;
                log_v(2, "IPv%u nftables set %s %s is not kproxy's, removing it", s->family, s->tname, k);
                nftmsg_set_del(&t->tail, k);
        }
}

void nftsync_list_remove_unwanted(struct nftsync_table *s, const struct hmap *chains, const struct hmap *sets,
                                  struct nftsync_txn *t, struct nftsync_stats *st) {
        struct hmap desired = HMAP_INIT;
        const char *k;
        void *v;
        size_t n_lists = 0;
        if ((!chains || chains->len == 0) && (!sets || sets->len == 0))
                return;         /* nothing listed (a resync that trusts the count) */
        char ***lists = xcalloc(s->recs.len + 1, sizeof *lists);
        for (size_t it = 0; hmap_next(&s->recs, &it, &k, &v);) {
                const struct nftsync_rec *rec = v;
                char **names = lists[n_lists++] = nftsync_rec_names(rec);
                for (size_t i = 0; i < rec->n_chains + rec->n_sets; i++)
                        hmap_put(&desired, names[i], (void *) rec);
        }
        /* The nat side's maps go before the chains they point at: when the
         * shard count changes, they leave a table with those chains. Others'
         * sets go after the chains (what refers to what is unknown). */
        remove_sets(s, sets, &desired, true, t);
        for (size_t it = 0; hmap_next(chains, &it, &k, &v);) {
                if (hmap_get(&desired, k))
                        continue;
                log_v(2, "IPv%u nftables chain %s %s is not kproxy's, removing it", s->family, s->tname, k);
                nftmsg_chain_flush(&t->body, k);
                nftmsg_chain_del(&t->tail, k);
                st->chains_deleted++;
        }
        remove_sets(s, sets, &desired, false, t);
        hmap_done(&desired);
        for (size_t i = 0; i < n_lists; i++)
                free(lists[i]);
        free(lists);
}
