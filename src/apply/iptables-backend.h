/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The two backends behind the iptables tools: iptables-nft (rules in
 * nf_tables tables named "nat", "filter", "mangle") and iptables-legacy (the
 * kernel's x_tables). Both see every packet, so a node's iptables users
 * must share one or the node carries two rule sets, and rules left in the
 * one nobody reads anymore keep applying. kproxy writes where the node's
 * other agents (kubelet first) already write, the choice upstream's
 * kube-proxy image makes with iptables-wrapper, and runs that backend's tools
 * by their own names (iptables-legacy-restore, ...), whatever the plain
 * names point at.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum iptables_backend {
        IPTABLES_BACKEND_AUTO,          /* as a request only: the one the node uses */
        IPTABLES_BACKEND_NFT,
        IPTABLES_BACKEND_LEGACY,
        _IPTABLES_BACKEND_MAX,
        _IPTABLES_BACKEND_INVALID = -22,
};

/* "auto", "nft", "legacy": the values of --iptables-backend. */
const char *iptables_backend_to_string(enum iptables_backend b);
enum iptables_backend iptables_backend_from_string(const char *s);

enum iptables_tool {
        IPTABLES_TOOL_CMD,              /* iptables */
        IPTABLES_TOOL_SAVE,             /* iptables-save */
        IPTABLES_TOOL_RESTORE,          /* iptables-restore */
        _IPTABLES_TOOL_MAX,
};

/* How kproxy runs one backend's tools. */
struct iptables_tools {
        enum iptables_backend backend;  /* NFT or LEGACY */
        bool plain;                     /* by the plain names (iptables, ...), which are this backend
                                         * here while its own names are not installed */
};

/* The name to run a tool of the family (4 or 6) by: a static string. */
const char *iptables_tool_name(const struct iptables_tools *t, uint8_t family, enum iptables_tool tool);

/* How to run backend b's tools (NFT or LEGACY) on this host: by the
 * backend's own names when iptables-B, iptables-B-save and
 * iptables-B-restore are all in PATH, else by the plain names when those
 * are installed and `iptables --version` says they are b (older or
 * single-backend packagings). Returns 0, or -ENOENT when neither is
 * installed; *ret is written only on success. */
int iptables_tools_find(enum iptables_backend b, struct iptables_tools *ret);

/* The first line `iptables --version` of t prints, into out (len bytes,
 * NUL-terminated). Returns 0 or -errno (-ENOENT: not installed, -EIO: it
 * failed). */
int iptables_tools_version(const struct iptables_tools *t, char *out, size_t len);

/* Which backend the node's other agents write to, as iptables-wrapper
 * decides (kubernetes-sigs/iptables-wrappers): kubelet's KUBE-IPTABLES-HINT
 * or KUBE-KUBELET-CANARY chain in a mangle table, of either family, looked
 * for in nf_tables first, then in legacy; failing that (kproxy's addition,
 * where the old wrapper counted every backend's rules), the other chains
 * kubelet and kube-proxy make (KUBE-KUBELET-CANARY in nat and filter,
 * KUBE-MARK-DROP, KUBE-FIREWALL, iptables mode's fixed chains), nf_tables
 * first; nf_tables when neither holds any. Cheap on a node with a large
 * nf_tables table and never creating a table: nf_tables is asked over
 * netlink for each named chain, one lookup each; a legacy table is read
 * (iptables-legacy-save -t TABLE) only when /proc/net/ip{,6}_tables_names
 * lists it, since asking for one that does not exist creates it. A backend
 * that cannot be looked at counts as holding nothing, as in the wrapper.
 * Writes NFT or LEGACY to *ret and the reason, a sentence for the log,
 * to why. Never fails. */
void iptables_backend_detect(enum iptables_backend *ret, char *why, size_t len);

/* Whether backend b's tables of the family hold iptables mode's chains
 * (kproxy's or kube-proxy's: its fixed chains in mangle, nat and filter;
 * in a legacy table it reads, any chain of its owned prefixes too), looked
 * for as iptables_backend_detect() does: 1, 0, or -errno (cannot tell). */
int iptables_backend_has_proxy(enum iptables_backend b, uint8_t family);

/* Whether the legacy table of the family exists (its module has made it in
 * this network namespace); iptables-legacy creates a table it is asked
 * about, so nothing that only looks may ask about one that does not. */
bool iptables_legacy_table_exists(uint8_t family, const char *table);
