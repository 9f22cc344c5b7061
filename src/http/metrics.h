/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * kube-proxy's metrics server (--metrics-bind-address, default
 * 127.0.0.1:10249): /metrics in the Prometheus text format with upstream's
 * metric names, types, labels and buckets, plus process metrics; /proxyMode
 * and /configz as upstream. Served by libmicrohttpd on kproxy's event loop.
 *
 * The sync loop reports what happens through the observation functions;
 * each accepts a NULL server (metrics disabled) as a no-op.
 */
#include <stdbool.h>
#include <stddef.h>

struct ev_loop;
struct kproxy_config;
struct metrics;

/* Binds bind ("IP:PORT"; port 0 or NULL: disabled, *ret NULL, returns 0).
 * The config is borrowed (for /configz and /proxyMode) and must outlive the
 * server. Returns 0, or -errno after a log line naming the address. */
int metrics_new(struct ev_loop *l, const char *bind, const struct kproxy_config *c, struct metrics **ret);
struct metrics *metrics_free(struct metrics *m);
int metrics_port(const struct metrics *m);     /* the bound port, for tests */

/* A sync finished (successfully or not) after `seconds`. */
void metrics_sync_done(struct metrics *m, bool full, double seconds);
/* An iptables-restore (nftables mode: a transaction) failed; partial says
 * whether the sync was partial. */
void metrics_restore_failed(struct metrics *m, bool partial);
/* Rules in a table ("filter", "nat") in total, and written by the last sync. */
void metrics_rules(struct metrics *m, const char *table, size_t total, size_t last);
/* A change to a Service (endpoints false) or an EndpointSlice (true) was queued. */
void metrics_change_queued(struct metrics *m, bool endpoints);
/* Every queued change has been applied. */
void metrics_changes_applied(struct metrics *m);
/* Time from an API change (the object's timestamp) to the kernel carrying it. */
void metrics_network_programming(struct metrics *m, double seconds);
/* Services with traffic policy Local and no local endpoints, per policy
 * ("internal", "external"), as of the last sync. */
void metrics_no_local_endpoints(struct metrics *m, const char *policy, size_t n);
/* A /healthz or /livez answer (path without the slash, HTTP status). */
void metrics_health_answer(struct metrics *m, const char *what, unsigned code);
/* The sync in progress failed before or without a failed iptables-restore
 * (metrics_restore_failed implies this): the next metrics_sync_done still
 * observes its duration but leaves the last-success timestamp alone. */
void metrics_sync_failed(struct metrics *m);

/* Shared by metrics.c and metrics-process.c, and tested on their own. */
struct buf;
/* v as Go's strconv.FormatFloat(v, 'g', -1, 64), or +Inf, -Inf, NaN. */
void metrics_format_float(struct buf *b, double v);
/* "# HELP name help" and "# TYPE name type" lines. */
void metrics_put_family(struct buf *b, const char *name, const char *type, const char *help);
/* One sample line; labels is the text between the braces, or NULL. */
void metrics_put_sample(struct buf *b, const char *name, const char *labels, double v);
/* The Go client's process collector families, from /proc/self and
 * getrlimit(). A value that cannot be read leaves its family out. */
void metrics_process_write(struct buf *b);
