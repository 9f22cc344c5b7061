/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What the metrics server's own files share, and nothing else of kproxy
 * uses (metrics.h is the interface): the registry and its table of metric
 * families (metrics.c), below the server on top (metrics-http.c: the
 * handler, metrics_new(), metrics_free()); and the writers of the families
 * kept outside metrics.c, which metrics.c's table calls: build info and
 * feature gates (metrics-kubernetes.c), the process collector's
 * (metrics-process.c). The text format's writers are in
 * metrics-expo.h, the API client's families in metrics-client.h.
 *
 * tests/unit/http/test-metrics.c reads the table to compare it with upstream's
 * families (tests/unit/metrics-upstream.txt).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/metrics-expo.h"

struct buf;
struct kproxy_config;
struct metrics;

/* Every family kproxy knows, in name order, which is the exposition's. */
enum metrics_family_id {
        MF_CONNTRACK_DELETED,
        MF_CONNTRACK_DURATION,
        MF_NFACCT_INVALID,
        MF_NFACCT_LOCALHOST,
        MF_NETWORK_PROGRAMMING,
        MF_HEALTHZ,
        MF_LIVEZ,
        MF_SYNC_FULL,
        MF_SYNC_PARTIAL,
        MF_SYNC,
        MF_ENDPOINT_CHANGES_PENDING,
        MF_ENDPOINT_CHANGES_TOTAL,
        MF_IPTABLES_LAST,
        MF_IPTABLES_PARTIAL_FAILURES,
        MF_IPTABLES_RESTORE_FAILURES,
        MF_IPTABLES_TOTAL,
        MF_LAST_QUEUED,
        MF_LAST_SYNC,
        MF_NFTABLES_CLEANUP_FAILURES,
        MF_NFTABLES_SYNC_FAILURES,
        MF_NO_LOCAL_ENDPOINTS,
        MF_SERVICE_CHANGES_PENDING,
        MF_SERVICE_CHANGES_TOTAL,
        MF_BUILD_INFO,
        MF_FEATURE_ENABLED,
        MF_PROCESS_CPU,
        MF_PROCESS_MAX_FDS,
        MF_PROCESS_NETWORK_RECEIVE,
        MF_PROCESS_NETWORK_TRANSMIT,
        MF_PROCESS_OPEN_FDS,
        MF_PROCESS_RESIDENT,
        MF_PROCESS_START_TIME,
        MF_PROCESS_VIRTUAL,
        MF_PROCESS_VIRTUAL_MAX,
        MF_CLIENT_EXEC_CALLS,
        MF_CLIENT_EXEC_ROTATION,
        MF_CLIENT_EXEC_TTL,
        MF_CLIENT_RATE_LIMITER,
        MF_CLIENT_DURATION,
        MF_CLIENT_RETRIES,
        MF_CLIENT_REQUEST_SIZE,
        MF_CLIENT_REQUESTS,
        MF_CLIENT_RESPONSE_SIZE,
        MF_CLIENT_TRANSPORT_ENTRIES,
        MF_CLIENT_TRANSPORT_CALLS,
        _MF_MAX,
};

/* The table, indexed by enum metrics_family_id; ret_n: _MF_MAX. */
const struct metrics_desc *metrics_descs(size_t *ret_n);

/* The exposition of every family m's mode serves, in order. */
void metrics_write(const struct metrics *m, struct buf *b);
struct mhd_request;
struct mhd_reply;
/* /debug/explain's and /debug/rules' answer into reply; false when none is set. */
bool metrics_debug(const struct metrics *m, const char *path, const struct mhd_request *req, struct mhd_reply *reply);
/* /debug/backend's text into b; false when the mode has none. */
bool metrics_describe_backend(const struct metrics *m, struct buf *b);
const struct kproxy_config *metrics_config(const struct metrics *m);

/* The registry the server (metrics-http.c, on top: metrics_new(),
 * metrics_free()) serves: the state of every family, without the server. */
struct metrics *metrics_registry_new(const struct kproxy_config *c, const char *mode);
void metrics_registry_free(struct metrics *m);
struct mhd_server;
void metrics_attach_server(struct metrics *m, struct mhd_server *s);
struct mhd_server *metrics_server(const struct metrics *m);

/* ---- families written elsewhere ---- */

/* metrics-kubernetes.c: kubernetes_build_info, kubernetes_feature_enabled. */
void metrics_write_build_info(const struct metrics *m, const struct metrics_desc *d, struct buf *b);
void metrics_write_feature_enabled(const struct kproxy_config *c, const struct metrics_desc *d, struct buf *b);

/* metrics-process.c: process_*, read at scrape time; d->arg is the
 * family's id. */
void metrics_write_process(const struct metrics *m, const struct metrics_desc *d, struct buf *b);
