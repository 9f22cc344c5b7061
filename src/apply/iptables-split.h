/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Cuts a large iptables-restore --noflush input into smaller ones that,
 * restored one after the other, leave the kernel with what the whole input
 * gives. Why: iptables-nft-restore's --noflush mode is quadratic in the size
 * of its input (1.8.9: 4.5 s for 1k services x 10 endpoints, 19 s for 2k,
 * 130 s for 5k), while many small runs are linear (5k x 10: 4.8 s).
 *
 * The order keeps every step safe for traffic: a chain is written no earlier
 * than the chains it jumps to (endpoint chains, then service chains, then
 * their external and firewall chains, then KUBE-SERVICES and the other
 * top-level chains), and the chains the input deletes (-X) are flushed and
 * deleted last, once nothing jumps to them. Each piece is one transaction;
 * between pieces every rule in the kernel jumps to a chain that exists and
 * holds either its old or its new rules.
 */
#include <stddef.h>

/* Called with each piece, in order; a negative return stops the split and
 * is returned. The piece is a complete restore input ("*table" ... "COMMIT"). */
typedef int (*iptables_split_fn)(const char *piece, size_t len, void *userdata);

/* Splits input into pieces of about max_lines lines (a chain with more rules
 * gets a piece of its own). A table section holding anything but chain
 * declarations, -A and -X lines is passed whole. Returns 0, the callback's
 * negative return, or -EINVAL for input that is not restore text (no piece
 * passed then). */
int iptables_split(const char *input, size_t len, size_t max_lines, iptables_split_fn fn, void *userdata);
