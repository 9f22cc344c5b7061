/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * nftables mode's side effects, over nf_tables netlink: committing a batch
 * (render/nftmsg.c builds it) as one transaction, listing what the
 * "kube-proxy" table holds, watching it for changes made by anyone else,
 * and removal (`--cleanup` removes the tables of both modes; each mode's
 * daemon removes the other's at start, as upstream).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nftmsg;
struct hmap;
struct nftables;

int nftables_open(struct nftables **ret);
struct nftables *nftables_close(struct nftables *n);

/* The netlink port id the kernel stamps on notifications of our changes. */
uint32_t nftables_portid(const struct nftables *n);

/* Commits m, which must be one whole batch (nftmsg_batch_begin() ... end()),
 * as one transaction: all or nothing. Returns 0, or the error of the first
 * failing message (its type and object name and the kernel's message, if
 * any, are written to err, a buffer of errlen bytes). */
int nftables_commit(struct nftables *n, const struct nftmsg *m, char *err, size_t errlen);

/* What the family's kube-proxy table holds: its chains (name -> the same
 * string) and its named sets (name -> struct nftables_set). Both maps own
 * their values: release them with nftables_names_done(). Returns 0,
 * -ENOENT when there is no table, or another -errno. */
struct nftables_set {
        uint64_t timeout_ms;    /* 0: none */
        char name[];
};
int nftables_list(struct nftables *n, uint8_t family, struct hmap *ret_chains, struct hmap *ret_sets);
void nftables_names_done(struct hmap *names);
/* The chains of any nf_tables table of the family (iptables-nft's "nat",
 * "filter", "mangle" among them), into ret_chains as above. Returns 0 (an
 * absent table has no chains) or -errno. */
int nftables_list_chains(struct nftables *n, uint8_t family, const char *table, struct hmap *ret_chains);

/* Watching the table: a socket subscribed to nf_tables' notifications. */
enum nftables_event {
        NFTABLES_EVENT_FOREIGN,         /* someone else changed the family's table */
        NFTABLES_EVENT_LOST,            /* notifications were dropped: anything may have changed */
};
typedef void (*nftables_event_fn)(void *userdata, enum nftables_event ev, uint8_t family, const char *what);
struct nftables_monitor;

/* Opens the monitor; changes made through n (its port id) are ours and
 * not reported. Returns 0 or -errno. */
int nftables_monitor_open(const struct nftables *n, nftables_event_fn fn, void *userdata,
                          struct nftables_monitor **ret);
struct nftables_monitor *nftables_monitor_close(struct nftables_monitor *m);
int nftables_monitor_fd(const struct nftables_monitor *m);
/* Reads every pending notification, calling fn for those that matter. */
void nftables_monitor_drain(struct nftables_monitor *m);
/* Stops (on false) or resumes notifications. The kernel builds one for
 * every object a transaction touches while anyone listens, a quarter of
 * the cost of loading a large table; nftables_genid() tells whether anyone
 * else committed meanwhile. Returns 0 or -errno. */
int nftables_monitor_listen(struct nftables_monitor *m, bool on);
/* The ruleset generation: every committed transaction, anyone's, adds one. */
int nftables_genid(struct nftables *n, uint32_t *ret);

/* Deletes the "kube-proxy" table of the ip and ip6 families if present.
 * Returns 0 (also when there was nothing to delete), or -errno when an
 * existing table could not be deleted (logged). */
int nftables_cleanup(void);
/* Whether the family's kube-proxy table exists. */
bool nftables_table_present(uint8_t family);
