/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the nftables sync: the kernel's table is a function of the
 * model, and kproxy remembers, per service, just enough of what it last
 * put there (chain names with a digest of their rules, affinity sets with
 * their timeouts, map element keys with a digest of their values) to send
 * only the difference. A service is rendered into scratch buffers (the
 * same nftir description `kproxy render` prints), compared with its record
 * and the changed pieces are copied into the transaction (a full sync
 * with nothing to compare encodes them in the batch directly).
 *
 * Order inside a transaction is what keeps the kernel's reference checks
 * happy (the packet path only ever sees the committed result):
 *
 *   per service: flush its changed and stale chains, delete its changed
 *                and stale affinity sets, add sets, add new chains, write
 *                the rules of new and changed chains
 *   then:        delete map elements (every service), add map elements,
 *                delete the stale chains (flushed above, so unreferenced)
 *
 * Deleting an element and its target chain in one transaction is safe
 * because kproxy never points at a chain from an anonymous set (upstream's
 * per-service numgen maps), whose release the kernel defers.
 *
 * Map keys belong to the first service that claims them; a second claimant
 * (two services with one external IP and port) is skipped with a warning,
 * and gets the key when its owner lets go of it.
 *
 * A full sync (a restart, or after someone else changed the table) has no
 * records to go by: it reads each service's chains back from the kernel
 * (apply/nftables.h: digests of their rules in a form the bytes kproxy
 * sends share, and of a base chain's hook) and leaves alone those that
 * already hold what it would write. The hourly one trusts the records
 * when nobody else changed the table, and diffs every service against
 * them instead; a service rendered exactly as recorded needs no diff.
 *
 * With shards (render/nftir.h) each table has its own records, and the
 * tables' messages share the family's transactions (struct nftsync).
 *
 * Each of those concepts has a file of its own, and the files form a
 * stack: each uses only those below it, and only this one, at the top,
 * sees them all (the family's tables and the public calls):
 *
 *   nftsync.c           the family's tables (shards), a pass over them
 *   nftsync-full.c      a full sync of a table, reading back what chains hold
 *   nftsync-resync.c    a full sync of a table that trusts the records
 *   nftsync-list.c      listing a table, removing what no record wants
 *   nftsync-diff.c      a service against its record; a partial sync
 *   nftsync-table.h     one table's records, owners, and the batch it uses
 *   nftsync-pass.h      one sync as a table's parts see it (model, services)
 *   nftsync-owner.c     which service owns a map key, and who waits for it
 *   nftsync-unit.c      one service rendered into scratch messages
 *   nftsync-txn.c       transactions, and the family's batch that holds them
 *   nftsync-rec.c       a service's record (pure)
 *   nftsync-name.c      the code of a record's chain and set names (pure)
 *   nftsync-elemid.c    element ids (pure)
 *   nftsync-stats.h     what a sync did
 */
#include "proxy/nftables/nftsync.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply/nftables.h"
#include "model/model.h"
#include "proxy/nftables/nftsync-diff.h"
#include "proxy/nftables/nftsync-full.h"
#include "proxy/nftables/nftsync-pass.h"
#include "proxy/nftables/nftsync-resync.h"
#include "proxy/nftables/nftsync-table.h"
#include "proxy/nftables/nftsync-txn.h"
#include "render/render.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/hmap.h"
#include "util/log.h"

#define DEFAULT_CHUNK 25000

/* The family's tables and the batch they fill together. */
struct nftsync {
        uint8_t family;
        struct nftables *nl;
        struct nftsync_batch batch;
        size_t n;                               /* 1 + the shard count of the render parameters */
        struct nftsync_table *t[NFTIR_TABLES_MAX + 1]; /* by table index: 0, then the shards */
};

struct nftsync *nftsync_new(uint8_t family, struct nftables *nl) {
        struct nftsync *g = xcalloc(1, sizeof *g);
        g->family = family;
        g->nl = nl;
        nftsync_batch_init(&g->batch, family, nl, DEFAULT_CHUNK);
        return g;
}

struct nftsync *nftsync_free(struct nftsync *g) {
        if (!g)
                return NULL;
        for (size_t i = 0; i < g->n; i++)
                nftsync_table_free(g->t[i]);
        nftsync_batch_done(&g->batch);
        free(g);
        return NULL;
}

void nftsync_set_after_commit(struct nftsync *g, void (*fn)(void *userdata), void *userdata) {
        g->batch.after_commit = fn;
        g->batch.after_commit_ud = userdata;
}

void nftsync_set_chunk(struct nftsync *g, size_t messages) {
        g->batch.chunk = messages;
}

/* The tables p asks for: the first sync makes their syncs (the shard
 * count comes from the configuration and does not change). */
static int tables_for(struct nftsync *g, const struct render_params *p) {
        size_t want = 1 + (p->nft_shards < NFTIR_TABLES_MAX ? p->nft_shards : NFTIR_TABLES_MAX);
        if (g->n > 0 && g->n != want) {
                log_error("IPv%u nftables: the shard count changed from %zu to %u while running", g->family,
                          g->n - 1, p->nft_shards);
                return -EINVAL;
        }
        for (; g->n < want; g->n++)
                g->t[g->n] = nftsync_table_new((unsigned) g->n, g->nl, &g->batch);
        return 0;
}

enum kind { FULL, REBUILD, RESYNC, PARTIAL };

/* A full sync's or a resync's pass: the model's services in key order,
 * the table of each one's nat side, and (a resync with shards) the main
 * table's records and what the shards found the same in them. */
static void pass_begin(struct nftsync *g, enum kind k, struct nftsync_pass *ps) {
        const struct svc **svcs = model_services_sorted(ps->m, &ps->n_svcs);
        uint8_t *shards = xmalloc(ps->n_svcs + 1);
        if (!svcs && model_n_services(ps->m) > 0)
                abort();        /* model_services_sorted() fails only for memory */
        for (size_t i = 0; i < ps->n_svcs; i++)
                shards[i] = (uint8_t) render_nft_shard(svcs[i]->key, ps->p->nft_shards);
        ps->svcs = svcs;
        ps->shards = shards;
        ps->main_recs = &g->t[0]->recs;
        /* Without it the main table's pass renders every service. */
        if (k == RESYNC && g->n > 1)
                ps->main_same = xcalloc(ps->n_svcs + 1, sizeof *ps->main_same);
}

static void pass_end(struct nftsync_pass *ps) {
        free((void *) ps->svcs);
        free((void *) ps->shards);
        free(ps->main_same);
}

/* Every table in turn, the shards first: a restart that brings them in
 * has them ready before the main table lets go of the services' nat side
 * (in the same transaction, or an earlier one). A partial sync leaves out
 * the shards none of the changed services is in. */
static int each_table(struct nftsync *g, enum kind k, struct nftsync_pass *ps, const struct hmap *changed,
                      struct nftsync_stats *st) {
        bool touched[NFTIR_TABLES_MAX + 1] = {false};
        int r = tables_for(g, ps->p);
        memset(st, 0, sizeof *st);
        if (r < 0)
                return r;
        if (k == PARTIAL) {
                const char *key;
                void *v;
                touched[0] = true;
                for (size_t it = 0; hmap_next(changed, &it, &key, &v);) {
                        unsigned t = render_nft_shard(key, ps->p->nft_shards);
                        touched[t < g->n ? t : 0] = true;
                }
        } else {
                pass_begin(g, k, ps);
        }
        for (size_t i = 1; i <= g->n && r == 0; i++) {
                struct nftsync_table *s = g->t[i % g->n];
                struct nftsync_stats one;
                switch (k) {
                case FULL:
                case REBUILD:
                        r = nftsync_full_table(s, ps, k == REBUILD, &one);
                        break;
                case RESYNC:
                        r = nftsync_resync_table(s, ps, &one);
                        break;
                case PARTIAL:
                        if (!touched[s->table])
                                continue;
                        r = nftsync_diff_partial(s, ps, changed, &one);
                        break;
                }
                nftsync_stats_add(st, &one);
        }
        /* What the tables left queued: one transaction with the last of
         * each (or nothing after a failure: the next sync is a full one). */
        if (r == 0)
                r = nftsync_txn_send(&g->batch, st);
        nftsync_txn_reset(&g->batch, true);
        if (k != PARTIAL)
                pass_end(ps);
        /* The shards of a larger shard count before (all of them, now 0). */
        if (r == 0 && (k == FULL || k == REBUILD)) {
                double t0 = clock_mono_s();
                r = nftables_drop_tables(g->nl, g->family, (unsigned) g->n);
                st->list_seconds += clock_mono_s() - t0;
        }
        return r;
}

int nftsync_full(struct nftsync *g, const struct model *m, const struct render_params *p,
                 const struct inet_cidr *service_cidrs, size_t n_service_cidrs, bool rebuild,
                 struct nftsync_stats *st) {
        struct nftsync_pass ps = {.m = m, .p = p, .service_cidrs = service_cidrs, .n_service_cidrs = n_service_cidrs};
        return each_table(g, rebuild ? REBUILD : FULL, &ps, NULL, st);
}

int nftsync_resync(struct nftsync *g, const struct model *m, const struct render_params *p,
                   const struct inet_cidr *service_cidrs, size_t n_service_cidrs, struct nftsync_stats *st) {
        struct nftsync_pass ps = {.m = m, .p = p, .service_cidrs = service_cidrs, .n_service_cidrs = n_service_cidrs};
        return each_table(g, RESYNC, &ps, NULL, st);
}

int nftsync_partial(struct nftsync *g, const struct model *m, const struct render_params *p,
                    const struct hmap *changed, struct nftsync_stats *st) {
        struct nftsync_pass ps = {.m = m, .p = p};
        return each_table(g, PARTIAL, &ps, changed, st);
}
