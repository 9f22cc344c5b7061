/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Watching kproxy's tables: a socket subscribed to nf_tables'
 * notifications, which reports the changes anyone else makes.
 */
#include <stdbool.h>
#include <stdint.h>

struct nftables;

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
