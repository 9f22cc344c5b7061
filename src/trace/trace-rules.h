/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The text of the rules a trace names, by their handle: what `nft -a list
 * ruleset` prints for nf_tables' own tables, and for the tables that
 * iptables-nft manages, the rule iptables-nft-save prints at the same
 * place in the chain (nft cannot print those rules' matches and
 * comments); for x_tables' (legacy) tables, iptables-legacy-save's lines
 * by their number in the chain. Read when the trace starts, and again when
 * it names a rule that was not there. Internal to src/trace/.
 */
#include <stdint.h>

struct trace_rules;

/* Returns 0 or -ENOMEM; a tool that is missing leaves its tables' rules
 * unnamed (their handles are printed). */
int trace_rules_load(struct trace_rules **ret);
struct trace_rules *trace_rules_free(struct trace_rules *r);
/* The rule's text, or NULL. */
const char *trace_rules_find(const struct trace_rules *r, uint8_t family, const char *table, const char *chain,
                             uint64_t handle);
/* The text of rule number (from 1) of a legacy (x_tables) chain, as
 * iptables-legacy-save prints it; number 0: the chain's policy ("ACCEPT").
 * NULL when unknown. */
const char *trace_rules_find_xt(const struct trace_rules *r, uint8_t family, const char *table, const char *chain,
                                unsigned number);
