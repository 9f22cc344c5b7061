/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What the nftables sync's files share, and nothing else of kproxy uses
 * (proxy/nftables/nftsync.h is the interface): the family's tables and each
 * table's state (their layout, and their making in nftsync.c), and the
 * few helpers every file of the sync needs.
 *
 * The files, one concept each:
 *
 *   nftsync.c           the family's tables (shards): the public calls
 *   nftsync-name.c      the code of a record's chain and set names (pure)
 *   nftsync-rec.c       a service's record (pure)
 *   nftsync-elemid.c    element ids (pure)
 *   nftsync-unit.c      one service rendered into scratch messages
 *   nftsync-txn.c       transactions, and the family's batch that holds them
 *   nftsync-owner.c     which service owns a map key, and who waits for it
 *   nftsync-diff.c      a service against its record; a partial sync
 *   nftsync-full.c      a full sync, reading back what chains hold
 *   nftsync-resync.c    a full sync that trusts the records
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proxy/nftables/nftsync-rec.h"
#include "render/nftir.h"
#include "render/nftmsg.h"
#include "util/hmap.h"

struct nftables;
struct svc;

/* The fixed part's record, under a key no service has. */
#define NFTSYNC_FIXED_KEY ""

/* One table's sync: "kube-proxy" or a shard, with its own records. */
struct nftsync_table {
        uint8_t family;
        uint16_t table;                 /* render/nftir.h's index */
        char tname[NFTIR_TABLE_NAME_MAX];
        struct nftables *nl;
        struct hmap recs;               /* service key -> struct nftsync_rec */
        struct hmap owners;             /* element ids of the records (nftsync_rec_of_id(): whose) */
        struct hmap waiting;            /* element id -> a waiter: a service refused it (nftsync-owner.c) */
        struct nftsync *g;              /* the family's tables: the transactions are theirs */
};

/* The family's tables, and the transaction they fill together: every
 * commit costs the kernel a walk over every chain of the network
 * namespace (nf_tables_commit makes each chain's next rule generation
 * current: 12 ms at 200k empty chains, measured), so the tables' pieces
 * go out in as few transactions as the size bound allows, not one or
 * more per table. */
struct nftsync {
        uint8_t family;
        struct nftables *nl;
        void (*after_commit)(void *);
        void *after_commit_ud;
        size_t chunk;
        size_t n;                               /* 1 + the shard count of the render parameters */
        struct nftsync_table *t[NFTIR_TABLES_MAX + 1]; /* by table index: 0, then the shards */
        struct nftmsg pend;                     /* a batch begin and the queued messages */
        bool pend_tables[NFTIR_TABLES_MAX + 1]; /* whose messages are in it (for the log) */
        struct nftmsg ids;                      /* only its counter: set ids unique in a transaction */
        uint32_t seq;
        const struct svc **svcs;                /* a full sync's: the model's services in key order */
        uint8_t *shards;                        /* and the shard of each (render_nft_shard()) */
        bool *main_same;                        /* a resync's with shards: struct nftsync_side */
        size_t n_svcs;
};

/* A table's sync, without records. Returns 0 or -ENOMEM. */
int nftsync_table_new(struct nftsync *g, unsigned table, struct nftsync_table **ret);
struct nftsync_table *nftsync_table_free(struct nftsync_table *s);
/* Forgets s's records, owners and waiters (a full sync rebuilds them). */
void nftsync_table_forget(struct nftsync_table *s);

/* Keeps r (may be NULL: the service puts nothing in the table) as its
 * service's record. */
static inline void nftsync_table_keep(struct nftsync_table *s, struct nftsync_rec *r) {
        if (r)
                hmap_put(&s->recs, r->key, r);
}

/* Whether a full sync's i-th service (g->svcs) has objects in s's table:
 * the main table has every service's filter side, a shard only its own
 * services' nat side. */
static inline bool nftsync_table_holds_at(const struct nftsync_table *s, size_t i) {
        return s->table == 0 || s->g->shards[i] == s->table;
}

/* Allocation that cannot fail: as buf, a node proxy short of a few kB
 * cannot go on. */
static inline void *nftsync_xcalloc(size_t n, size_t size) {
        void *p = calloc(n ? n : 1, size);
        if (!p)
                abort();
        return p;
}

static inline char *nftsync_xstrdup(const char *s) {
        char *p = strdup(s);
        if (!p)
                abort();
        return p;
}

/* Makes room in *p (*cap elements of size) for element n. */
static inline void nftsync_grow(void **p, size_t *cap, size_t n, size_t size) {
        if (n < *cap)
                return;
        *cap = *cap ? *cap * 2 : 16;
        void *q = realloc(*p, *cap * size);
        if (!q)
                abort();
        *p = q;
}

static inline double nftsync_now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}
