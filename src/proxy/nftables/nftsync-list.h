/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What a full sync and a resync of one table share: listing it, and
 * removing what no record wants.
 */
struct hmap;
struct nftsync_stats;
struct nftsync_table;
struct nftsync_txn;

/* nftables_list() of s's table (chains or sets may be NULL), its time
 * counted in st. */
int nftsync_list_table(struct nftsync_table *s, struct hmap *chains, struct hmap *sets, struct nftsync_stats *st);
/* What the table holds (chains, sets: from nftables_list(), either may be
 * NULL or empty) and no record of s wants, stale or someone else's:
 * flushed in t's body, deleted in its tail. */
void nftsync_list_remove_unwanted(struct nftsync_table *s, const struct hmap *chains, const struct hmap *sets,
                                  struct nftsync_txn *t, struct nftsync_stats *st);
