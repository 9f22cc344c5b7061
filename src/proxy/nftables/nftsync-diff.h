/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A service against its record: what changed goes into a transaction, and
 * the service gets a new record. A partial sync is this for the changed
 * services, in one transaction.
 */
#include <stdbool.h>
#include <stddef.h>

#include "proxy/nftables/nftsync-unit.h"

struct buf;
struct hmap;
struct nftsync_pass;
struct nftsync_rec;
struct nftsync_stats;
struct nftsync_table;
struct nftsync_txn;
struct svc;

/* What a run of diffs in one table works with. */
struct nftsync_diff {
        struct nftsync_table *s;
        const struct nftsync_pass *ps;  /* the model and parameters to render from */
        struct nftsync_unit *u;         /* the scratch unit each service is rendered into */
        struct nftsync_txn *t;          /* where the changes go */
        struct buf *released;           /* element ids let go of, one a line */
        struct nftsync_stats *st;
};

/* Diffs d->u (the service's new rendering) against its record old (may
 * be NULL) into d->t, and returns the new record (NULL when the service
 * puts nothing in the table). Element ids old lets go of are appended to
 * d->released. */
struct nftsync_rec *nftsync_diff_service(struct nftsync_diff *d, const char *key, struct nftsync_rec *old);

/* A resync's look at the main table from a shard's pass
 * (nftsync_pass.main_same): a unit for the main-table objects and the
 * main table's records. */
struct nftsync_side {
        struct nftsync_unit u;
        const struct hmap *recs;        /* the main table's */
        bool *same;                     /* per service of the pass */
};

/* Renders the service key into d->u and, unless it is exactly its
 * record, diffs it (nftsync_diff_service()) and replaces the record; with
 * side, also sets side->same[i] (i: the service's place in the pass).
 * known: the service, or NULL to look key up (a key not in the model
 * removes what its record has). recorded, if not NULL, counts the
 * services that had a record. Returns 0 or the renderer's -errno. */
int nftsync_diff_key(struct nftsync_diff *d, const char *key, const struct svc *known, struct nftsync_side *side,
                     size_t i, size_t *recorded);
/* Map keys let go of (d->released) go to the services that were refused
 * them, which are diffed again. Returns as nftsync_diff_key(). */
int nftsync_diff_released(struct nftsync_diff *d);
/* A partial sync of s's table: the changed services (keys) diffed, their
 * changes queued in the family's batch as one piece. Returns 0 or -errno. */
int nftsync_diff_partial(struct nftsync_table *s, const struct nftsync_pass *ps, const struct hmap *changed,
                         struct nftsync_stats *st);
