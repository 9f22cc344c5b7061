/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The nf_tables readers in the order the nft-dump harness runs them, on a
 * handle whatever its link: the harness's link replays the input, and the
 * seed maker's (tests/fuzz/seeds/seeds-nft.c) records what the unit
 * tests' in-memory kernel answers, so its records replay exactly.
 */
#include <stdint.h>

struct nftables;

/* mode bit 0: IPv6 (else IPv4); bit 1: chain dumps in 32 KiB reads. */
void nft_readers_run(struct nftables *n, uint8_t mode);
