/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * One table's sync state: "kube-proxy" or a shard (render/nftir.h), with
 * the records of what each service put in it, the owners of its map keys,
 * and the family's batch its transactions go into (borrowed: the family's
 * tables share it, nftsync.c makes both). The parts above (the diff, the
 * full sync, the resync) get a table and what they need of the pass
 * (nftsync-pass.h); none of them sees the family's other tables.
 */
#include <stdint.h>

#include "proxy/nftables/nftsync-owner.h"
#include "proxy/nftables/nftsync-rec.h"
#include "render/nftir.h"
#include "util/hmap.h"

struct nftables;
struct nftsync_batch;

/* The fixed part's record, under a key no service has. */
#define NFTSYNC_FIXED_KEY ""

struct nftsync_table {
        uint8_t family;
        uint16_t table;                 /* render/nftir.h's index */
        char tname[NFTIR_TABLE_NAME_MAX];
        struct nftables *nl;            /* borrowed */
        struct nftsync_batch *batch;    /* borrowed: the family's */
        struct hmap recs;               /* service key -> struct nftsync_rec */
        struct nftsync_owners owners;   /* the map keys the records hold, and who waits for one */
};

/* A table's sync, without records. */
struct nftsync_table *nftsync_table_new(unsigned table, struct nftables *nl, struct nftsync_batch *batch);
struct nftsync_table *nftsync_table_free(struct nftsync_table *s);
/* Forgets s's records, owners and waiters (a full sync rebuilds them). */
void nftsync_table_forget(struct nftsync_table *s);

/* Keeps r (may be NULL: the service puts nothing in the table) as its
 * service's record. */
static inline void nftsync_table_keep(struct nftsync_table *s, struct nftsync_rec *r) {
        if (r)
                hmap_put(&s->recs, r->key, r);
}
