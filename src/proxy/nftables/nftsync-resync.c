/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The resync (the hourly full sync, and one after a Node change) trusts
 * the records when the change monitor saw nobody else change the table:
 * every service is rendered again and diffed against its record, which
 * catches whatever the change tracking missed. A service rendered exactly
 * as recorded needs no diff, and nothing of it is encoded into messages;
 * nor are its chain names hashed (nftir_sink.unhashed), since a record
 * compares a name by its prefix, key and rest. Whether the table holds
 * anything else, the kernel's count of its chains and named sets tells in
 * one request; only when it differs is the table listed.
 */
#include "proxy/nftables/nftsync-resync.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apply/nftables.h"
#include "model/model.h"
#include "proxy/nftables/nftsync-diff.h"
#include "proxy/nftables/nftsync-list.h"
#include "proxy/nftables/nftsync-pass.h"
#include "proxy/nftables/nftsync-rec.h"
#include "proxy/nftables/nftsync-stats.h"
#include "proxy/nftables/nftsync-table.h"
#include "proxy/nftables/nftsync-txn.h"
#include "proxy/nftables/nftsync-unit.h"
#include "render/render.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "util/log.h"

/* A resync of one table, as it goes. */
struct resync {
        struct nftsync_table *s;
        const struct nftsync_pass *ps;
        struct nftsync_stats *st;
        struct nftsync_diff d;          /* over u, t, released */
        struct hmap chains, sets;       /* listed, when the count differs */
        struct buf released;
        struct nftsync_txn t;
        struct nftsync_unit u;
        struct nftsync_side side;       /* with shards, a shard's view of the main table */
        struct nftmsg side_ids;
        bool tee;                       /* side is filled (a shard's pass) */
        size_t chunk;
};

/* The table holds what the records say unless the kernel counts other
 * chains and named sets in it (anonymous ones it does not count, 6.18):
 * only then is it listed (a dump of chain names is quadratic in the
 * kernel, seconds at 20k services) to find them. Sets r->chunk from the
 * records' chains. Returns 0 or -errno (logged). */
static int resync_read_table(struct resync *r) {
        struct nftsync_table *s = r->s;
        size_t want = 0, n_chains = 0;
        uint32_t use = 0;
        void *v;
        for (size_t it = 0; hmap_next(&s->recs, &it, NULL, &v);) {
                const struct nftsync_rec *rec = v;
                want += rec->n_chains + rec->n_sets;
                n_chains += rec->n_chains;
        }
        r->chunk = nftsync_txn_chunk(s->batch, n_chains);
        int q = nftables_table_use(s->nl, s->family, s->tname, &use);
        if (q < 0 || use != want) {
                if (q == 0)
                        log_v(2, "IPv%u nftables table %s holds %u chains and sets, its records %zu: "
                              "listing it", s->family, s->tname, use, want);
                q = nftsync_list_table(s, &r->chains, &r->sets, r->st);
        }
        if (q < 0)
                log_error_errno(q, "Failed to list IPv%u nftables table %s", s->family, s->tname);
        return q;
}

/* The fixed part, diffed against its record. */
static int resync_fixed(struct resync *r) {
        struct nftsync_table *s = r->s;
        struct nftir_sink sink = nftsync_unit_sink(&r->u);
        nftsync_unit_reset(&r->u);
        int q = render_nft_fixed(r->ps->p, r->ps->service_cidrs, r->ps->n_service_cidrs, &sink);
        if (q < 0)
                return q;
        struct nftsync_rec *old = hmap_remove(&s->recs, NFTSYNC_FIXED_KEY);
        nftsync_table_keep(s, nftsync_diff_service(&r->d, NFTSYNC_FIXED_KEY, old));
        nftsync_rec_free(old);
        return 0;
}

