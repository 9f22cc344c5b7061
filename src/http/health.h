/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The proxy health server (kube-proxy's --healthz-bind-address, default
 * 0.0.0.0:10256): /healthz and /livez with upstream's semantics and JSON
 * body, served by libmicrohttpd on kproxy's event loop (no threads).
 *
 * The sync loop reports what it does; the server derives health from it, as
 * upstream's ProxyHealthServer does: healthy unless, for some IP family, a
 * queued change has waited longer than the timeout (upstream: 2 x
 * syncPeriod) without a successful sync since. Like upstream it is healthy
 * while starting up, before anything is queued; a first sync that never
 * comes turns it unhealthy once the first queued change is that old.
 * /healthz is also unhealthy while the Node is not eligible; /livez ignores
 * that.
 */
#include <stdbool.h>
#include <stdint.h>

struct ev_loop;
struct health_server;
struct metrics;

/* Counts /healthz and /livez answers in kubeproxy_proxy_{healthz,livez}_total. */
void health_server_set_metrics(struct health_server *h, struct metrics *m);

/* Binds bind ("IP:PORT", "[IPv6]:PORT"; port 0 or a NULL bind means disabled:
 * *ret is then NULL and 0 is returned) and registers with the loop. timeout_ms
 * is how long a queued change may wait before /healthz fails. Returns 0, or
 * -errno with a log line naming the address (e.g. -EADDRINUSE, -EINVAL).
 * With retry_ms > 0 a failed bind is logged and retried that often instead
 * (-EINVAL and -ENOMEM still fail): upstream's default,
 * --bind-address-hard-fail=false (http/mhd.h). share_port: SO_REUSEPORT,
 * so a successor process binds beside this one (userspace mode). */
int health_server_new(struct ev_loop *l, const char *bind, uint64_t timeout_ms, uint64_t retry_ms,
                      bool share_port, struct health_server **ret);
struct health_server *health_server_free(struct health_server *h);

/* Events from the sync loop, per IP family (4 or 6). NULL h is a no-op. */
void health_server_queued(struct health_server *h, int family);    /* a change waits for a sync */
void health_server_synced(struct health_server *h, int family);    /* a sync succeeded */

/* From the Node watch: false while this Node is being deleted or carries the
 * cluster autoscaler's ToBeDeletedByClusterAutoscaler taint. Starts true, as
 * upstream's does. NULL h is a no-op. */
void health_server_set_node_eligible(struct health_server *h, bool eligible);

/* kproxy's own member of the JSON bodies, "socketLB": "on", or "off: WHY"
 * when --socket-lb was asked for and could not be set up (then the rules
 * serve everything: not a health failure). NULL (the default) leaves it
 * out, so the body is upstream's; so is a state with a quote, backslash or
 * newline (it is not escaped). NULL h is a no-op. */
void health_server_set_socket_lb(struct health_server *h, const char *state);

/* kproxy's own: a successor process has announced that it takes over
 * (userspace mode's surge restart). While set, /healthz is not ready (503,
 * "replaced": "successor starting"): both processes answer on one port of
 * the host network, and only the process that will serve the node may pass
 * the new pod's readiness probe. /livez is unchanged. NULL h is a no-op. */
void health_server_set_replaced(struct health_server *h, bool replaced);

/* The TCP port the server listens on, or 0 for a NULL (disabled) server. */
int health_server_port(const struct health_server *h);
