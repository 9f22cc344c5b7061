/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A full sync of one table, with no records to go by: what each service's
 * chains hold is read back from the kernel and only what differs is
 * written.
 */
#include <stdbool.h>

struct nftsync_pass;
struct nftsync_stats;
struct nftsync_table;

/* Makes s's table hold what the pass's model renders for it, in
 * transactions of about the size bound (one with rebuild, which deletes
 * the table first, or with the bound 0), queued in the family's batch;
 * s's records are made anew. Returns 0 or -errno (logged). */
int nftsync_full_table(struct nftsync_table *s, const struct nftsync_pass *ps, bool rebuild,
                       struct nftsync_stats *st);