/* Queues the transaction's piece once it holds the size bound. */
static int resync_piece(struct resync *r) {
        return r->chunk && nftsync_txn_size(&r->t) >= r->chunk
                       ? nftsync_txn_queue(r->s->batch, &r->t, r->chunk, r->st)
                       : 0;
}

/* Every service of the model, then every recorded one it lost: there are
 * some when the records outnumber the services that had one (only a
 * service's own diff changes its record). */
static int resync_services(struct resync *r) {
        struct nftsync_table *s = r->s;
        const struct nftsync_pass *ps = r->ps;
        const struct svc **svcs = ps->svcs;
        size_t recorded = hmap_get(&s->recs, NFTSYNC_FIXED_KEY) != NULL, n_recs = s->recs.len, n_gone = 0;
        char **gone = NULL;
        const char *k;
        void *v;
        int q = 0;

        for (size_t i = 0; q == 0 && i < ps->n_svcs; i++) {
                if (!nftsync_pass_holds(ps, s->table, i))
                        continue;
                if (s->table == 0 && r->side.same && r->side.same[i]) {
                        recorded++;     /* nftsync_unit_same() had a record */
                        continue;
                }
                q = nftsync_diff_key(&r->d, svcs[i]->key, svcs[i], r->tee ? &r->side : NULL, i, &recorded);
                if (q == 0)
                        q = resync_piece(r);
        }
        if (q == 0 && recorded < n_recs) {
                gone = xcalloc(s->recs.len + 1, sizeof *gone);
                for (size_t it = 0; hmap_next(&s->recs, &it, &k, &v);)
                        if (*k && !model_service_get(ps->m, k))
                                gone[n_gone++] = xstrdup(k);
        }
        for (size_t i = 0; q == 0 && i < n_gone; i++) {
                q = nftsync_diff_key(&r->d, gone[i], NULL, NULL, 0, NULL);
                if (q == 0)
                        q = resync_piece(r);
        }
        for (size_t i = 0; i < n_gone; i++)
                free(gone[i]);
        free(gone);
        return q;
}

int nftsync_resync_table(struct nftsync_table *s, const struct nftsync_pass *ps, struct nftsync_stats *st) {
        struct resync r = {.s = s, .ps = ps, .st = st, .chains = HMAP_INIT, .sets = HMAP_INIT, .released = BUF_INIT,
                           .side = {.recs = ps->main_recs, .same = ps->main_same}};
        int q;

        memset(st, 0, sizeof *st);
        r.d = (struct nftsync_diff) {.s = s, .ps = ps, .u = &r.u, .t = &r.t, .released = &r.released, .st = st};
        r.tee = s->table != 0 && r.side.same;
        q = resync_read_table(&r);
        if (q < 0)
                goto out_lists;
        nftsync_txn_init(&r.t, s->batch, s->table);
        nftsync_unit_init(&r.u, s->family, s->table, &r.t.head);
        nftmsg_init(&r.side_ids, s->family, 0);
        nftsync_unit_init(&r.side.u, s->family, 0, &r.side_ids);
        r.u.unhashed_ok = true;

        /* What no record has goes first, on its own: a service may want a
         * stray's name for a new chain. */
        nftsync_list_remove_unwanted(s, &r.chains, &r.sets, &r.t, st);
        q = nftsync_txn_queue(s->batch, &r.t, 0, st);
        if (q == 0)
                q = nftsync_txn_send(s->batch, st);
        if (q == 0)
                q = resync_fixed(&r);
        if (q == 0)
                q = resync_services(&r);
        if (q == 0)
                q = nftsync_diff_released(&r.d);
        if (q == 0)
                q = nftsync_txn_queue(s->batch, &r.t, r.chunk, st);

        buf_done(&r.released);
        nftsync_unit_done(&r.u);
        nftsync_unit_done(&r.side.u);
        nftmsg_done(&r.side_ids);
        nftsync_txn_done(&r.t);
out_lists:
        nftables_names_done(&r.chains);
        nftables_names_done(&r.sets);
        return q;
}
