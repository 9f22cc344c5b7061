/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Full syncs that write only the chains the kernel does not already hold.
 * A full sync must repair whatever anyone changed, so upstream rewrites
 * every chain; over a loaded table that costs the kernel a walk of the
 * whole table per commit (100 s at 20k services x 10 endpoints). kproxy
 * reads the tables anyway (for the owned chains and jump rules); this
 * keeps, per chain, a digest of the rules it last wrote and a digest of the
 * same chain as the kernel held it after that write: of its rules as
 * nf_tables dumps them (apply/nftables.h's canonical digest, counters left
 * out) where the tools are iptables-nft, else of iptables-save's lines.
 * A chain whose rendered rules are the ones last written and whose kernel
 * digest is still the one seen then is left out of the restore; any other
 * chain, changed by kproxy or by someone else, is written whole.
 *
 * Digests are 64-bit FNV-1a; a chain is found by a digest of its table and
 * name, in a sorted vector (24 bytes a chain).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf;
struct iptables_known;

/* netlink: kernel digests come from iptables_known_observe_digest(), else
 * from iptables_known_observe(); the two never match each other. */
struct iptables_known *iptables_known_new(bool netlink);
void iptables_known_free(struct iptables_known *k);

/* What the kernel holds now: one table's iptables-save text, or one chain's
 * digest of its nf_tables rules. Observations add up until the next commit
 * or learn. */
void iptables_known_observe(struct iptables_known *k, const char *table, const char *saved, size_t len);
void iptables_known_observe_digest(struct iptables_known *k, const char *table, const char *chain,
                                   uint64_t digest);

/* Appends to out the full restore input minus the chains (declaration and
 * rules) known to be in the kernel as rendered. Returns how many were left
 * out (none without observations); when none, out gets nothing: the input
 * goes as it is (a cold start's, tens of megabytes, is not copied). */
size_t iptables_known_rewrite(struct iptables_known *k, const char *input, size_t len, struct buf *out);

/* The same for one more part of a sync sent in parts (each part's chains
 * declared in that part only): what earlier parts marked since the last
 * commit is kept, and the commit covers them all. */
size_t iptables_known_rewrite_more(struct iptables_known *k, const char *input, size_t len, struct buf *out);

/* The last rewrite's output was restored: remember the rendered digest of
 * every chain its input declared. Those left out keep the kernel digest
 * observed; those written are unknown until learned. Drops the
 * observations. */
void iptables_known_commit(struct iptables_known *k);

/* Learns the kernel digest of the chains written by the last commit from
 * fresh observations (iptables_known_observe after the restore). Returns
 * how many were learned; drops the observations. */
size_t iptables_known_learn(struct iptables_known *k);

/* How many chains the last commit wrote (their kernel digest unknown). */
size_t iptables_known_unlearned(const struct iptables_known *k);

/* Chains named in a restore input sent outside full syncs (declared, or
 * with -A, -D, -I, -X lines) are no longer known. */
void iptables_known_touch(struct iptables_known *k, const char *input, size_t len);

/* Forgets everything (a failed restore: the kernel's state is unknown). */
void iptables_known_forget(struct iptables_known *k);

/* The known chains in a file that outlives the process, so that a restart
 * writes only the chains that changed (over a loaded table every restore
 * costs the kernel a walk of the table). An entry says "these rule lines,
 * written, made the kernel print that"; a chain is left out only while the
 * kernel prints it as it did then, so a stale, older or foreign file can
 * make kproxy write a chain again but never leave out one the kernel does
 * not hold as rendered.
 *
 * save writes the entries whose kernel print is known (a temporary file
 * renamed over path). load replaces k's entries with the file's, and
 * returns how many, -ENOENT without a file, -ESTALE for a file of the
 * other kind of kernel digests, -EBADMSG for a file that is not one of
 * these whole (k is then left as it was), or another -errno. */
int iptables_known_save(const struct iptables_known *k, const char *path);
int iptables_known_load(struct iptables_known *k, const char *path);
/* The file of family 4 or 6 in state_dir, into out; false when state_dir
 * is NULL or empty, or the path does not fit. */
bool iptables_known_file(const char *state_dir, unsigned family, char *out, size_t len);
