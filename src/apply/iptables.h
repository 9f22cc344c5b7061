/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The only code that changes iptables (with apply/exec). Per IP family:
 * reading what is there (over nf_tables netlink, or iptables-save), the
 * jump rules from the built-in chains, the canary chains, restoring a
 * rendered ruleset in one transaction (iptables-restore --noflush
 * --counters, as upstream), and --cleanup. Every function runs the tools
 * of the backend it is given (apply/iptables-backend.h).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apply/iptables-backend.h"
#include "apply/iptables-chains.h"

struct buf;
struct hmap;

/* Reads the kernel's rules for the family. Fills *existing (names owned by
 * *ret_names; free both with iptables_names_free) with nat chains that have
 * upstream's owned prefixes (KUBE-SVC-, KUBE-SVL-, KUBE-EXT-, KUBE-FW-,
 * KUBE-SEP-), and *ret_jumps_ok with whether every jump rule from the
 * built-in chains is in place; passes what it read to known (may be NULL).
 *
 * With nl and t the nf_tables backend, over nf_tables netlink, one rule
 * dump per chain (linear: 4 s at 20k services x 10 endpoints, where
 * iptables-save takes 15 s): in nat, the jump graph from the built-in and
 * fixed chains, depth by depth; if the table holds more chains than that
 * reached (one nothing jumps to: a failed sync's, someone else's), every
 * owned chain it lists too (a dump that costs the kernel a walk of the
 * family's chains per message, seconds at 20k); filter's fixed chains;
 * the jump rules from `iptables -S` of each built-in chain. Otherwise
 * (legacy tables are invisible to netlink): iptables-save of nat and filter.
 * Returns 0 or -errno (a read failed). */
struct iptables_known;
struct nftables;
int iptables_scan(const struct iptables_tools *t, struct nftables *nl, uint8_t family, struct hmap *existing,
                  char **ret_names, bool *ret_jumps_ok, struct iptables_known *known);
/* What the kernel holds after input (a restore input) was applied, into
 * known: with nl and t the nf_tables backend, the chains input declares;
 * otherwise, the nat and filter tables whole (iptables-save). Returns 0 or
 * -errno. */
int iptables_observe(const struct iptables_tools *t, struct nftables *nl, uint8_t family, const char *input,
                     size_t len, struct iptables_known *known);
void iptables_names_free(struct hmap *existing, char *names);

/* Creates kproxy's top-level chains and inserts the missing jump rules at
 * the head of the built-in chains (docs/reference/iptables-mode.md §2), as
 * upstream does on every full sync. Returns 0 or -errno (a tool failed;
 * logged). */
int iptables_ensure_jumps(const struct iptables_tools *t, uint8_t family);

/* Applies a restore input. Into empty tables, up to 2 *
 * IPTABLES_RESTORE_PIECE_LINES lines are one transaction and a larger input
 * (a first sync) is restored in pieces of that many lines
 * (apply/iptables-split.h), each a transaction that leaves traffic working.
 * When loaded, the kernel already holds about as much, and every commit
 * costs it a walk of the whole table: up to 2 * IPTABLES_RESTORE_LOADED_LINES
 * lines are one transaction (any partial sync), larger inputs go in fewer,
 * larger pieces. On failure, logs the tool's complaint with the offending
 * input lines and returns -EIO; the kernel keeps the rules it had before the
 * failed transaction (earlier pieces stay applied; the caller's next full
 * sync completes the job). */
#define IPTABLES_RESTORE_PIECE_LINES 1000
#define IPTABLES_RESTORE_LOADED_LINES 3000
int iptables_restore(const struct iptables_tools *t, uint8_t family, const char *input, size_t len, bool loaded);
/* The same with another piece size (tests). */
int iptables_restore_split(const struct iptables_tools *t, uint8_t family, const char *input, size_t len,
                           size_t max_lines);

/* KUBE-PROXY-CANARY in mangle, nat and filter: created empty; gone means a
 * third party flushed the tables and a full resync is needed. */
int iptables_canary_ensure(const struct iptables_tools *t, uint8_t family);
bool iptables_canary_present(const struct iptables_tools *t, uint8_t family);

/* Removes every jump rule and chain kproxy (or kube-proxy) made in the
 * family's tables of t's backend; a legacy table that does not exist is
 * left alone, not made. Idempotent. Returns how many chains it removed, or
 * -errno. */
int iptables_cleanup(const struct iptables_tools *t, uint8_t family);
/* The same in backend b's tables when iptables_backend_has_proxy() finds
 * iptables mode's chains there (or cannot tell), with b's tools; logs what
 * it removed. For --cleanup and for a switch from the other backend or
 * mode. Returns how many chains it removed; 0 when there was nothing to
 * do, or when b could not be looked at and its tools are missing or fail
 * too (a warning); -ENOENT when b holds such chains but its tools are not
 * installed (logged); or the tools' -errno when b holds such chains. */
int iptables_cleanup_backend(enum iptables_backend b, uint8_t family);
