/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Map keys and their owners, per table: a key belongs to the first
 * service that claims it; a second claimant (two services with one
 * external IP and port) is refused with a warning and waits for the key,
 * which it gets when its owner lets go of it.
 */
#include <stddef.h>

#include "util/hmap.h"

struct nftsync_rec;
struct nftsync_stats;
struct nftsync_txn;
struct nftsync_unit;

struct nftsync_owners {
        struct hmap ids;        /* element ids the records hold (nftsync_rec_of_id(): whose) */
        struct hmap waiting;    /* element id -> a waiter: a service refused it */
};

void nftsync_owners_init(struct nftsync_owners *o);
/* Forgets every owner and waiter (a full sync claims them anew). */
void nftsync_owners_forget(struct nftsync_owners *o);

/* Claims u's elements for r, whose elements go at end
 * (nftsync_unit_record()'s). old: r's service's previous elements (id ->
 * its value digest, already released), NULL on a full sync; an element
 * whose value changed is deleted and added, a new one added (t's del_el
 * and add_el). An element another record owns is refused: the service
 * waits for it. */
void nftsync_owner_claim(struct nftsync_owners *o, struct nftsync_rec *r, char *end, const struct nftsync_unit *u,
                         struct nftsync_txn *t, const struct hmap *old, struct nftsync_stats *st);
/* The record that owns the element id, or NULL. */
struct nftsync_rec *nftsync_owner_of(const struct nftsync_owners *o, const char *id);
/* Its owner lets go of the element id. */
void nftsync_owner_release(struct nftsync_owners *o, const char *id);
/* The service (its key, malloc()ed) that waits for the element id, which
 * no longer waits; NULL when none does. */
char *nftsync_owner_take_waiter(struct nftsync_owners *o, const char *id);
