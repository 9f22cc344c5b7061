/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Transactions: a table's messages in the sections that keep the
 * kernel's reference checks happy, queued into the family's batch (shared
 * by its tables), which goes to the kernel as one transaction once it
 * holds enough.
 */
#include <stdbool.h>
#include <stddef.h>

#include "render/nftmsg.h"

struct nftsync;
struct nftsync_stats;
struct nftsync_table;

/* The sections of one table's part of a transaction, in commit order. */
struct nftsync_txn {
        struct nftmsg head;     /* table, fixed sets */
        struct nftmsg body;     /* per service: flushes, sets, chains, rules */
        struct nftmsg del_el, add_el, tail;
};

/* Empty sections for s's table; their sets are numbered in the family's
 * count of set ids. */
void nftsync_txn_init(struct nftsync_txn *t, struct nftsync_table *s);
void nftsync_txn_clear(struct nftsync_txn *t);
void nftsync_txn_done(struct nftsync_txn *t);
/* Its messages, all sections. */
size_t nftsync_txn_size(const struct nftsync_txn *t);

/* The size bound of a full sync's or a resync's transactions over a table
 * of about n chains and sets. */
size_t nftsync_txn_chunk(const struct nftsync_table *s, size_t n);

/* Queues t's messages (emptying t) in the family's batch, which is sent
 * once it holds limit messages or more (0: only by nftsync_txn_send()).
 * A transaction never splits t. Returns 0 or nftsync_txn_send()'s error. */
int nftsync_txn_queue(struct nftsync_table *s, struct nftsync_txn *t, size_t limit, struct nftsync_stats *st);
/* The family's batch, ready for s's messages (a batch begin first). */
struct nftmsg *nftsync_txn_pending(struct nftsync_table *s);
/* Sends the queued messages as one transaction (nothing when none are
 * queued), counting it in st. Returns 0, or the kernel's error (logged,
 * with the tables the transaction touched). */
int nftsync_txn_send(struct nftsync *g, struct nftsync_stats *st);
/* Forgets the queued messages; release: and the batch's memory (a full
 * sync's fills megabytes). */
void nftsync_txn_reset(struct nftsync *g, bool release);
