/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the metrics server: counters, gauges and histograms in one
 * struct, written by the sync loop and the API client through small
 * observation functions and turned into Prometheus text only when scraped.
 * One table names every family kube-proxy 1.34 serves (upstream's
 * pkg/proxy/metrics RegisterMetrics(mode), component-base's restclient,
 * build info and feature gate metrics, the Go client's process collector),
 * with its type, labels, buckets, stability and the modes that serve it;
 * the exposition walks the table in name order, as the Go client sorts it,
 * so a scraper of upstream's kube-proxy reads the same families:
 *
 *  - HELP starts with "[ALPHA] " (or "[BETA] ") where component-base adds
 *    the stability level (every kube-proxy metric); the process collector
 *    has none;
 *  - a plain counter or gauge is printed from the start (as 0), a plain
 *    histogram with all its buckets at 0; a family with labels prints
 *    nothing until its first label values are used (Go's *Vec types), so
 *    most ip_family families appear with the first sync;
 *  - the ip_family label is "IPv4" or "IPv6": upstream's proxiers are one
 *    per family, and so are kproxy's observations;
 *  - numbers are formatted like Go's strconv.FormatFloat(v, 'g', -1, 64).
 *
 * Go's runtime families (go_*) are left out: kproxy is not a Go program.
 * The HELP texts are kproxy's own words.
 */
#include "http/metrics.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apply/nfacct.h"
#include "config/config.h"
#include "http/metrics-client.h"
#include "http/metrics-internal.h"
#include "http/mhd.h"
#include "util/buf.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/inet.h"
#include "util/log.h"


/* Upstream's ip_family values; index 0 is IPv4, 1 IPv6. */
#define METRICS_IP_FAMILIES 2
static const char *const metrics_ip_family_table[METRICS_IP_FAMILIES] = {"IPv4", "IPv6"};

static int metrics_ip_family(uint8_t family) {
        assert(family == 4 || family == 6);
        return family == 6 ? 1 : family == 4 ? 0 : -EINVAL;
}

/* Upstream sets these two tables only: kube-proxy's iptables rules live
 * there. Sorted, as Go sorts label values. */
enum metrics_table {
        METRICS_TABLE_FILTER,
        METRICS_TABLE_NAT,
        _METRICS_TABLE_MAX,
};

static const char *const metrics_table_table[_METRICS_TABLE_MAX] = {
        [METRICS_TABLE_FILTER] = "filter",
        [METRICS_TABLE_NAT] = "nat",
};

enum metrics_policy {
        METRICS_POLICY_EXTERNAL,
        METRICS_POLICY_INTERNAL,
        _METRICS_POLICY_MAX,
};

static const char *const metrics_policy_table[_METRICS_POLICY_MAX] = {
        [METRICS_POLICY_EXTERNAL] = "external",
        [METRICS_POLICY_INTERNAL] = "internal",
};

static int metrics_lookup(const char *const *table, size_t n, const char *s) {
        for (size_t i = 0; s && i < n; i++)
                if (strcmp(table[i], s) == 0)
                        return (int) i;
        return -EINVAL;
}

/* A value of a labelled counter or gauge; unset ones are not printed. */
struct metrics_slot {
        bool set;
        double value;
};

struct metrics_hslot {
        bool set;
        struct metrics_histogram h;
};

/* What one IP family's proxier reports. The writers of the ip_family
 * families find their field by its offset (the table's arg). */
struct metrics_fam {
        struct metrics_hslot sync, sync_full, sync_partial, network_programming, conntrack;
        struct metrics_slot last_sync, last_queued;
        struct metrics_slot apply_failures;     /* iptables-restore / nftables transaction failures */
        struct metrics_slot partial_failures;
        struct metrics_slot conntrack_deleted;
        struct metrics_slot rules_total[_METRICS_TABLE_MAX], rules_last[_METRICS_TABLE_MAX];
        struct metrics_slot no_local[_METRICS_POLICY_MAX];
};

/* A counter labelled with HTTP status codes. Health answers use two codes,
 * so a handful of slots is plenty; they are kept sorted. */
#define METRICS_MAX_CODES 8
struct metrics_codes {
        size_t n;
        unsigned code[METRICS_MAX_CODES];
        uint64_t count[METRICS_MAX_CODES];
};

/* iptables mode's reader of the nfacct counters. A scrape uses it (and
 * changes its socket's state), so it lives outside the struct metrics a
 * scrape only reads. */
struct metrics_acct {
        struct nfacct *reader;
        bool missing[_NFACCT_COUNTER_MAX];      /* the log has been told */
};

struct metrics {
        struct mhd_server *server;
        const struct kproxy_config *config;
        unsigned mode;                          /* METRICS_IPTABLES, _NFTABLES or _USERSPACE */
        /* The mode's own (backend_ops.expose, .describe): may be NULL. */
        void (*backend_expose)(void *userdata, struct buf *out);
        void (*backend_describe)(void *userdata, struct buf *out);
        void (*debug)(void *userdata, const char *path, const struct mhd_request *req, struct mhd_reply *reply);
        void *debug_userdata;
        void *backend_userdata;
        struct metrics_acct *acct;              /* NULL: no nfacct families */
        struct metrics_client *client;
        struct metrics_fam fam[METRICS_IP_FAMILIES];
        uint64_t endpoint_changes_pending, endpoint_changes_total;
        uint64_t service_changes_pending, service_changes_total;
        struct metrics_codes healthz, livez;
};

/* Go's time.Now().UnixNano() / 1e9, as prometheus' SetToCurrentTime. */
static double metrics_now(void) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (double) ((int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec) / 1e9;
}

static struct metrics_fam *metrics_fam(struct metrics *m, uint8_t family) {
        int i = metrics_ip_family(family);

        return i < 0 ? NULL : &m->fam[i];
}

static void metrics_hslot_observe(struct metrics_hslot *s, const struct metrics_desc *d, double v) {
        s->set = true;
        metrics_histogram_observe(&s->h, d, v);
}

static void metrics_slot_add(struct metrics_slot *s, double v) {
        s->set = true;
        s->value += v;
}

static void metrics_slot_set(struct metrics_slot *s, double v) {
        *s = (struct metrics_slot) {true, v};
}

/* ---- the families ---- */

/* The ip_family families: a histogram or a value per family, at the
 * table's offset in struct metrics_fam. */
static void metrics_write_fam_histogram(const struct metrics *m, const struct metrics_desc *d, struct buf *b) {
        _cleanup_(buf_done) struct buf labels = BUF_INIT;
        bool header = false;

        for (size_t i = 0; i < METRICS_IP_FAMILIES; i++) {
                const struct metrics_hslot *s = (const void *) ((const char *) &m->fam[i] + d->arg);

                if (!s->set)
                        continue;
                if (!header)
                        metrics_put_header(b, d);
                header = true;
                buf_clear(&labels);
                metrics_put_label(&labels, "ip_family", metrics_ip_family_table[i]);
                metrics_put_histogram(b, d, labels.data, &s->h);
        }
}

/* Values per family and, for n > 1, per second label (table or policy). */
static void metrics_write_fam_slots(const struct metrics *m, const struct metrics_desc *d, struct buf *b,
                                    const char *label, const char *const *values, size_t n) {
        _cleanup_(buf_done) struct buf labels = BUF_INIT;
        bool header = false;

        for (size_t i = 0; i < METRICS_IP_FAMILIES; i++) {
                const struct metrics_slot *s = (const void *) ((const char *) &m->fam[i] + d->arg);

                for (size_t j = 0; j < n; j++) {
                        if (!s[j].set)
                                continue;
                        if (!header)
                                metrics_put_header(b, d);
                        header = true;
                        buf_clear(&labels);
                        metrics_put_label(&labels, "ip_family", metrics_ip_family_table[i]);
                        if (label)
                                metrics_put_label(&labels, label, values[j]);
                        metrics_put_sample(b, d->name, labels.data, s[j].value);
                }
        }
}

static void metrics_write_fam_value(const struct metrics *m, const struct metrics_desc *d, struct buf *b) {
        metrics_write_fam_slots(m, d, b, NULL, NULL, 1);
}

static void metrics_write_fam_table(const struct metrics *m, const struct metrics_desc *d, struct buf *b) {
        metrics_write_fam_slots(m, d, b, "table", metrics_table_table, _METRICS_TABLE_MAX);
}

static void metrics_write_fam_policy(const struct metrics *m, const struct metrics_desc *d, struct buf *b) {
        metrics_write_fam_slots(m, d, b, "traffic_policy", metrics_policy_table, _METRICS_POLICY_MAX);
}

/* The plain counters and gauges: the uint64_t at the table's offset in
 * struct metrics. */
static void metrics_write_scalar(const struct metrics *m, const struct metrics_desc *d, struct buf *b) {
        const uint64_t *v = (const void *) ((const char *) m + d->arg);

        metrics_put_header(b, d);
        metrics_put_sample(b, d->name, NULL, (double) *v);
}

/* Go sorts label values as strings; three-digit codes sort the same either
 * way. */
static void metrics_write_codes(const struct metrics *m, const struct metrics_desc *d, struct buf *b) {
        const struct metrics_codes *c = (const void *) ((const char *) m + d->arg);
        char labels[32];

        if (c->n == 0)
                return;
        metrics_put_header(b, d);
        for (size_t i = 0; i < c->n; i++) {
                snprintf(labels, sizeof labels, "code=\"%u\"", c->code[i]);
                metrics_put_sample(b, d->name, labels, (double) c->count[i]);
        }
}

/* Upstream's nfacct collector: the counter's packets, read now; a counter
 * that cannot be read prints no sample, and the family nothing. Upstream
 * logs an error on every such scrape; kproxy tells the log once, until the
 * counter is back. */
static void metrics_write_nfacct(const struct metrics *m, const struct metrics_desc *d, struct buf *b) {
        enum nfacct_counter c = (enum nfacct_counter) d->arg;
        struct metrics_acct *a = m->acct;
        uint64_t packets;
        int r;

        if (!a)
                return;
        r = nfacct_get(a->reader, c, &packets);
        if (r < 0) {
                if (!a->missing[c])
                        log_warning_errno(r, "Failed to read nfacct counter %s for %s, leaving it out",
                                          nfacct_counter_to_string(c), d->name);
                a->missing[c] = true;
                return;
        }
        a->missing[c] = false;
        metrics_put_header(b, d);
        metrics_put_sample(b, d->name, NULL, (double) packets);
}

/* The API client's families: their state is metrics-client.c's own. */
static void metrics_write_client_requests(const struct metrics *m, const struct metrics_desc *d, struct buf *b) {
        metrics_client_write_requests(m->client, d, b);
}

static void metrics_write_client_histogram(const struct metrics *m, const struct metrics_desc *d, struct buf *b) {
        metrics_client_write_histogram(m->client, d, b);
}

static void metrics_write_client_transport(const struct metrics *m, const struct metrics_desc *d, struct buf *b) {
        metrics_client_write_transport(m->client, d, b);
}

/* Upstream's buckets. The sync and conntrack histograms use
 * ExponentialBuckets(0.001, 2, 15): 1 ms to 16.384 s, each bound the
 * previous one doubled (exact in binary, so these literals are the same
 * doubles Go computes). Network programming merges linear ranges after a
 * leading 0 (component-base's MergeBuckets starts from one zero bucket):
 * 0.25 s, 0.5 s, then whole seconds to 59, every 5 s to 115, every 30 s to
 * 5 min. */
static const double metrics_sync_buckets[] = {
        0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384,
};

static const double metrics_netprog_buckets[] = {
        0, 0.25, 0.5,
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
        21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
        41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59,
        60, 65, 70, 75, 80, 85, 90, 95, 100, 105, 110, 115,
        120, 150, 180, 210, 240, 270, 300,
};

/* component-base's restclient buckets: latencies from 5 ms to a minute,
 * sizes from 64 bytes to 16 MiB, certificate ages from 10 minutes to 4
 * years. */
static const double metrics_latency_buckets[] = {0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60};
static const double metrics_size_buckets[] = {
        64, 256, 512, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216,
};
static const double metrics_rotation_buckets[] = {
        600, 1800, 3600, 14400, 86400, 604800, 2592000, 7776000, 15552000, 31104000, 124416000,
};

#define BUCKETS(a) .buckets = (a), .n_buckets = ELEMENTSOF(a)
#define FAM(field) .arg = offsetof(struct metrics_fam, field)
#define TOP(field) .arg = offsetof(struct metrics, field)
#define IPT METRICS_IPTABLES
#define NFT METRICS_NFTABLES
#define USR METRICS_USERSPACE
#define ALL METRICS_ALL
#define C METRICS_COUNTER
#define G METRICS_GAUGE
#define H METRICS_HISTOGRAM

/* Everything kube-proxy 1.34 serves, sorted by name (tests/unit/
 * metrics-upstream.txt is the same list, taken from upstream). */
/* kubernetes_feature_enabled, from the configuration's gates
 * (metrics-kubernetes.c writes it). */
static void metrics_write_gates(const struct metrics *m, const struct metrics_desc *d, struct buf *b) {
        metrics_write_feature_enabled(m->config, d, b);
}

static const struct metrics_desc metrics_desc_table[_MF_MAX] = {
        [MF_CONNTRACK_DELETED] = {"kubeproxy_conntrack_reconciler_deleted_entries_total", C, "ip_family", IPT | NFT,
                "ALPHA", "Stale UDP conntrack entries the reconciler deleted",
                .write = metrics_write_fam_value, FAM(conntrack_deleted)},
        [MF_CONNTRACK_DURATION] = {"kubeproxy_conntrack_reconciler_sync_duration_seconds", H, "ip_family", IPT | NFT,
                "ALPHA", "Seconds a run of the UDP conntrack reconciler took", BUCKETS(metrics_sync_buckets),
                .write = metrics_write_fam_histogram, FAM(conntrack)},
        [MF_NFACCT_INVALID] = {"kubeproxy_iptables_ct_state_invalid_dropped_packets_total", C, "", IPT, "ALPHA",
                "Packets the iptables rules dropped for a conntrack state of INVALID",
                .write = metrics_write_nfacct, .arg = NFACCT_COUNTER_CT_STATE_INVALID},
        [MF_NFACCT_LOCALHOST] = {"kubeproxy_iptables_localhost_nodeports_accepted_packets_total", C, "", IPT,
                "ALPHA", "Packets the iptables rules accepted for a NodePort on a loopback address",
                .write = metrics_write_nfacct, .arg = NFACCT_COUNTER_LOCALHOST_NODEPORTS},
        [MF_NETWORK_PROGRAMMING] = {"kubeproxy_network_programming_duration_seconds", H, "ip_family", ALL, "ALPHA",
                "Seconds from a change to a Service or its endpoints in the API to the rules for it being in "
                "the kernel", BUCKETS(metrics_netprog_buckets),
                .write = metrics_write_fam_histogram, FAM(network_programming)},
        [MF_HEALTHZ] = {"kubeproxy_proxy_healthz_total", C, "code", ALL, "ALPHA",
                "Answers of the proxy's /healthz, by HTTP status", .write = metrics_write_codes, TOP(healthz)},
        [MF_LIVEZ] = {"kubeproxy_proxy_livez_total", C, "code", ALL, "ALPHA",
                "Answers of the proxy's /livez, by HTTP status", .write = metrics_write_codes, TOP(livez)},
        [MF_SYNC_FULL] = {"kubeproxy_sync_full_proxy_rules_duration_seconds", H, "ip_family", IPT | NFT | USR, "ALPHA",
                "Seconds a full sync of the proxy rules took", BUCKETS(metrics_sync_buckets),
                .write = metrics_write_fam_histogram, FAM(sync_full)},
        [MF_SYNC_PARTIAL] = {"kubeproxy_sync_partial_proxy_rules_duration_seconds", H, "ip_family", IPT | NFT | USR,
                "ALPHA", "Seconds a partial sync of the proxy rules took", BUCKETS(metrics_sync_buckets),
                .write = metrics_write_fam_histogram, FAM(sync_partial)},
        [MF_SYNC] = {"kubeproxy_sync_proxy_rules_duration_seconds", H, "ip_family", ALL, "ALPHA",
                "Seconds a sync of the proxy rules took, full or partial", BUCKETS(metrics_sync_buckets),
                .write = metrics_write_fam_histogram, FAM(sync)},
        [MF_ENDPOINT_CHANGES_PENDING] = {"kubeproxy_sync_proxy_rules_endpoint_changes_pending", G, "", ALL, "ALPHA",
                "EndpointSlice changes not yet in the proxy rules", .write = metrics_write_scalar,
                TOP(endpoint_changes_pending)},
        [MF_ENDPOINT_CHANGES_TOTAL] = {"kubeproxy_sync_proxy_rules_endpoint_changes_total", C, "", ALL, "ALPHA",
                "EndpointSlice changes seen since start", .write = metrics_write_scalar,
                TOP(endpoint_changes_total)},
        [MF_IPTABLES_LAST] = {"kubeproxy_sync_proxy_rules_iptables_last", G, "ip_family,table", IPT, "ALPHA",
                "iptables rules kube-proxy wrote in its last sync, by table", .write = metrics_write_fam_table,
                FAM(rules_last)},
        [MF_IPTABLES_PARTIAL_FAILURES] = {"kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", C,
                "ip_family", IPT, "ALPHA", "iptables-restore runs of partial syncs that failed",
                .write = metrics_write_fam_value, FAM(partial_failures)},
        [MF_IPTABLES_RESTORE_FAILURES] = {"kubeproxy_sync_proxy_rules_iptables_restore_failures_total", C,
                "ip_family", IPT, "ALPHA", "iptables-restore runs that failed", .write = metrics_write_fam_value,
                FAM(apply_failures)},
        [MF_IPTABLES_TOTAL] = {"kubeproxy_sync_proxy_rules_iptables_total", G, "ip_family,table", IPT, "ALPHA",
                "iptables rules kube-proxy owns, by table", .write = metrics_write_fam_table, FAM(rules_total)},
        [MF_LAST_QUEUED] = {"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", G, "ip_family", ALL,
                "ALPHA", "Unix time a sync of the proxy rules was last asked for", .write = metrics_write_fam_value,
                FAM(last_queued)},
        [MF_LAST_SYNC] = {"kubeproxy_sync_proxy_rules_last_timestamp_seconds", G, "ip_family", ALL, "ALPHA",
                "Unix time of the last successful sync of the proxy rules", .write = metrics_write_fam_value,
                FAM(last_sync)},
        /* Upstream counts the failures of the separate transaction that
         * deletes chains which went out of use at least a second ago. kproxy
         * deletes them in the sync's own transaction (proxy/nftables/nftsync.c), so a
         * failure there is a failed sync, counted below: this one never
         * has a sample. */
        [MF_NFTABLES_CLEANUP_FAILURES] = {"kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total", C,
                "ip_family", NFT, "ALPHA", "Separate deletions of unused nftables chains that failed"},
        [MF_NFTABLES_SYNC_FAILURES] = {"kubeproxy_sync_proxy_rules_nftables_sync_failures_total", C, "ip_family",
                NFT, "ALPHA", "nftables transactions of syncs that failed", .write = metrics_write_fam_value,
                FAM(apply_failures)},
        [MF_NO_LOCAL_ENDPOINTS] = {"kubeproxy_sync_proxy_rules_no_local_endpoints_total", G,
                "ip_family,traffic_policy", ALL, "ALPHA",
                "Service ports with a Local traffic policy and no local endpoints, by policy",
                .write = metrics_write_fam_policy, FAM(no_local)},
        [MF_SERVICE_CHANGES_PENDING] = {"kubeproxy_sync_proxy_rules_service_changes_pending", G, "", ALL, "ALPHA",
                "Service changes not yet in the proxy rules", .write = metrics_write_scalar,
                TOP(service_changes_pending)},
        [MF_SERVICE_CHANGES_TOTAL] = {"kubeproxy_sync_proxy_rules_service_changes_total", C, "", ALL, "ALPHA",
                "Service changes seen since start", .write = metrics_write_scalar, TOP(service_changes_total)},

        /* component-base's version package. */
        [MF_BUILD_INFO] = {"kubernetes_build_info", G,
                "build_date,compiler,git_commit,git_tree_state,git_version,go_version,major,minor,platform", ALL,
                "ALPHA", "Always 1, labelled with the version and build of kproxy",
                .write = metrics_write_build_info},
        /* component-base's feature package, filled by kube-proxy's
         * AddMetrics(): one of the few BETA families. */
        [MF_FEATURE_ENABLED] = {"kubernetes_feature_enabled", G, "name,stage", ALL, "BETA",
                "Whether each feature gate is enabled (1) or not (0), with its stage",
                .write = metrics_write_gates},

        /* The Go client's process collector (no stability level), read at
         * each scrape. */
        [MF_PROCESS_CPU] = {"process_cpu_seconds_total", C, "", ALL, NULL,
                "CPU time the process has used, user and system, in seconds.", .arg = MF_PROCESS_CPU, .write = metrics_write_process},
        [MF_PROCESS_MAX_FDS] = {"process_max_fds", G, "", ALL, NULL, "Soft limit on open file descriptors.",
                .arg = MF_PROCESS_MAX_FDS, .write = metrics_write_process},
        [MF_PROCESS_NETWORK_RECEIVE] = {"process_network_receive_bytes_total", C, "", ALL, NULL,
                "Bytes received over IP in the process's network namespace.", .arg = MF_PROCESS_NETWORK_RECEIVE, .write = metrics_write_process},
        [MF_PROCESS_NETWORK_TRANSMIT] = {"process_network_transmit_bytes_total", C, "", ALL, NULL,
                "Bytes sent over IP in the process's network namespace.", .arg = MF_PROCESS_NETWORK_TRANSMIT, .write = metrics_write_process},
        [MF_PROCESS_OPEN_FDS] = {"process_open_fds", G, "", ALL, NULL, "File descriptors the process has open.",
                .arg = MF_PROCESS_OPEN_FDS, .write = metrics_write_process},
        [MF_PROCESS_RESIDENT] = {"process_resident_memory_bytes", G, "", ALL, NULL,
                "Memory the process has resident, in bytes.", .arg = MF_PROCESS_RESIDENT, .write = metrics_write_process},
        [MF_PROCESS_START_TIME] = {"process_start_time_seconds", G, "", ALL, NULL,
                "Unix time the process started, in seconds.", .arg = MF_PROCESS_START_TIME, .write = metrics_write_process},
        [MF_PROCESS_VIRTUAL] = {"process_virtual_memory_bytes", G, "", ALL, NULL,
                "Virtual address space of the process, in bytes.", .arg = MF_PROCESS_VIRTUAL, .write = metrics_write_process},
        [MF_PROCESS_VIRTUAL_MAX] = {"process_virtual_memory_max_bytes", G, "", ALL, NULL,
                "Soft limit on the virtual address space, in bytes.", .arg = MF_PROCESS_VIRTUAL_MAX, .write = metrics_write_process},

        /* component-base's restclient package, fed by client-go. kproxy runs
         * no exec credential plugin (no calls, no certificate rotation: the
         * TTL is +Inf, as upstream's without one) and never retries a
         * request after a Retry-After answer (a retry is a new request). */
        [MF_CLIENT_EXEC_CALLS] = {"rest_client_exec_plugin_call_total", C, "call_status,code", ALL, "ALPHA",
                "Calls of an exec credential plugin, by outcome and exit code"},
        [MF_CLIENT_EXEC_ROTATION] = {"rest_client_exec_plugin_certificate_rotation_age", H, "", ALL, "ALPHA",
                "Seconds an exec plugin's client certificate lived before it was rotated",
                BUCKETS(metrics_rotation_buckets), .write = metrics_client_write_exec_rotation},
        [MF_CLIENT_EXEC_TTL] = {"rest_client_exec_plugin_ttl_seconds", G, "", ALL, "ALPHA",
                "Seconds until the first exec plugin client certificate expires; +Inf without one",
                .write = metrics_client_write_exec_ttl},
        [MF_CLIENT_RATE_LIMITER] = {"rest_client_rate_limiter_duration_seconds", H, "host,verb", ALL, "ALPHA",
                "Seconds requests waited for the client-side rate limiter, by verb and host",
                BUCKETS(metrics_latency_buckets), .write = metrics_write_client_histogram,
                .arg = METRICS_CLIENT_RATE_LIMITER},
        [MF_CLIENT_DURATION] = {"rest_client_request_duration_seconds", H, "host,verb", ALL, "ALPHA",
                "Seconds requests to the API server took, by verb and host", BUCKETS(metrics_latency_buckets),
                .write = metrics_write_client_histogram, .arg = METRICS_CLIENT_DURATION},
        [MF_CLIENT_RETRIES] = {"rest_client_request_retries_total", C, "code,host,verb", ALL, "ALPHA",
                "Requests retried after a Retry-After answer, by status, verb and host"},
        [MF_CLIENT_REQUEST_SIZE] = {"rest_client_request_size_bytes", H, "host,verb", ALL, "ALPHA",
                "Bytes of request bodies sent to the API server, by verb and host", BUCKETS(metrics_size_buckets),
                .write = metrics_write_client_histogram, .arg = METRICS_CLIENT_REQUEST_SIZE},
        [MF_CLIENT_REQUESTS] = {"rest_client_requests_total", C, "code,host,method", ALL, "ALPHA",
                "Requests to the API server, by HTTP status (<error>: no answer), method and host",
                .write = metrics_write_client_requests},
        [MF_CLIENT_RESPONSE_SIZE] = {"rest_client_response_size_bytes", H, "host,verb", ALL, "ALPHA",
                "Bytes of response bodies read from the API server, by verb and host", BUCKETS(metrics_size_buckets),
                .write = metrics_write_client_histogram, .arg = METRICS_CLIENT_RESPONSE_SIZE},
        [MF_CLIENT_TRANSPORT_ENTRIES] = {"rest_client_transport_cache_entries", G, "", ALL, "ALPHA",
                "Transports to API servers the client keeps", .write = metrics_write_client_transport, .arg = 0},
        [MF_CLIENT_TRANSPORT_CALLS] = {"rest_client_transport_create_calls_total", C, "result", ALL, "ALPHA",
                "Transports asked for, by whether one was kept already (hit), made and kept (miss) or made "
                "unkept (uncacheable)", .write = metrics_write_client_transport, .arg = 1},
};

#undef H
#undef G
#undef C
#undef ALL
#undef NFT
#undef IPT
#undef TOP
#undef FAM
#undef BUCKETS

const struct metrics_desc *metrics_descs(size_t *ret_n) {
        *ret_n = ELEMENTSOF(metrics_desc_table);
        return metrics_desc_table;
}

/* ---- observations ---- */

void metrics_sync_queued(struct metrics *m, uint8_t family) {
        struct metrics_fam *f;

        if (!m || !(f = metrics_fam(m, family)))
                return;
        metrics_slot_set(&f->last_queued, metrics_now());
}

void metrics_sync_done(struct metrics *m, uint8_t family, bool full, bool ok, double seconds) {
        struct metrics_fam *f;

        if (!m || !(f = metrics_fam(m, family)))
                return;
        /* Upstream observes every sync, failed or not, and moves the
         * timestamp ("proxy rules were last successfully synced") only after
         * a success. */
        metrics_hslot_observe(&f->sync, &metrics_desc_table[MF_SYNC], seconds);
        if (full)
                metrics_hslot_observe(&f->sync_full, &metrics_desc_table[MF_SYNC_FULL], seconds);
        else
                metrics_hslot_observe(&f->sync_partial, &metrics_desc_table[MF_SYNC_PARTIAL], seconds);
        if (ok)
                metrics_slot_set(&f->last_sync, metrics_now());
}

void metrics_apply_failed(struct metrics *m, uint8_t family, bool partial) {
        struct metrics_fam *f;

        if (!m || !(f = metrics_fam(m, family)))
                return;
        metrics_slot_add(&f->apply_failures, 1);
        if (partial)
                metrics_slot_add(&f->partial_failures, 1);
}

void metrics_rules(struct metrics *m, uint8_t family, const char *table, size_t total, size_t last) {
        struct metrics_fam *f;
        int t;

        if (!m || !(f = metrics_fam(m, family)))
                return;
        t = metrics_lookup(metrics_table_table, _METRICS_TABLE_MAX, table);
        assert(t >= 0);
        if (t < 0)
                return;
        metrics_slot_set(&f->rules_total[t], (double) total);
        metrics_slot_set(&f->rules_last[t], (double) last);
}

void metrics_no_local_endpoints(struct metrics *m, uint8_t family, const char *policy, size_t n) {
        struct metrics_fam *f;
        int p;

        if (!m || !(f = metrics_fam(m, family)))
                return;
        p = metrics_lookup(metrics_policy_table, _METRICS_POLICY_MAX, policy);
        assert(p >= 0);
        if (p < 0)
                return;
        metrics_slot_set(&f->no_local[p], (double) n);
}

void metrics_network_programming(struct metrics *m, uint8_t family, double seconds) {
        struct metrics_fam *f;

        if (m && (f = metrics_fam(m, family)))
                metrics_hslot_observe(&f->network_programming, &metrics_desc_table[MF_NETWORK_PROGRAMMING], seconds);
}

void metrics_conntrack_reconciled(struct metrics *m, uint8_t family, double seconds, size_t deleted) {
        struct metrics_fam *f;

        if (!m || !(f = metrics_fam(m, family)))
                return;
        /* Upstream adds the count even when it is 0: the series exists
         * from the first run. */
        metrics_hslot_observe(&f->conntrack, &metrics_desc_table[MF_CONNTRACK_DURATION], seconds);
        metrics_slot_add(&f->conntrack_deleted, (double) deleted);
}

void metrics_change_queued(struct metrics *m, bool endpoints) {
        if (!m)
                return;
        if (endpoints) {
                m->endpoint_changes_total++;
                m->endpoint_changes_pending++;
        } else {
                m->service_changes_total++;
                m->service_changes_pending++;
        }
}

void metrics_changes_applied(struct metrics *m) {
        if (!m)
                return;
        m->endpoint_changes_pending = 0;
        m->service_changes_pending = 0;
}

static void metrics_codes_inc(struct metrics_codes *c, unsigned code) {
        size_t i;

        for (i = 0; i < c->n && c->code[i] < code; i++)
                ;
        if (i < c->n && c->code[i] == code) {
                c->count[i]++;
                return;
        }
        if (c->n == METRICS_MAX_CODES) {
                log_v(2, "metrics: no room to count HTTP status %u, ignoring", code);
                return;
        }
        memmove(&c->code[i + 1], &c->code[i], (c->n - i) * sizeof c->code[0]);
        memmove(&c->count[i + 1], &c->count[i], (c->n - i) * sizeof c->count[0]);
        c->code[i] = code;
        c->count[i] = 1;
        c->n++;
}

void metrics_health_answer(struct metrics *m, const char *what, unsigned code) {
        if (!m)
                return;
        if (strcmp(what, "healthz") == 0)
                metrics_codes_inc(&m->healthz, code);
        else if (strcmp(what, "livez") == 0)
                metrics_codes_inc(&m->livez, code);
        else
                assert(!"metrics_health_answer: what is \"healthz\" or \"livez\"");
}

void metrics_api_request(struct metrics *m, const char *method, const char *host, unsigned code, bool watch,
                         double seconds, double waited, size_t response_bytes) {
        if (m)
                metrics_client_request(m->client, method, host, code, watch, seconds, waited, response_bytes);
}

void metrics_api_transport(struct metrics *m) {
        if (m)
                metrics_client_transport(m->client);
}

/* ---- the exposition ---- */

const struct kproxy_config *metrics_config(const struct metrics *m) {
        return m->config;
}

static void metrics_write_descs(const struct metrics *m, const struct metrics_desc *d, size_t n, struct buf *b) {
        for (size_t i = 0; i < n; i++)
                if ((d[i].modes & m->mode) && d[i].write)
                        d[i].write(m, &d[i], b);
}

void metrics_write(const struct metrics *m, struct buf *b) {
        assert(m);
        metrics_write_descs(m, metrics_desc_table, _MF_MAX, b);
        if (m->backend_expose)
                m->backend_expose(m->backend_userdata, b);
}

bool metrics_describe_backend(const struct metrics *m, struct buf *b) {
        if (!m->backend_describe)
                return false;
        m->backend_describe(m->backend_userdata, b);
        return true;
}

void metrics_set_backend(struct metrics *m, void (*expose)(void *userdata, struct buf *out),
                         void (*describe)(void *userdata, struct buf *out), void *userdata) {
        if (!m)
                return;
        m->backend_expose = expose;
        m->backend_describe = describe;
        m->backend_userdata = userdata;
}

/* ---- the registry ---- */

struct metrics *metrics_registry_new(const struct kproxy_config *c, const char *mode) {
        struct metrics *m = xcalloc(1, sizeof *m);

        m->config = c;
        m->mode = strcmp(mode, "nftables") == 0    ? METRICS_NFTABLES
                  : strcmp(mode, "userspace") == 0 ? METRICS_USERSPACE
                                                   : METRICS_IPTABLES;
        m->client = metrics_client_new((const struct metrics_desc *const[_METRICS_CLIENT_HISTOGRAM_MAX]) {
                [METRICS_CLIENT_RATE_LIMITER] = &metrics_desc_table[MF_CLIENT_RATE_LIMITER],
                [METRICS_CLIENT_DURATION] = &metrics_desc_table[MF_CLIENT_DURATION],
                [METRICS_CLIENT_REQUEST_SIZE] = &metrics_desc_table[MF_CLIENT_REQUEST_SIZE],
                [METRICS_CLIENT_RESPONSE_SIZE] = &metrics_desc_table[MF_CLIENT_RESPONSE_SIZE],
        });
        /* Upstream's nfacct collectors exist when a netlink client could be
         * made; the counters themselves are read (or found missing) at each
         * scrape. */
        if (m->mode == METRICS_IPTABLES) {
                struct metrics_acct *acct = xcalloc(1, sizeof *acct);
                int r = nfacct_open(&acct->reader);
                if (r < 0) {
                        log_warning_errno(r, "Failed to open nfnetlink_acct, the nfacct packet counters will not be "
                                          "served");
                        free(acct);
                } else {
                        m->acct = acct;
                }
        }
        return m;
}

void metrics_registry_free(struct metrics *m) {
        if (!m)
                return;
        if (m->acct)
                nfacct_close(m->acct->reader);
        free(m->acct);
        metrics_client_free(m->client);
        free(m);
}

void metrics_attach_server(struct metrics *m, struct mhd_server *s) {
        m->server = s;
}

struct mhd_server *metrics_server(const struct metrics *m) {
        return m->server;
}

void metrics_set_debug(struct metrics *m,
                       void (*debug)(void *userdata, const char *path, const struct mhd_request *req,
                                     struct mhd_reply *reply),
                       void *userdata) {
        if (!m)
                return;
        m->debug = debug;
        m->debug_userdata = userdata;
}

bool metrics_debug(const struct metrics *m, const char *path, const struct mhd_request *req, struct mhd_reply *reply) {
        if (!m->debug)
                return false;
        m->debug(m->debug_userdata, path, req, reply);
        return true;
}
