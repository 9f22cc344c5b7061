/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Transactions: a table's messages in the sections that keep the
 * kernel's reference checks happy, queued into the family's batch (shared
 * by its tables), which goes to the kernel as one transaction once it
 * holds enough. The batch is this file's: the tables hold a pointer to it,
 * and nothing here knows a table beyond its index.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "render/nftir.h"
#include "render/nftmsg.h"

struct nftables;
struct nftsync_stats;

/* The family's batch: every commit costs the kernel a walk over every
 * chain of the network namespace (nf_tables_commit makes each chain's
 * next rule generation current: 12 ms at 200k empty chains, measured), so
 * the tables' pieces go out in as few transactions as the size bound
 * allows, not one or more per table. */
struct nftsync_batch {
        uint8_t family;
        struct nftables *nl;                    /* borrowed */
        size_t chunk;                           /* a full sync's size bound (messages; 0: one) */
        void (*after_commit)(void *);
        void *after_commit_ud;
        struct nftmsg pend;                     /* a batch begin and the queued messages */
        bool pend_tables[NFTIR_TABLES_MAX + 1]; /* whose messages are in it (for the log) */
        struct nftmsg ids;                      /* only its counter: set ids unique in a transaction */
        uint32_t seq;
};

/* The sections of one table's part of a transaction, in commit order. */
struct nftsync_txn {
        struct nftmsg head;     /* table, fixed sets */
        struct nftmsg body;     /* per service: flushes, sets, chains, rules */
        struct nftmsg del_el, add_el, tail;
};

void nftsync_batch_init(struct nftsync_batch *b, uint8_t family, struct nftables *nl, size_t chunk);
void nftsync_batch_done(struct nftsync_batch *b);

/* Empty sections for table (render/nftir.h's index); their sets are
 * numbered in the batch's count of set ids. */
void nftsync_txn_init(struct nftsync_txn *t, struct nftsync_batch *b, unsigned table);
void nftsync_txn_clear(struct nftsync_txn *t);
void nftsync_txn_done(struct nftsync_txn *t);
/* Its messages, all sections. */
size_t nftsync_txn_size(const struct nftsync_txn *t);

/* The size bound of a full sync's or a resync's transactions over a table
 * of about n chains and sets. */
size_t nftsync_txn_chunk(const struct nftsync_batch *b, size_t n);

/* Queues t's messages (emptying t) in the batch, which is sent once it
 * holds limit messages or more (0: only by nftsync_txn_send()). A
 * transaction never splits t. Returns 0 or nftsync_txn_send()'s error. */
int nftsync_txn_queue(struct nftsync_batch *b, struct nftsync_txn *t, size_t limit, struct nftsync_stats *st);
/* The batch, ready for table's messages (a batch begin first). */
struct nftmsg *nftsync_txn_pending(struct nftsync_batch *b, unsigned table);
/* Sends the queued messages as one transaction (nothing when none are
 * queued), counting it in st. Returns 0, or the kernel's error (logged,
 * with the tables the transaction touched). */
int nftsync_txn_send(struct nftsync_batch *b, struct nftsync_stats *st);
/* Forgets the queued messages; release: and the batch's memory (a full
 * sync's fills megabytes). */
void nftsync_txn_reset(struct nftsync_batch *b, bool release);
