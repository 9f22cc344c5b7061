/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Reading chains back from the kernel as digests of their rules
 * (apply/nftables-digest.h), for telling which chains already hold what a
 * sync would write.
 */
#include <stddef.h>
#include <stdint.h>

#include "apply/nftables-digest.h"

struct hmap;
struct nftables;

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
