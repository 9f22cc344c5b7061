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

struct buf;

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

/* The table, chain declaration and COMMIT lines of a restore input, into
 * out: what says which chains it writes, in a tenth of the size. */
void iptables_lines_declarations(const char *input, size_t len, struct buf *out);

/* The lines of a restore input that declare or fill a chain owned by one
 * service port (iptables_chain_owned), or a chain of kproxy's that those
 * jump to (KUBE-MARK-MASQ), into out, each section that has any with its
 * table line and COMMIT: the services' own chains without the top-level
 * ones that jump to them. Targets are found in the same table only
 * (owned chains are all in nat). */
void iptables_lines_owned(const char *input, size_t len, struct buf *out);

/* Whether a chain belongs to one service port (KUBE-SVC-, KUBE-SVL-,
 * KUBE-EXT-, KUBE-FW-, KUBE-SEP-): upstream's owned prefixes. */
bool iptables_chain_owned(const char *name, size_t n);

