/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * iptables mode's own chains by name: the fixed ones each table always has
 * (whatever the services), and which chains are iptables mode's to remove.
 * Both the rule writer (apply/iptables.c) and the backend detection
 * (apply/iptables-backend.c, which looks for them as marks of iptables
 * mode) read them, so they stand below both.
 */
#include <stdbool.h>
#include <stddef.h>

/* The chains iptables mode always has in a table ("nat", "filter",
 * "mangle"), whatever the services: the marks of its rules. NULL and
 * *ret_n 0 for another table. */
const char *const *iptables_fixed_chains(const char *table, size_t *ret_n);

/* Whether --cleanup removes this chain of this table ("nat", "filter",
 * "mangle"): kube-proxy's chains, not kubelet's KUBE-FIREWALL. */
bool iptables_chain_is_proxys(const char *table, const char *chain);
