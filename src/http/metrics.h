/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * kube-proxy's metrics server (--metrics-bind-address, default
 * 127.0.0.1:10249): /metrics in the Prometheus text format with the
 * families kube-proxy 1.34 serves in the configured mode (upstream's names,
 * types, labels and buckets), plus process metrics; /proxyMode and /configz
 * as upstream. Served by libmicrohttpd on kproxy's event loop.
 *
 * The sync loop and the API client report what happens through the
 * observation functions below, none of which asks which mode runs. Each
 * accepts a NULL server (metrics disabled) as a no-op. family is an IP
 * family, 4 or 6: upstream's ip_family label ("IPv4", "IPv6").
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf;
struct ev_loop;
struct kproxy_config;
struct metrics;

/* Binds bind ("IP:PORT"; port 0 or NULL: disabled, *ret NULL, returns 0).
 * The config is borrowed (for /configz and /proxyMode) and must outlive the
 * server; mode (the backend's name: "iptables", "nftables") picks the
 * families upstream registers for it. Returns 0, or -errno after a log
 * line naming the address. */
int metrics_new(struct ev_loop *l, const char *bind, const struct kproxy_config *c, const char *mode,
                struct metrics **ret);
struct metrics *metrics_free(struct metrics *m);
int metrics_port(const struct metrics *m);     /* the bound port, for tests */

/* What the running mode adds (proxy/backend.h's expose and describe,
 * either may be NULL): its own families after the others on /metrics, and
 * the text of /debug/backend (404 without). */
void metrics_set_backend(struct metrics *m, void (*expose)(void *userdata, struct buf *out),
                         void (*describe)(void *userdata, struct buf *out), void *userdata);

struct mhd_request;
struct mhd_reply;
/* The daemon's answers on /debug/explain and /debug/rules (NULL: 404):
 * debug fills reply for the request to path. */
void metrics_set_debug(struct metrics *m,
                       void (*debug)(void *userdata, const char *path, const struct mhd_request *req,
                                     struct mhd_reply *reply),
                       void *userdata);

/* A sync of family's rules was asked for (a change queued, a resync): the
 * queued timestamp. */
void metrics_sync_queued(struct metrics *m, uint8_t family);
/* family's sync (full or partial) finished after seconds; ok: it succeeded
 * (only then does the last-sync timestamp move). */
void metrics_sync_done(struct metrics *m, uint8_t family, bool full, bool ok, double seconds);
/* The kernel refused family's rules (an iptables-restore, an nftables
 * transaction); partial: in a partial sync, which falls back to a full one. */
void metrics_apply_failed(struct metrics *m, uint8_t family, bool partial);
/* Rules of family in a table ("filter", "nat"): in total, and written by
 * the last sync. */
void metrics_rules(struct metrics *m, uint8_t family, const char *table, size_t total, size_t last);
/* Service ports with traffic policy Local and no local endpoints, per
 * policy ("internal", "external"), as of family's last sync. */
void metrics_no_local_endpoints(struct metrics *m, uint8_t family, const char *policy, size_t n);
/* Time from an API change (the object's timestamp) to family's rules
 * carrying it. */
void metrics_network_programming(struct metrics *m, uint8_t family, double seconds);
/* The UDP conntrack reconciler ran for family: how long, how many entries
 * it deleted. */
void metrics_conntrack_reconciled(struct metrics *m, uint8_t family, double seconds, size_t deleted);

/* A change to a Service (endpoints false) or an EndpointSlice (true) was queued. */
void metrics_change_queued(struct metrics *m, bool endpoints);
/* Every queued change has been applied. */
void metrics_changes_applied(struct metrics *m);
/* A /healthz or /livez answer (path without the slash, HTTP status). */
void metrics_health_answer(struct metrics *m, const char *what, unsigned code);

/* One request to the API server, as client-go's metrics see it: method
 * ("GET"), host (the server's host[:port]), the HTTP status or 0 when no
 * response came (client-go's "<error>"). A list reports when it is done:
 * its duration (its wait included), its wait for the client-side rate
 * limit and its response body size; a watch reports when its response
 * headers arrive, and client-go records no duration, wait or size for it. */
void metrics_api_request(struct metrics *m, const char *method, const char *host, unsigned code, bool watch,
                         double seconds, double waited, size_t response_bytes);
/* The API client built its connection's transport (client-go's transport
 * cache: one entry, created once). */
void metrics_api_transport(struct metrics *m);
