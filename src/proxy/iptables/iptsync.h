/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * iptables mode's sync of one family, as nftsync is nftables mode's: it
 * keeps what the kernel holds equal to the model with one
 * iptables-restore transaction per sync (in pieces when large), and keeps
 * between syncs what lets it send less:
 *
 *  - each service's own nat chains as the last sync wrote them (the
 *    renderer's record), so a partial sync deletes the chains a changed
 *    service no longer uses;
 *  - the top-level chains as the last sync left them (apply/iptables-delta.h),
 *    so a partial sync changes them rule by rule, or leaves them out;
 *  - what the kernel held right after kproxy wrote each chain, as a digest
 *    (apply/iptables-known.h), so a full sync leaves out every chain the
 *    kernel still holds as rendered; with a state directory that survives a
 *    restart;
 *  - a hash of the last input, so an unchanged partial sync sends nothing.
 *
 * What it does to the kernel goes through struct iptsync_kernel, the real
 * apply/iptables.h functions unless a test gives its own.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hmap;
struct iptables_known;
struct iptables_tools;
struct model;
struct nftables;
struct render_params;
struct iptsync;

/* The kernel as iptsync uses it (apply/iptables.h has the contracts;
 * observe gets only the table, chain declaration and COMMIT lines of what
 * was restored). */
struct iptsync_kernel {
        int (*scan)(void *userdata, uint8_t family, struct hmap *existing, char **ret_names, bool *ret_jumps_ok,
                    struct iptables_known *known);
        int (*ensure_jumps)(void *userdata, uint8_t family);
        int (*restore)(void *userdata, uint8_t family, const char *input, size_t len, bool loaded);
        int (*observe)(void *userdata, uint8_t family, const char *input, size_t len, struct iptables_known *known);
        void *userdata;
        bool netlink;           /* reads go over nf_tables netlink (fast, per chain), not iptables-save */
};

struct iptsync_stats {
        size_t n_filter_rules;          /* rules written, per table */
        size_t n_nat_rules;
        size_t n_nat_rules_total;       /* nat rules the kernel holds after the sync */
        size_t n_no_local_internal;     /* Local policies without a local endpoint */
        size_t n_no_local_external;
        size_t bytes_sent;              /* 0: nothing restored */
        size_t chains_by_rule;          /* partial: top-level chains changed by rule or left out */
        size_t chains_left_out;         /* full: chains the kernel holds as rendered, not sent */
        double restore_seconds, read_seconds;
        bool refused;                   /* iptables-restore refused the input */
};

/* One family's sync. k is copied (userdata borrowed); state_dir (may be
 * NULL) keeps the known chains across restarts, read here (a file it
 * cannot read is logged: every chain is then written). */
struct iptsync *iptsync_new(uint8_t family, const struct iptsync_kernel *k, const char *state_dir);
struct iptsync *iptsync_free(struct iptsync *s);

/* A full sync of more services than this writes their own chains this
 * many services at a time, then the top-level chains (default 1000; 0:
 * all in one input). */
void iptsync_set_part_services(struct iptsync *s, size_t services);

/* The real kernel: the tools and, with iptables-nft, netlink (nl NULL:
 * iptables-save). r (and what it points at) must outlive the syncs. */
struct iptsync_real {
        const struct iptables_tools *tools;
        struct nftables *nl;
};
struct iptsync_kernel iptsync_kernel_real(struct iptsync_real *r);

/* Every chain: reads which of kproxy's chains the kernel holds (and
 * digests of them), inserts missing jump rules, and restores everything
 * the kernel does not hold as rendered. Returns 0 or -errno (the kernel
 * keeps the rules of the failed transaction as they were; the tool's
 * complaint is logged). */
int iptsync_full(struct iptsync *s, const struct model *m, const struct render_params *p, struct iptsync_stats *ret);
/* The changed services (keys "ns/name"; gone ones are removed) and the
 * top-level chains where they changed. If the kernel refuses a change by
 * rule (someone else changed the chain), falls back to a full sync at
 * once. Returns as iptsync_full(). */
int iptsync_partial(struct iptsync *s, const struct model *m, const struct render_params *p,
                    const struct hmap *changed, struct iptsync_stats *ret);
