/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A full sync of one table, with no records to go by: what each service's
 * chains hold is read back from the kernel and only what differs is
 * written. And what a full sync and a resync share: listing the table,
 * and removing what no record wants.
 */
#include <stdbool.h>
#include <stddef.h>

struct hmap;
struct inet_cidr;
struct model;
struct nftsync_stats;
struct nftsync_table;
struct nftsync_txn;
struct render_params;

/* Makes s's table hold what m renders for it, in transactions of about
 * the size bound (one with rebuild, which deletes the table first, or
 * with the bound 0), queued in the family's batch; s's records are made
 * anew. Returns 0 or -errno (logged). */
int nftsync_full_table(struct nftsync_table *s, const struct model *m, const struct render_params *p,
                       const struct inet_cidr *service_cidrs, size_t n_service_cidrs, bool rebuild,
                       struct nftsync_stats *st);

/* nftables_list() of s's table, its time counted in st. */
int nftsync_full_list(struct nftsync_table *s, struct hmap *chains, struct hmap *sets, struct nftsync_stats *st);
/* What the table holds (chains, sets: from nftables_list(), either may be
 * NULL or empty) and no record of s wants, stale or someone else's:
 * flushed in t's body, deleted in its tail. */
void nftsync_full_remove_unwanted(struct nftsync_table *s, const struct hmap *chains, const struct hmap *sets,
                                  struct nftsync_txn *t, struct nftsync_stats *st);
