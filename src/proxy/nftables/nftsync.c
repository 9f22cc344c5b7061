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
 * Each of those concepts has a file of its own (proxy/nftables/nftsync-internal.h
 * lists them); this one is the family's tables and the public calls.
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
#include "proxy/nftables/nftsync-internal.h"
#include "proxy/nftables/nftsync-owner.h"
#include "proxy/nftables/nftsync-rec.h"
#include "proxy/nftables/nftsync-resync.h"
#include "proxy/nftables/nftsync-txn.h"
#include "render/render.h"
#include "util/hmap.h"
#include "util/log.h"

#define DEFAULT_CHUNK 25000

/* --- one table's state --- */

void nftsync_table_forget(struct nftsync_table *s) {
        const char *k;
        void *v;
        for (size_t i = 0; hmap_next(&s->recs, &i, &k, &v);)
                nftsync_rec_free(v);
        hmap_done(&s->recs);
        nftsync_owner_forget(s);
}

int nftsync_table_new(struct nftsync *g, unsigned table, struct nftsync_table **ret) {
        struct nftsync_table *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->family = g->family;
        s->table = (uint16_t) table;
        char name[NFTIR_TABLE_NAME_MAX];
        snprintf(s->tname, sizeof s->tname, "%s", nftir_table_name(table, name));
        s->nl = g->nl;
        s->g = g;
        s->recs = (struct hmap) HMAP_INIT_KEYED(struct nftsync_rec, key);
        s->owners = (struct hmap) HMAP_INIT_STRINGS;
        *ret = s;
        return 0;
}

struct nftsync_table *nftsync_table_free(struct nftsync_table *s) {
        if (!s)
                return NULL;
        nftsync_table_forget(s);
        free(s);
        return NULL;
}

/* --- the family's tables --- */

int nftsync_new(uint8_t family, struct nftables *nl, struct nftsync **ret) {
        struct nftsync *g = calloc(1, sizeof *g);
        if (!g)
                return -ENOMEM;
        g->family = family;
        g->nl = nl;
        g->chunk = DEFAULT_CHUNK;
        nftmsg_init(&g->ids, family, 0);
        nftmsg_init(&g->pend, family, 0);
        nftmsg_share_set_ids(&g->pend, &g->ids);
        *ret = g;
        return 0;
}

struct nftsync *nftsync_free(struct nftsync *g) {
        if (!g)
                return NULL;
        for (size_t i = 0; i < g->n; i++)
                nftsync_table_free(g->t[i]);
        nftmsg_done(&g->pend);
        nftmsg_done(&g->ids);
        free(g);
        return NULL;
}

void nftsync_set_after_commit(struct nftsync *g, void (*fn)(void *userdata), void *userdata) {
        g->after_commit = fn;
        g->after_commit_ud = userdata;
}

void nftsync_set_chunk(struct nftsync *g, size_t messages) {
        g->chunk = messages;
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
        for (; g->n < want; g->n++) {
                if (nftsync_table_new(g, (unsigned) g->n, &g->t[g->n]) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static void stats_add(struct nftsync_stats *a, const struct nftsync_stats *b) {
        a->transactions += b->transactions;
        a->messages += b->messages;
        a->chains_written += b->chains_written;
        a->chains_kept += b->chains_kept;
        a->chains_deleted += b->chains_deleted;
        a->elements_added += b->elements_added;
        a->elements_deleted += b->elements_deleted;
        a->conflicts += b->conflicts;
        a->kernel_seconds += b->kernel_seconds;
        a->list_seconds += b->list_seconds;
        a->listed_chains |= b->listed_chains;
}

enum kind { FULL, REBUILD, RESYNC, PARTIAL };

/* Every table in turn, the shards first: a restart that brings them in
 * has them ready before the main table lets go of the services' nat side
 * (in the same transaction, or an earlier one). A partial sync leaves out
 * the shards none of the changed services is in. */
static int each_table(struct nftsync *g, enum kind k, const struct model *m, const struct render_params *p,
                      const struct inet_cidr *service_cidrs, size_t n_service_cidrs, const struct hmap *changed,
                      struct nftsync_stats *st) {
        bool touched[NFTIR_TABLES_MAX + 1] = {false};
        int r = tables_for(g, p);
        memset(st, 0, sizeof *st);
        if (r < 0)
                return r;
        if (k == PARTIAL) {
                const char *key;
                void *v;
                touched[0] = true;
                for (size_t it = 0; hmap_next(changed, &it, &key, &v);) {
                        unsigned t = render_nft_shard(key, p->nft_shards);
                        touched[t < g->n ? t : 0] = true;
                }
        } else {
                g->svcs = model_services_sorted(m, &g->n_svcs);
                g->shards = malloc(g->n_svcs + 1);
                if ((!g->svcs && model_n_services(m) > 0) || !g->shards) {
                        free(g->svcs);
                        free(g->shards);
                        g->svcs = NULL;
                        g->shards = NULL;
                        return -ENOMEM;
                }
                for (size_t i = 0; i < g->n_svcs; i++)
                        g->shards[i] = (uint8_t) render_nft_shard(g->svcs[i]->key, p->nft_shards);
                /* Without it the main table's pass renders every service. */
                if (k == RESYNC && g->n > 1)
                        g->main_same = calloc(g->n_svcs + 1, sizeof *g->main_same);
        }
        for (size_t i = 1; i <= g->n && r == 0; i++) {
                struct nftsync_table *s = g->t[i % g->n];
                struct nftsync_stats one;
                switch (k) {
                case FULL:
                case REBUILD:
                        r = nftsync_full_table(s, m, p, service_cidrs, n_service_cidrs, k == REBUILD, &one);
                        break;
                case RESYNC:
                        r = nftsync_resync_table(s, m, p, service_cidrs, n_service_cidrs, &one);
                        break;
                case PARTIAL:
                        if (!touched[s->table])
                                continue;
                        r = nftsync_diff_partial(s, m, p, changed, &one);
                        break;
                }
                stats_add(st, &one);
        }
        /* What the tables left queued: one transaction with the last of
         * each (or nothing after a failure: the next sync is a full one). */
        if (r == 0)
                r = nftsync_txn_send(g, st);
        nftsync_txn_reset(g, true);
        free(g->svcs);
        free(g->shards);
        free(g->main_same);
        g->svcs = NULL;
        g->shards = NULL;
        g->main_same = NULL;
        g->n_svcs = 0;
        /* The shards of a larger shard count before (all of them, now 0). */
        if (r == 0 && (k == FULL || k == REBUILD)) {
                double t0 = nftsync_now();
                r = nftables_drop_tables(g->nl, g->family, (unsigned) g->n);
                st->list_seconds += nftsync_now() - t0;
        }
        return r;
}

int nftsync_full(struct nftsync *g, const struct model *m, const struct render_params *p,
                 const struct inet_cidr *service_cidrs, size_t n_service_cidrs, bool rebuild,
                 struct nftsync_stats *st) {
        return each_table(g, rebuild ? REBUILD : FULL, m, p, service_cidrs, n_service_cidrs, NULL, st);
}

int nftsync_resync(struct nftsync *g, const struct model *m, const struct render_params *p,
                   const struct inet_cidr *service_cidrs, size_t n_service_cidrs, struct nftsync_stats *st) {
        return each_table(g, RESYNC, m, p, service_cidrs, n_service_cidrs, NULL, st);
}

int nftsync_partial(struct nftsync *g, const struct model *m, const struct render_params *p,
                    const struct hmap *changed, struct nftsync_stats *st) {
        return each_table(g, PARTIAL, m, p, NULL, 0, changed, st);
}
