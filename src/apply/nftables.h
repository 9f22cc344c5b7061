/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * nftables mode's kernel state: applying a rendered script, checking the
 * table is still there, and removal (`--cleanup` removes the tables of both
 * modes; each mode's daemon removes the other's at start, as upstream).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Deletes the "kube-proxy" table of the ip and ip6 families if present.
 * Returns 0 (also when there was nothing to delete, or nft is missing), or
 * -EIO when nft failed to delete an existing table. */
int nftables_cleanup(void);

/* Replaces the family's kube-proxy table with script (render_nftables()'s
 * output) in ONE nft transaction: "add table; delete table; <script>", so
 * the kernel switches from the old ruleset to the new one atomically.
 * This is the interim apply path (a whole-table rewrite through `nft -f`);
 * issue 5's in-process netlink deltas replace it. Returns 0 or -EIO (the
 * old table stays; nft's complaint is logged). */
int nftables_apply(uint8_t family, const char *script, size_t len);
/* Whether the family's kube-proxy table exists (someone may flush it). */
bool nftables_table_present(uint8_t family);
