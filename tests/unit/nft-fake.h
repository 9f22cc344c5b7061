/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * An in-memory nf_tables, for unit tests of everything above the netlink
 * link (apply/nftables-link.h): nftables_open_on(nft_fake_open, k, &nl)
 * gives a handle whose batches and dumps this kernel answers as the real
 * one does, in the same netlink messages.
 *
 * It keeps tables, chains (their hooks and rules, as sent), named and
 * anonymous sets and their elements, and the references between them; it
 * applies a batch atomically (every message checked against what the
 * messages before it left; any error, and nothing of the batch stays) and
 * refuses what the kernel refuses: a missing table, chain, set or element
 * (ENOENT), a jump or element to a missing chain, deleting a chain or set
 * still referenced (EBUSY), an element whose key has another value
 * (EBUSY), a base chain re-made with another hook (EEXIST). Failures can
 * be injected. It answers the requests the sync makes: a table (with its
 * count of chains and named sets), the tables, chains and sets of a
 * family, one chain, a chain's rules, the generation.
 *
 * Not modelled: notifications, the kernel's validation of loops and
 * hooks, dumps interrupted by a change, flowtables and objects.
 */
#include <stddef.h>
#include <stdint.h>

struct buf;
struct nftables_link;

struct nft_fake;

struct nft_fake *nft_fake_new(void);
struct nft_fake *nft_fake_free(struct nft_fake *k);

/* The nftables_link_open_fn of the fake: kernel is a struct nft_fake.
 * Each link has a port id of its own. */
int nft_fake_open(void *kernel, size_t rcvbuf, struct nftables_link **ret);

/* The n-th transaction from now (1: the next) fails as a whole, in the
 * commit, with err (the kernel's answer to the batch begin), after every
 * message of it was accepted. */
void nft_fake_fail_commit(struct nft_fake *k, unsigned n, int err);
/* The next message about an object whose name contains what is refused
 * with err (once). */
void nft_fake_fail_object(struct nft_fake *k, const char *what, int err);

/* Committed transactions so far; also the generation (NFT_MSG_GETGEN). */
uint32_t nft_fake_genid(const struct nft_fake *k);
/* Transactions refused (a message or the commit failed). */
size_t nft_fake_refused(const struct nft_fake *k);
/* The messages of one committed transaction (0: the first), or 0 when
 * there is no such transaction. */
size_t nft_fake_txn_messages(const struct nft_fake *k, uint32_t i);

/* What the committed transactions did, one line a message (an element
 * message, a line per element), since the last nft_fake_journal_clear():
 *
 *   add chain ip kube-proxy service-...
 *   add rule ip kube-proxy service-...
 *   flush chain ip kube-proxy service-...      (a rule deletion: "delete rule")
 *   add element ip kube-proxy service-ips 0a60000a... goto service-...
 *   delete element ip kube-proxy service-ips 0a60000a...
 *   flush set ip kube-proxy service-ips
 *
 * Returns it as a NUL-terminated string owned by k. */
const char *nft_fake_journal(const struct nft_fake *k);
void nft_fake_journal_clear(struct nft_fake *k);
/* How many lines of the journal contain what. */
size_t nft_fake_journal_count(const struct nft_fake *k, const char *what);

/* Everything the kernel holds, as text in a canonical order (tables,
 * then their chains and sets by name; a chain's rules in order, anonymous
 * sets as their elements; elements by key), appended to out: two fakes
 * hold the same when their texts are equal. */
void nft_fake_text(const struct nft_fake *k, struct buf *out);

/* Whether the family's table holds the chain (1), or the element with
 * the key (bytes) in the set (1), or not (0); -ENOENT without the table
 * or set. */
int nft_fake_has_chain(const struct nft_fake *k, uint8_t family, const char *table, const char *chain);
int nft_fake_has_elem(const struct nft_fake *k, uint8_t family, const char *table, const char *set,
                      const uint8_t *key, size_t key_len);
/* The number of rules of a chain, or -ENOENT. */
int nft_fake_rules(const struct nft_fake *k, uint8_t family, const char *table, const char *chain);
