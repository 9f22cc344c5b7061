/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A model of iptables-restore --noflush over tables of chains of rule
 * texts, for the iptables harness's oracles (fuzz-iptables.c): what the
 * kernel would hold after a restore input, transaction by transaction.
 * A section ("*table" ... "COMMIT") applies whole or not at all, as the
 * tool's. ":NAME ..." creates or flushes a chain; "-A", "-I NAME N",
 * "-D NAME rule", "-X NAME" as the tool's (-X: only an empty chain no rule
 * jumps to). At COMMIT every rule's -j/-g target that names a chain
 * (rm_chain_name() said so) must exist, as iptables-restore refuses a rule
 * jumping to a missing chain, and no jumps may loop (the kernel's ELOOP). Its iptables-save prints rules verbatim.
 */
#include <stdbool.h>
#include <stddef.h>

struct buf;
struct rm_state;

struct rm_state *rm_new(void);
void rm_free(struct rm_state *s);
struct rm_state *rm_copy(const struct rm_state *s);
bool rm_equal(const struct rm_state *a, const struct rm_state *b);

/* A name every -j/-g target is checked against (a user chain's). */
void rm_chain_name(struct rm_state *s, const char *name, size_t len);
/* Every ":NAME" of text as a chain name. */
void rm_chain_names_of(struct rm_state *s, const char *text, size_t len);

/* Applies a restore input: 0; -1 when a transaction failed (those before
 * it stay applied); -2 for text the model does not know (then s is
 * unspecified). */
int rm_apply(struct rm_state *s, const char *text, size_t len);

/* Whether text has the shape kproxy renders: per section, chain
 * declarations, then -A lines of declared chains, then -X of declared
 * chains without rules; each chain declared once, each table in one
 * section, nothing else. */
bool rm_rendered_shape(const char *text, size_t len);

/* iptables-save of one table (empty when there is none). */
void rm_save(const struct rm_state *s, const char *table, struct buf *out);
/* The names of the tables held, each NUL-terminated, back to back. */
void rm_tables(const struct rm_state *s, struct buf *out);
