/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Removing kproxy's nftables tables: `--cleanup` removes the tables of
 * both modes, and each mode's daemon removes the other's at start, as
 * upstream.
 */
#include <stdint.h>

struct nftables;

/* Deletes kproxy's tables of the ip and ip6 families ("kube-proxy" and its
 * shards, render/nftir.h) if present. Returns 0 (also when there was
 * nothing to delete), or -errno when an existing table could not be
 * deleted (logged). */
int nftables_cleanup(void);
/* Deletes the family's kproxy tables of index from and above (logged).
 * Returns 0 or -errno. */
int nftables_drop_tables(struct nftables *n, uint8_t family, unsigned from);
