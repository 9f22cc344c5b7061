/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * nftables mode's kernel state. For now only its removal: `--cleanup`
 * removes the tables of both modes, and the iptables-mode daemon removes
 * nftables mode's tables at start, as upstream does when switching modes.
 */

/* Deletes the "kube-proxy" table of the ip and ip6 families if present.
 * Returns 0 (also when there was nothing to delete, or nft is missing), or
 * -EIO when nft failed to delete an existing table. */
int nftables_cleanup(void);
