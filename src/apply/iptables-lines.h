/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Reading iptables-restore and iptables-save text in place, a line at a
 * time, without copying: what apply/iptables-delta.c and
 * apply/iptables-known.c both need.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct iptables_line {
        const char *p;
        size_t len;             /* without the newline */
};

/* The next line of [*p, end) into *l; false at the end. */
bool iptables_line_next(const char **p, const char *end, struct iptables_line *l);
/* Whether the line starts with s (":" "*" "-A " ...), or is exactly "COMMIT". */
bool iptables_line_starts(const struct iptables_line *l, const char *s);
bool iptables_line_is_commit(const struct iptables_line *l);
/* The chain a ":NAME ..." (skip 1) or "-A NAME ..." (skip 3) line names:
 * *ret and the returned length. */
size_t iptables_line_chain(const struct iptables_line *l, size_t skip, const char **ret);

/* Whether a chain belongs to one service port (KUBE-SVC-, KUBE-SVL-,
 * KUBE-EXT-, KUBE-FW-, KUBE-SEP-): upstream's owned prefixes. */
bool iptables_chain_owned(const char *name, size_t n);

