/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What rule and chain messages say, in a form that compares: digests of
 * rules that a rule as kproxy encodes it and as the kernel dumps it share,
 * a chain's hook in one number, and the chains a rule jumps to. Pure.
 */
#include <stdint.h>

#include "util/fnv.h"

struct nlmsghdr;

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

/* Calls fn for each chain a rule message's immediate verdicts jump or go to. */
typedef void (*nftables_target_fn)(const char *chain, void *userdata);
void nftables_rule_targets(const struct nlmsghdr *nlh, nftables_target_fn fn, void *userdata);
