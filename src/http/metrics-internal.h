/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What the metrics server's own files share, and nothing else of kproxy
 * uses (metrics.h is the interface): the table of metric families
 * (metrics.c), the text format's writers (metrics-expo.c), and the writers
 * of the families kept outside metrics.c: the API client's and build info
 * (metrics-client.c), the process collector's (metrics-process.c).
 *
 * tests/unit/test-metrics.c reads the table to compare it with upstream's
 * families (tests/unit/metrics-upstream.txt).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf;
struct kproxy_config;
struct metrics;

enum metrics_type {
        METRICS_COUNTER,
        METRICS_GAUGE,
        METRICS_HISTOGRAM,
        _METRICS_TYPE_MAX,
};

const char *metrics_type_to_string(enum metrics_type t);

/* The proxy modes that serve a family, as upstream's RegisterMetrics(mode)
 * registers them. */
enum {
        METRICS_IPTABLES = 1 << 0,
        METRICS_NFTABLES = 1 << 1,
        METRICS_ALL = METRICS_IPTABLES | METRICS_NFTABLES,
};

/* One metric family. Its writer prints the HELP and TYPE lines and the
 * samples, or nothing at all while the family has no sample (a labelled
 * family before its first label values, as Go's *Vec types). */
struct metrics_desc {
        const char *name;
        enum metrics_type type;
        const char *labels;             /* names as printed (sorted), comma-separated; "" for none; le not included */
        unsigned modes;
        const char *stability;          /* "ALPHA", "BETA": HELP's "[ALPHA] "; NULL: none (the process collector) */
        const char *help;
        const double *buckets;          /* a histogram's upper bounds, increasing (+Inf implied) */
        size_t n_buckets;
        size_t arg;                     /* the writer's: which field of its state */
        /* NULL: a family upstream registers that kproxy never has a
         * sample of (the table's comment says why); never printed. */
        void (*write)(const struct metrics *m, const struct metrics_desc *d, struct buf *b);
};

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
const struct kproxy_config *metrics_config(const struct metrics *m);

/* metrics-http.c: the server's request handler (mhd_handler_fn); userdata
 * is the struct metrics. */
struct mhd_request;
struct mhd_reply;
void metrics_http_handle(void *userdata, const struct mhd_request *req, struct mhd_reply *reply);

/* ---- the text format (metrics-expo.c) ---- */

#define METRICS_MAX_BUCKETS 81          /* kubeproxy_network_programming_duration_seconds' */

struct metrics_histogram {
        uint64_t counts[METRICS_MAX_BUCKETS];   /* per bucket, not cumulative */
        uint64_t count;                         /* also the +Inf bucket */
        double sum;
};

/* As client_golang: the first bucket whose bound is >= v; above all of them
 * only +Inf (and count, sum). */
void metrics_histogram_observe(struct metrics_histogram *h, const struct metrics_desc *d, double v);

/* "# HELP name [STABILITY] help" and "# TYPE name type". */
void metrics_put_header(struct buf *b, const struct metrics_desc *d);
/* name{labels} v; labels is the text between the braces, or NULL/"" for none. */
void metrics_put_sample(struct buf *b, const char *name, const char *labels, double v);
/* A histogram's series: its buckets (labels, then le), _sum and _count. */
void metrics_put_histogram(struct buf *b, const struct metrics_desc *d, const char *labels,
                           const struct metrics_histogram *h);
/* Appends name="value" (after a comma if labels is not empty), escaping the
 * value as the text format wants (backslash, double quote, newline). */
void metrics_put_label(struct buf *labels, const char *name, const char *value);

/* ---- families written elsewhere ---- */

/* metrics-kubernetes.c: kubernetes_build_info, kubernetes_feature_enabled. */
void metrics_write_build_info(const struct metrics *m, const struct metrics_desc *d, struct buf *b);
void metrics_write_feature_enabled(const struct metrics *m, const struct metrics_desc *d, struct buf *b);

/* metrics-client.c: rest_client_*. The client's
 * state is its own; the table's writers reach it through metrics_client_of(). */
struct metrics_client;
struct metrics_client *metrics_client_new(void);
struct metrics_client *metrics_client_free(struct metrics_client *c);
const struct metrics_client *metrics_client_of(const struct metrics *m);
struct metrics_client *metrics_client_mut(struct metrics *m);
void metrics_write_client_requests(const struct metrics *m, const struct metrics_desc *d, struct buf *b);
/* rest_client_*_seconds and _bytes by host and verb; arg: the series' kind. */
enum metrics_client_histogram {
        METRICS_CLIENT_RATE_LIMITER,
        METRICS_CLIENT_DURATION,
        METRICS_CLIENT_REQUEST_SIZE,
        METRICS_CLIENT_RESPONSE_SIZE,
        _METRICS_CLIENT_HISTOGRAM_MAX,
};
void metrics_write_client_histogram(const struct metrics *m, const struct metrics_desc *d, struct buf *b);
void metrics_write_client_transport(const struct metrics *m, const struct metrics_desc *d, struct buf *b);
void metrics_write_client_exec_ttl(const struct metrics *m, const struct metrics_desc *d, struct buf *b);
void metrics_write_client_exec_rotation(const struct metrics *m, const struct metrics_desc *d, struct buf *b);

/* metrics-process.c: process_*, read at scrape time. */
void metrics_write_process(const struct metrics *m, const struct metrics_desc *d, struct buf *b);
