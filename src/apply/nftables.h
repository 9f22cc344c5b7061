/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * nftables mode's side effects, over nf_tables netlink: committing a batch
 * (render/nftmsg.c builds it) as one transaction, listing what the
 * tables hold ("kube-proxy" and its shards), watching them for changes made by anyone else,
 * and removal (`--cleanup` removes the tables of both modes; each mode's
 * daemon removes the other's at start, as upstream).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/fnv.h"

struct nftmsg;
struct hmap;
struct nlmsghdr;
struct nftables;

int nftables_open(struct nftables **ret);
struct nftables *nftables_close(struct nftables *n);

/* The netlink port id the kernel stamps on notifications of our changes. */
uint32_t nftables_portid(const struct nftables *n);

/* Commits m, which must be one whole batch (nftmsg_batch_begin() ... end()),
 * as one transaction: all or nothing. Returns 0, or the error of the first
 * failing message (its type and object name and the kernel's message, if
 * any, are written to err, a buffer of errlen bytes). */
int nftables_commit(struct nftables *n, const struct nftmsg *m, char *err, size_t errlen);

/* What a table of the family holds: its chains (name -> the same
 * string) and its named sets (name -> struct nftables_set); either map may
 * be NULL, not to list those. Both maps own their values: release them
 * with nftables_names_done(). Returns 0, -ENOENT when there is no table,
 * or another -errno. Listing chains is a dump that the kernel walks from
 * the table's first chain for every message: seconds at 20k services. */
struct nftables_set {
        uint64_t timeout_ms;    /* 0: none */
        char name[];
};
int nftables_list(struct nftables *n, uint8_t family, const char *table, struct hmap *ret_chains,
                  struct hmap *ret_sets);
void nftables_names_done(struct hmap *names);
/* What the named chains of a table of the family hold, as digests
 * of their rules (nftables_rule_msg_digest()), for telling which chains already
 * hold what a sync would write: chain name -> struct nftables_chain_digest,
 * for the chains that exist. The lookups go in rounds of many, then one
 * dump of rules per chain: a dump of the whole table would cost the kernel
 * a walk from its first rule for every message buffer, quadratic in the
 * rules (a minute at 20k services × 10 endpoints), and a socket runs one
 * dump at a time. Adds to ret (what it added stays on an error; release
 * with nftables_names_done()). Returns 0 or -errno (-EINTR: the table
 * changed meanwhile). */
struct nftables_chain_digest {
        uint64_t digest;
        uint64_t spec;          /* nftables_chain_spec() of the chain as the kernel has it */
        char name[];
};
int nftables_rule_digests(struct nftables *n, uint8_t family, const char *table, const char *const *names,
                          size_t n_names, struct hmap *ret);
/* The same, also calling fn for each chain a rule of the chains read jumps
 * or goes to (once per such rule; fn may be NULL). */
typedef void (*nftables_target_fn)(const char *chain, void *userdata);
int nftables_rule_digests_walk(struct nftables *n, uint8_t family, const char *table, const char *const *names,
                               size_t n_names, struct hmap *ret, nftables_target_fn fn, void *userdata);
/* The size of the messages nftables_rule_digests() reads (the kernel
 * sizes its dump messages by the largest read on the socket, up to 32 KB):
 * 8 KB unless set before the first call. Within one chain a dump costs the
 * kernel a walk past the rules already sent for every message: iptables
 * mode's top-level chains, a rule per service port, read in 32 KB took
 * less than half as long as in 8 KB (0.20 s against 0.45 s at 20k
 * services), and the whole table 3.3 s against 3.8 s; nftables mode's
 * small chains read as fast or slightly faster in 8 KB. */
void nftables_set_dump_messages(struct nftables *n, size_t bytes);
/* Calls fn for each chain a rule message's immediate verdicts jump or go to. */
void nftables_rule_targets(const struct nlmsghdr *nlh, nftables_target_fn fn, void *userdata);
/* The digest of one rule message (NFT_MSG_NEWRULE: its expressions and
 * user data), as kproxy sends it or the kernel dumps it, folded into h
 * (start with NFTABLES_DIGEST_INIT). Of a canonical form: nested
 * attributes count without their NLA_F_NESTED flag, which the kernel's
 * dumps leave out, an expression's attributes in type order, without what
 * the kernel adds to a dump; so a rule as kproxy encodes it and as the
 * kernel dumps it have one digest when they are the same rule. */
#define NFTABLES_DIGEST_INIT FNV64_INIT
uint64_t nftables_rule_msg_digest(uint64_t h, const struct nlmsghdr *nlh);
/* What a chain message (NFT_MSG_NEWCHAIN, kproxy's or the kernel's reply)
 * says of the chain itself: 1 for a regular chain, else a digest of its
 * hook, priority, type and policy (accept when not given). Never 0. */
uint64_t nftables_chain_spec(const struct nlmsghdr *nlh);

/* Whether a chain of any nf_tables table of the family exists (iptables-nft's
 * "nat", "filter", "mangle" among them): 1, 0 (no such chain or table), or
 * -errno. One lookup, where a dump of chains would list every table's. */
int nftables_chain_present(struct nftables *n, uint8_t family, const char *table, const char *chain);

/* Watching the table: a socket subscribed to nf_tables' notifications. */
enum nftables_event {
        NFTABLES_EVENT_FOREIGN,         /* someone else changed the family's table */
        NFTABLES_EVENT_LOST,            /* notifications were dropped: anything may have changed */
};
typedef void (*nftables_event_fn)(void *userdata, enum nftables_event ev, uint8_t family, const char *what);
struct nftables_monitor;

/* Opens the monitor; changes made through n (its port id) are ours and
 * not reported. Returns 0 or -errno. */
int nftables_monitor_open(const struct nftables *n, nftables_event_fn fn, void *userdata,
                          struct nftables_monitor **ret);
struct nftables_monitor *nftables_monitor_close(struct nftables_monitor *m);
int nftables_monitor_fd(const struct nftables_monitor *m);
/* Reads every pending notification, calling fn for those that matter. */
void nftables_monitor_drain(struct nftables_monitor *m);
/* Stops (on false) or resumes notifications. The kernel builds one for
 * every object a transaction touches while anyone listens, a quarter of
 * the cost of loading a large table; nftables_genid() tells whether anyone
 * else committed meanwhile. Returns 0 or -errno. */
int nftables_monitor_listen(struct nftables_monitor *m, bool on);
/* The ruleset generation: every committed transaction, anyone's, adds one. */
int nftables_genid(struct nftables *n, uint32_t *ret);

/* Deletes kproxy's tables of the ip and ip6 families ("kube-proxy" and its
 * shards, render/nftir.h) if present. Returns 0 (also when there was
 * nothing to delete), or -errno when an existing table could not be
 * deleted (logged). */
int nftables_cleanup(void);
/* Deletes the family's kproxy tables of index from and above (logged).
 * Returns 0 or -errno. */
int nftables_drop_tables(struct nftables *n, uint8_t family, unsigned from);
/* How many chains and named sets a table of the family holds (the
 * kernel's count of its objects, asked in one request; 6.18 does not count
 * the anonymous sets of rules).
 * Returns 0, -ENOENT without the table, or another -errno. */
int nftables_table_use(struct nftables *n, uint8_t family, const char *table, uint32_t *ret);
/* Whether the family's kube-proxy table exists. */
bool nftables_table_present(uint8_t family);
