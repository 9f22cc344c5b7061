/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Asking nf_tables what it holds: a table's chains and named sets, whether
 * a chain exists, how many objects a table counts, the ruleset's
 * generation.
 */
#include <stdbool.h>
#include <stdint.h>

struct hmap;
struct nftables;

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
/* Frees every value of names (nftables_list()'s and
 * nftables_rule_digests()'s maps) and the map itself. */
void nftables_names_done(struct hmap *names);

/* Whether a chain of any nf_tables table of the family exists (iptables-nft's
 * "nat", "filter", "mangle" among them): 1, 0 (no such chain or table), or
 * -errno. One lookup, where a dump of chains would list every table's. */
int nftables_chain_present(struct nftables *n, uint8_t family, const char *table, const char *chain);

/* How many chains and named sets a table of the family holds (the
 * kernel's count of its objects, asked in one request; 6.18 does not count
 * the anonymous sets of rules).
 * Returns 0, -ENOENT without the table, or another -errno. */
int nftables_table_use(struct nftables *n, uint8_t family, const char *table, uint32_t *ret);

/* The ruleset generation: every committed transaction, anyone's, adds one. */
int nftables_genid(struct nftables *n, uint32_t *ret);

/* Whether the family's kube-proxy table exists (on a socket of its own). */
bool nftables_table_present(uint8_t family);
