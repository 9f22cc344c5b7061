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
struct model;
struct nftsync_rec;
struct nftsync_stats;
struct nftsync_table;
struct nftsync_txn;
struct render_params;
struct svc;

/* Diffs u (the service's new rendering) against its record old (may be
 * NULL) into t, and returns the new record (NULL when the service puts
 * nothing in the table). Element ids old lets go of are appended to
 * released, one a line. */
struct nftsync_rec *nftsync_diff_service(struct nftsync_table *s, const char *key, struct nftsync_rec *old,
                                         const struct nftsync_unit *u, struct nftsync_txn *t, struct buf *released,
                                         struct nftsync_stats *st);

/* A resync's look at the main table from the shards' passes: a shard's
 * render of a service holds the service's main-table objects too, so
 * they are compared with its main-table record there, and the main
 * table's pass leaves out the services found the same, instead of
 * rendering every service a second time. Only the main table's pass
 * changes its records, so what was compared still holds then. */
struct nftsync_side {
        struct nftsync_unit u;
        const struct hmap *recs;        /* the main table's */
        bool *same;                     /* per service of the full sync (g->svcs) */
};

/* Renders the service key from m into u and, unless it is exactly its
 * record, diffs it (nftsync_diff_service()) and replaces the record; with
 * side, also sets side->same[i] (i: the service's place in g->svcs).
 * known: the service, or NULL to look key up (a key not in the model
 * removes what its record has). recorded, if not NULL, counts the
 * services that had a record. Returns 0 or the renderer's -errno. */
int nftsync_diff_key(struct nftsync_table *s, const struct model *m, const struct render_params *p, const char *key,
                     const struct svc *known, struct nftsync_unit *u, struct nftsync_side *side, size_t i,
                     struct nftsync_txn *t, struct buf *released, struct nftsync_stats *st, size_t *recorded);
/* Map keys let go of (released: ids, one a line) go to the services
 * that were refused them, which are diffed again. Returns as
 * nftsync_diff_key(). */
int nftsync_diff_released(struct nftsync_table *s, const struct model *m, const struct render_params *p,
                          struct nftsync_unit *u, struct nftsync_txn *t, struct buf *released,
                          struct nftsync_stats *st);
/* A partial sync of s's table: the changed services (keys) diffed, their
 * changes queued in the family's batch as one piece. Returns 0 or -errno. */
int nftsync_diff_partial(struct nftsync_table *s, const struct model *m, const struct render_params *p,
                         const struct hmap *changed, struct nftsync_stats *st);
