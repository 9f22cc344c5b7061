/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What a sync did, counted by every part of the nftables sync that sends
 * or reads something (the bottom of its stack: every part may include it).
 */
#include <stdbool.h>
#include <stddef.h>

struct nftsync_stats {
        size_t transactions;
        size_t messages;
        size_t chains_written;          /* created or rewritten */
        size_t chains_kept;             /* full sync: already held what it would write */
        size_t chains_deleted;
        size_t elements_added;
        size_t elements_deleted;
        size_t conflicts;               /* map keys claimed by two services: the first keeps it */
        double kernel_seconds;          /* spent in the kernel's transactions (wall) */
        double list_seconds;            /* full syncs: reading the table (names, chains' rules) */
        bool listed_chains;             /* the names of all its chains were listed (seconds when large) */
};

static inline void nftsync_stats_add(struct nftsync_stats *a, const struct nftsync_stats *b) {
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
