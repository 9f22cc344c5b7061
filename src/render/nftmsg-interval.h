/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Anonymous interval sets of addresses and ranges, for the rules that
 * match a list (render/nftmsg-rule.c).
 */
#include <stdint.h>

struct nftmsg;
struct nftir_stmt;

/* The messages of an anonymous interval set holding s's addresses and
 * ranges (an NFTIR_ADDR_LIST), in table: the set as nft 1.0.6 lays it out
 * (ranges sorted and merged, each as its start and, flagged, its end + 1;
 * the space below the first closed by an end element at 0), then its
 * elements. Returns the set's id, by which the rule that follows refers to
 * it (its name is the kernel's choice). */
uint32_t nftmsg_interval_set(struct nftmsg *m, uint16_t table, const struct nftir_stmt *s);
