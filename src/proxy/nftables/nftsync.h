/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * nftables mode's sync: keeps a family's tables ("kube-proxy" and its
 * shards, render/nftir.h) equal to the model, sending the kernel only what
 * changed.
 *
 * A full sync has no records to trust: it reads back what each service's
 * chains hold and writes in place, in bounded transactions, only the
 * chains that differ (flushed and refilled, never deleted while in use),
 * every map element, and the removal of whatever else the table holds; a
 * rebuild writes everything after deleting the table, in one transaction.
 * A resync is a full sync that trusts its records (nobody else changed
 * the table) and sends only what differs from them. A partial sync
 * re-renders the changed services only and sends one transaction with
 * their changed chains, sets and map elements. All keep a compact record
 * of what each service put in the kernel (chain names and digests, set
 * names, element keys) to tell the changes apart.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/nftables/nftsync-stats.h"

struct nftsync;
struct nftables;
struct model;
struct render_params;
struct hmap;
struct inet_cidr;


/* The sync of a family's tables: "kube-proxy" and, with
 * render_params.nft_shards = N > 0, kube-proxy-1 .. -N (render/nftir.h).
 * Each table is synced on its own, shards first, with its own records:
 * the main table's hold every service's filter side, a shard's the nat
 * side of its own services. Their messages share the transactions: a
 * partial sync is one transaction whichever tables it touches, a full
 * sync as few as the size bound allows. nl is borrowed. */
struct nftsync *nftsync_new(uint8_t family, struct nftables *nl);
struct nftsync *nftsync_free(struct nftsync *s);

/* Called after each committed transaction (the daemon reads the change
 * monitor there, so a long full sync never overflows it). */
void nftsync_set_after_commit(struct nftsync *s, void (*fn)(void *userdata), void *userdata);
/* Transactions of a full sync hold at most about this many messages
 * (default 50000; 0: one transaction). */
void nftsync_set_chunk(struct nftsync *s, size_t messages);

/* Returns 0, or a negative errno when a transaction failed (logged with
 * the kernel's reason); the kernel then keeps what the previous
 * transactions left, and the next sync must be a full one. */
int nftsync_full(struct nftsync *s, const struct model *m, const struct render_params *p,
                 const struct inet_cidr *service_cidrs, size_t n_service_cidrs, bool rebuild,
                 struct nftsync_stats *ret);
/* A full sync that trusts the records: every service (and the fixed part)
 * is rendered again and diffed against its record, as a partial sync of
 * everything, and what the table holds that no record wants is removed.
 * Only valid after a successful sync, when nobody else has changed the
 * table since (the daemon's change monitor says so): it catches what the
 * change tracking missed, at the cost of a render and a listing instead of
 * a rewrite of the table. Returns as nftsync_full(). */
int nftsync_resync(struct nftsync *s, const struct model *m, const struct render_params *p,
                   const struct inet_cidr *service_cidrs, size_t n_service_cidrs, struct nftsync_stats *ret);
/* changed: service keys ("ns/name") to re-render; keys no longer in the
 * model are removed. Only valid after a successful full sync. */
int nftsync_partial(struct nftsync *s, const struct model *m, const struct render_params *p,
                    const struct hmap *changed, struct nftsync_stats *ret);
