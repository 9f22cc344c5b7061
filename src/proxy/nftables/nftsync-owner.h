/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Map keys and their owners: a key belongs to the first service that
 * claims it; a second claimant (two services with one external IP and
 * port) is refused with a warning and waits for the key, which it gets
 * when its owner lets go of it.
 */
#include <stddef.h>

struct hmap;
struct nftsync_rec;
struct nftsync_stats;
struct nftsync_table;
struct nftsync_txn;
struct nftsync_unit;

/* Claims u's elements for r, whose elements go at end
 * (nftsync_unit_record()'s). old: r's service's previous elements (id ->
 * its value digest, already let go of in s's owners), NULL on a full
 * sync; an element whose value changed is deleted and added, a new one
 * added (t's del_el and add_el). An element another record owns is
 * refused: the service waits for it. */
void nftsync_owner_claim(struct nftsync_table *s, struct nftsync_rec *r, char *end, const struct nftsync_unit *u,
                         struct nftsync_txn *t, const struct hmap *old, struct nftsync_stats *st);
/* The service (its key, malloc()ed) that waits for the element id, which
 * no longer waits; NULL when none does. */
char *nftsync_owner_take_waiter(struct nftsync_table *s, const char *id);
/* Forgets s's owners and waiters. */
void nftsync_owner_forget(struct nftsync_table *s);
