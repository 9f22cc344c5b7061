/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the metrics server: a fixed set of counters, gauges and
 * histograms in one struct, written by the sync loop through small
 * observation functions and turned into Prometheus text only when scraped.
 * No registry: every family kube-proxy 1.31/1.32 exposes in iptables mode is
 * spelled out below, in the order the Go client sorts them (by name), so the
 * exposition is what a scraper of upstream's kube-proxy sees:
 *
 *  - names, types, labels and buckets are upstream's (pkg/proxy/metrics);
 *  - HELP starts with "[ALPHA] ", which component-base adds for the
 *    stability level of every kube-proxy metric;
 *  - a plain counter or gauge is printed from the start (as 0), a histogram
 *    with all its buckets at 0; a family with a label prints nothing until a
 *    first label value is used (Go's *Vec types);
 *  - numbers are formatted like Go's strconv.FormatFloat(v, 'g', -1, 64).
 *
 * Kubernetes 1.33 added an ip_family label to most kubeproxy_ families; the
 * observation API has no family, so kproxy serves the 1.31/1.32 shape.
 *
 * Served next to /metrics, as upstream's metrics server does: /healthz
 * (component-base's healthz with only its "ping" check), /proxyMode and
 * /configz. Everything else is Go's 404.
 */
#include "http/metrics.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "http/mhd.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/inet.h"
#include "util/log.h"

/* Scrapers send one small request at a time; this only bounds what a
 * misbehaving client can hold. */
#define METRICS_CONNECTION_LIMIT 256u

enum metrics_table {
        METRICS_TABLE_FILTER,
        METRICS_TABLE_NAT,
        _METRICS_TABLE_MAX,
};

/* Upstream sets these two only: kube-proxy's iptables rules live there. */
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

/* Upstream's buckets. The sync histograms use ExponentialBuckets(0.001, 2,
 * 15): 1 ms to 16.384 s, each bound the previous one doubled (in floating
 * point, as Go computes them). Network programming merges linear ranges
 * after a leading 0 (component-base's MergeBuckets starts from one zero
 * bucket): 0.25 s, 0.5 s, then whole seconds to 59, every 5 s to 115, every
 * 30 s to 5 min. */
#define METRICS_SYNC_BUCKETS 15
#define METRICS_NETPROG_BUCKETS (1 + 2 + 59 + 12 + 7)
#define METRICS_MAX_BUCKETS METRICS_NETPROG_BUCKETS

static void metrics_bounds_init(double sync[METRICS_SYNC_BUCKETS], double netprog[METRICS_NETPROG_BUCKETS]) {
        double v = 0.001;
        size_t n = 0;

        for (size_t i = 0; i < METRICS_SYNC_BUCKETS; i++, v *= 2)
                sync[i] = v;

        netprog[n++] = 0;
        for (v = 0.25; n < 1 + 2; v += 0.25)
                netprog[n++] = v;
        for (v = 1; n < 1 + 2 + 59; v += 1)
                netprog[n++] = v;
        for (v = 60; n < 1 + 2 + 59 + 12; v += 5)
                netprog[n++] = v;
        for (v = 120; n < METRICS_NETPROG_BUCKETS; v += 30)
                netprog[n++] = v;
}

struct metrics_histogram {
        const double *bounds;
        size_t n_bounds;
        uint64_t counts[METRICS_MAX_BUCKETS];   /* per bucket, not cumulative */
        uint64_t count;                         /* also the +Inf bucket */
        double sum;
};

/* One value of a labelled gauge; unset values are not printed. */
struct metrics_slot {
        bool set;
        double value;
};

/* A counter labelled with HTTP status codes. Health answers use two codes,
 * so a handful of slots is plenty; they are kept sorted. */
#define METRICS_MAX_CODES 8
struct metrics_codes {
        size_t n;
        unsigned code[METRICS_MAX_CODES];
        uint64_t count[METRICS_MAX_CODES];
};

struct metrics {
        struct mhd_server *server;
        const struct kproxy_config *config;
        bool iptables;                  /* the iptables-only families are served */

        double sync_bounds[METRICS_SYNC_BUCKETS];
        double network_programming_bounds[METRICS_NETPROG_BUCKETS];
        struct metrics_histogram sync, sync_full, sync_partial, network_programming;
        double last_sync, last_queued;  /* Unix seconds; 0 until first set */
        bool sync_failed;               /* the sync in progress has failed */
        uint64_t endpoint_changes_pending, endpoint_changes_total;
        uint64_t service_changes_pending, service_changes_total;
        uint64_t restore_failures, partial_restore_failures;
        struct metrics_slot rules_total[_METRICS_TABLE_MAX], rules_last[_METRICS_TABLE_MAX];
        struct metrics_slot no_local_endpoints[_METRICS_POLICY_MAX];
        struct metrics_codes healthz, livez;
};

/* Go's time.Now().UnixNano() / 1e9, as prometheus' SetToCurrentTime. */
static double metrics_now(void) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (double) ((int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec) / 1e9;
}

static void metrics_histogram_init(struct metrics_histogram *h, const double *bounds, size_t n) {
        *h = (struct metrics_histogram) {.bounds = bounds, .n_bounds = n};
}

/* As client_golang: the first bucket whose upper bound is >= v; a value
 * above every bound lands only in +Inf. */
static void metrics_histogram_observe(struct metrics_histogram *h, double v) {
        for (size_t i = 0; i < h->n_bounds; i++)
                if (v <= h->bounds[i]) {
                        h->counts[i]++;
                        break;
                }
        h->count++;
        h->sum += v;
}

void metrics_sync_done(struct metrics *m, bool full, double seconds) {
        if (!m)
                return;
        /* Upstream observes every sync, failed or not, and moves the
         * timestamp ("proxy rules were last successfully synced") only after
         * a success. */
        metrics_histogram_observe(&m->sync, seconds);
        metrics_histogram_observe(full ? &m->sync_full : &m->sync_partial, seconds);
        if (!m->sync_failed)
                m->last_sync = metrics_now();
        m->sync_failed = false;
}

void metrics_sync_failed(struct metrics *m) {
        if (m)
                m->sync_failed = true;
}

void metrics_restore_failed(struct metrics *m, bool partial) {
        if (!m)
                return;
        m->restore_failures++;
        if (partial)
                m->partial_restore_failures++;
        m->sync_failed = true;
}

void metrics_rules(struct metrics *m, const char *table, size_t total, size_t last) {
        int t;

        if (!m)
                return;
        t = metrics_lookup(metrics_table_table, _METRICS_TABLE_MAX, table);
        assert(t >= 0);
        if (t < 0)
                return;
        m->rules_total[t] = (struct metrics_slot) {true, (double) total};
        m->rules_last[t] = (struct metrics_slot) {true, (double) last};
}

void metrics_change_queued(struct metrics *m, bool endpoints) {
        if (!m)
                return;
        /* Every change counts towards the totals; upstream's Sync() then
         * stamps the queue time. */
        if (endpoints) {
                m->endpoint_changes_total++;
                m->endpoint_changes_pending++;
        } else {
                m->service_changes_total++;
                m->service_changes_pending++;
        }
        m->last_queued = metrics_now();
}

void metrics_changes_applied(struct metrics *m) {
        if (!m)
                return;
        m->endpoint_changes_pending = 0;
        m->service_changes_pending = 0;
}

void metrics_network_programming(struct metrics *m, double seconds) {
        if (m)
                metrics_histogram_observe(&m->network_programming, seconds);
}

void metrics_no_local_endpoints(struct metrics *m, const char *policy, size_t n) {
        int p;

        if (!m)
                return;
        p = metrics_lookup(metrics_policy_table, _METRICS_POLICY_MAX, policy);
        assert(p >= 0);
        if (p < 0)
                return;
        m->no_local_endpoints[p] = (struct metrics_slot) {true, (double) n};
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

/* strconv.FormatFloat(v, 'g', -1, 64): the shortest digits that read back
 * as v, in exponent form when the decimal exponent is below -4 or at least
 * 6 (Go's shortest 'g' decides with a precision of 6, whatever the number
 * of digits): 100000 and 0.0001, but 1e+06, 1.234567e+06 and 1e-05. The
 * exponent has at least two digits. The specials are Prometheus' +Inf, -Inf
 * and NaN. */
void metrics_format_float(struct buf *b, double v) {
        char e[40], digits[24];
        int nd = 0, exp;
        const char *p;

        if (isnan(v)) {
                buf_puts(b, "NaN");
                return;
        }
        if (isinf(v)) {
                buf_puts(b, v > 0 ? "+Inf" : "-Inf");
                return;
        }
        if (v == 0) {           /* -0 too, as Go's writer does */
                buf_putc(b, '0');
                return;
        }
        /* The correctly rounded p-digit value is the shortest that round-trips
         * for the smallest p that round-trips at all. */
        for (int prec = 1; prec <= 17; prec++) {
                snprintf(e, sizeof e, "%.*e", prec - 1, v);
                if (strtod(e, NULL) == v)
                        break;
        }
        p = e;
        if (*p == '-')
                p++;
        for (; *p && *p != 'e'; p++)
                if (*p >= '0' && *p <= '9')
                        digits[nd++] = *p;
        exp = atoi(p + 1);
        if (exp < -4 || exp >= 6) {
                buf_puts(b, e); /* C's %e has Go's layout: d.ddde+XX */
                return;
        }
        if (v < 0)
                buf_putc(b, '-');
        if (exp < 0) {
                buf_puts(b, "0.");
                for (int i = -1; i > exp; i--)
                        buf_putc(b, '0');
                buf_put(b, digits, (size_t) nd);
                return;
        }
        for (int i = 0; i <= exp; i++)
                buf_putc(b, i < nd ? digits[i] : '0');
        if (nd > exp + 1) {
                buf_putc(b, '.');
                buf_put(b, digits + exp + 1, (size_t) (nd - exp - 1));
        }
}

void metrics_put_family(struct buf *b, const char *name, const char *type, const char *help) {
        buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void metrics_put_sample(struct buf *b, const char *name, const char *labels, double v) {
        buf_puts(b, name);
        if (labels)
                buf_printf(b, "{%s}", labels);
        buf_putc(b, ' ');
        metrics_format_float(b, v);
        buf_putc(b, '\n');
}

static void metrics_put_histogram(struct buf *b, const char *name, const char *help,
                                  const struct metrics_histogram *h) {
        uint64_t cumulative = 0;

        metrics_put_family(b, name, "histogram", help);
        for (size_t i = 0; i < h->n_bounds; i++) {
                cumulative += h->counts[i];
                buf_printf(b, "%s_bucket{le=\"", name);
                metrics_format_float(b, h->bounds[i]);
                buf_puts(b, "\"} ");
                metrics_format_float(b, (double) cumulative);
                buf_putc(b, '\n');
        }
        buf_printf(b, "%s_bucket{le=\"+Inf\"} ", name);
        metrics_format_float(b, (double) h->count);
        buf_printf(b, "\n%s_sum ", name);
        metrics_format_float(b, h->sum);
        buf_printf(b, "\n%s_count ", name);
        metrics_format_float(b, (double) h->count);
        buf_putc(b, '\n');
}

static void metrics_put_scalar(struct buf *b, const char *name, const char *type, const char *help, double v) {
        metrics_put_family(b, name, type, help);
        metrics_put_sample(b, name, NULL, v);
}

/* A labelled gauge: nothing at all until some value has been set. The
 * label values come from fixed tables, already sorted as Go sorts them. */
static void metrics_put_slots(struct buf *b, const char *name, const char *help, const char *label,
                              const char *const *values, const struct metrics_slot *slots, size_t n) {
        bool any = false;
        char labels[64];

        for (size_t i = 0; i < n; i++)
                any = any || slots[i].set;
        if (!any)
                return;
        metrics_put_family(b, name, "gauge", help);
        for (size_t i = 0; i < n; i++) {
                if (!slots[i].set)
                        continue;
                snprintf(labels, sizeof labels, "%s=\"%s\"", label, values[i]);
                metrics_put_sample(b, name, labels, slots[i].value);
        }
}

/* Go sorts label values as strings; three-digit codes sort the same either
 * way. */
static void metrics_put_codes(struct buf *b, const char *name, const char *help, const struct metrics_codes *c) {
        char labels[32];

        if (c->n == 0)
                return;
        metrics_put_family(b, name, "counter", help);
        for (size_t i = 0; i < c->n; i++) {
                snprintf(labels, sizeof labels, "code=\"%u\"", c->code[i]);
                metrics_put_sample(b, name, labels, (double) c->count[i]);
        }
}

#define P "kubeproxy_"
#define SYNC P "sync_proxy_rules_"

static void metrics_write(const struct metrics *m, struct buf *b) {
        assert(m);

        metrics_put_histogram(b, P "network_programming_duration_seconds",
                              "[ALPHA] Seconds from a change to a Service or its endpoints in the API to the "
                              "rules for it being in the kernel",
                              &m->network_programming);
        metrics_put_codes(b, P "proxy_healthz_total", "[ALPHA] Answers of the proxy's /healthz, by HTTP status",
                          &m->healthz);
        metrics_put_codes(b, P "proxy_livez_total", "[ALPHA] Answers of the proxy's /livez, by HTTP status",
                          &m->livez);
        if (m->iptables) {
                metrics_put_histogram(b, P "sync_full_proxy_rules_duration_seconds",
                                      "[ALPHA] Seconds a full sync of the proxy rules took", &m->sync_full);
                metrics_put_histogram(b, P "sync_partial_proxy_rules_duration_seconds",
                                      "[ALPHA] Seconds a partial sync of the proxy rules took", &m->sync_partial);
        }
        metrics_put_histogram(b, SYNC "duration_seconds",
                              "[ALPHA] Seconds a sync of the proxy rules took, full or partial", &m->sync);
        metrics_put_scalar(b, SYNC "endpoint_changes_pending", "gauge",
                           "[ALPHA] EndpointSlice changes not yet in the proxy rules",
                           (double) m->endpoint_changes_pending);
        metrics_put_scalar(b, SYNC "endpoint_changes_total", "counter",
                           "[ALPHA] EndpointSlice changes seen since start", (double) m->endpoint_changes_total);
        if (m->iptables) {
                metrics_put_slots(b, SYNC "iptables_last",
                                  "[ALPHA] iptables rules kube-proxy wrote in its last sync, by table", "table",
                                  metrics_table_table, m->rules_last, _METRICS_TABLE_MAX);
                metrics_put_scalar(b, SYNC "iptables_partial_restore_failures_total", "counter",
                                   "[ALPHA] iptables-restore runs of partial syncs that failed",
                                   (double) m->partial_restore_failures);
                metrics_put_scalar(b, SYNC "iptables_restore_failures_total", "counter",
                                   "[ALPHA] iptables-restore runs that failed", (double) m->restore_failures);
                metrics_put_slots(b, SYNC "iptables_total",
                                  "[ALPHA] iptables rules kube-proxy owns, by table", "table",
                                  metrics_table_table, m->rules_total, _METRICS_TABLE_MAX);
        }
        metrics_put_scalar(b, SYNC "last_queued_timestamp_seconds", "gauge",
                           "[ALPHA] Unix time a sync of the proxy rules was last asked for", m->last_queued);
        metrics_put_scalar(b, SYNC "last_timestamp_seconds", "gauge",
                           "[ALPHA] Unix time of the last successful sync of the proxy rules", m->last_sync);
        if (!m->iptables)
                metrics_put_scalar(b, SYNC "nftables_sync_failures_total", "counter",
                                   "[ALPHA] nftables syncs whose transaction failed", (double) m->restore_failures);
        metrics_put_slots(b, SYNC "no_local_endpoints_total",
                          "[ALPHA] Services with a Local traffic policy and no local endpoints, by policy",
                          "traffic_policy", metrics_policy_table, m->no_local_endpoints, _METRICS_POLICY_MAX);
        metrics_put_scalar(b, SYNC "service_changes_pending", "gauge",
                           "[ALPHA] Service changes not yet in the proxy rules",
                           (double) m->service_changes_pending);
        metrics_put_scalar(b, SYNC "service_changes_total", "counter", "[ALPHA] Service changes seen since start",
                           (double) m->service_changes_total);

        /* The Go client's process collector, unannotated ("process_" sorts
         * after "kubeproxy_"). */
        metrics_process_write(b);
}

#undef SYNC
#undef P

/* component-base's healthz with no checks installs "ping", which always
 * passes: "ok", or with ?verbose the list of checks. ?exclude=NAME skips a
 * check; names that match none are listed in a warning, sorted and quoted. */
struct metrics_healthz_args {
        bool verbose;
        bool exclude_ping;
        size_t n_unknown;
        const char *unknown[16];
};

static void metrics_healthz_arg(void *userdata, const char *key, const char *value) {
        struct metrics_healthz_args *a = userdata;

        if (strcmp(key, "verbose") == 0)
                a->verbose = true;
        if (strcmp(key, "exclude") != 0)
                return;
        value = value ? value : "";
        if (strcmp(value, "ping") == 0) {
                a->exclude_ping = true;
                return;
        }
        for (size_t i = 0; i < a->n_unknown; i++)
                if (strcmp(a->unknown[i], value) == 0)
                        return;
        if (a->n_unknown < ELEMENTSOF(a->unknown))
                a->unknown[a->n_unknown++] = value;
}

static int metrics_strcmp(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* Go's %q, for the names of checks that could not be excluded. */
static void metrics_put_quoted(struct buf *b, const char *s) {
        buf_putc(b, '"');
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p == '"' || *p == '\\')
                        buf_printf(b, "\\%c", *p);
                else if (*p < 0x20 || *p >= 0x7f)
                        buf_printf(b, "\\x%02x", *p);
                else
                        buf_putc(b, (char) *p);
        }
        buf_putc(b, '"');
}

static void metrics_healthz(const struct mhd_request *req, struct mhd_reply *reply) {
        struct metrics_healthz_args a = {0};

        mhd_request_foreach_arg(req, metrics_healthz_arg, &a);
        reply->content_type = "text/plain; charset=utf-8";
        reply->nosniff = true;
        if (!a.verbose) {
                buf_puts(&reply->body, "ok");
                return;
        }
        buf_puts(&reply->body, a.exclude_ping ? "[+]ping excluded: ok\n" : "[+]ping ok\n");
        if (a.n_unknown > 0) {
                qsort(a.unknown, a.n_unknown, sizeof a.unknown[0], metrics_strcmp);
                buf_puts(&reply->body, "warn: some health checks cannot be excluded: no matches for ");
                for (size_t i = 0; i < a.n_unknown; i++) {
                        if (i > 0)
                                buf_putc(&reply->body, ',');
                        metrics_put_quoted(&reply->body, a.unknown[i]);
                }
                buf_putc(&reply->body, '\n');
        }
        buf_puts(&reply->body, "healthz check passed\n");
}

/* Paths are exact, as on upstream's PathRecorderMux, and the method is
 * ignored, as its handlers do. */
static void metrics_handle(void *userdata, const struct mhd_request *req, struct mhd_reply *reply) {
        struct metrics *m = userdata;
        const char *path = mhd_request_path(req);

        if (strcmp(path, "/metrics") == 0) {
                /* What promhttp negotiates for a client that does not ask
                 * for protobuf; kproxy only speaks the text format. */
                reply->content_type = "text/plain; version=0.0.4; charset=utf-8";
                metrics_write(m, &reply->body);
        } else if (strcmp(path, "/healthz") == 0) {
                metrics_healthz(req, reply);
        } else if (strcmp(path, "/healthz/ping") == 0) {
                /* A bare check handler sets no type; Go sniffs text/plain. */
                reply->content_type = "text/plain; charset=utf-8";
                buf_puts(&reply->body, "ok");
        } else if (strcmp(path, "/proxyMode") == 0) {
                reply->content_type = "text/plain; charset=utf-8";
                reply->nosniff = true;
                buf_puts(&reply->body, proxy_mode_to_string(m->config->mode));
        } else if (strcmp(path, "/configz") == 0) {
                int r;

                /* configz marshals a map of one component's config. */
                reply->content_type = "application/json";
                reply->nosniff = true;
                buf_puts(&reply->body, "{\"kubeproxy.config.k8s.io\":");
                r = config_format_json(m->config, &reply->body);
                buf_putc(&reply->body, '}');
                if (r < 0) {
                        /* Go's http.Error after a failed json.Marshal. */
                        buf_clear(&reply->body);
                        buf_printf(&reply->body, "error marshaling json: %s\n", strerror(-r));
                        reply->status = 500;
                        reply->content_type = "text/plain; charset=utf-8";
                }
        } else {
                mhd_reply_not_found(reply);
        }
}

static void metrics_freep(struct metrics **m) {
        metrics_free(*m);
}

int metrics_new(struct ev_loop *l, const char *bind, const struct kproxy_config *c, struct metrics **ret) {
        _cleanup_(metrics_freep) struct metrics *m = NULL;
        struct inet_addr a;
        uint16_t port;
        int r;

        assert(l);
        assert(c);
        assert(ret);

        if (!bind) {
                *ret = NULL;
                return 0;
        }
        r = mhd_parse_bind(bind, &a, &port);
        if (r < 0)
                return log_error_errno(r, "Invalid metrics bind address \"%s\" (must be IP:port)", bind);
        if (port == 0) {
                log_v(2, "Metrics server disabled (port 0 in \"%s\")", bind);
                *ret = NULL;
                return 0;
        }

        m = calloc(1, sizeof *m);
        if (!m)
                return log_error_errno(-ENOMEM, "Failed to start metrics server on %s", bind);
        m->config = c;
        m->iptables = c->mode == PROXY_MODE_IPTABLES;
        metrics_bounds_init(m->sync_bounds, m->network_programming_bounds);
        metrics_histogram_init(&m->sync, m->sync_bounds, METRICS_SYNC_BUCKETS);
        metrics_histogram_init(&m->sync_full, m->sync_bounds, METRICS_SYNC_BUCKETS);
        metrics_histogram_init(&m->sync_partial, m->sync_bounds, METRICS_SYNC_BUCKETS);
        metrics_histogram_init(&m->network_programming, m->network_programming_bounds, METRICS_NETPROG_BUCKETS);

        r = mhd_server_new(l, "metrics server", &a, port, METRICS_CONNECTION_LIMIT,
                           c->bind_address_hard_fail ? 0 : MHD_BIND_RETRY_MS, metrics_handle, m, &m->server);
        if (r < 0)
                /* Upstream: "starting metrics server failed: listen tcp ...". */
                return log_error_errno(r, "Failed to start metrics server on %s", bind);

        log_v(3, "Starting metrics server on %s", bind);
        *ret = TAKE_PTR(m);
        return 0;
}

struct metrics *metrics_free(struct metrics *m) {
        if (!m)
                return NULL;
        mhd_server_free(m->server);
        free(m);
        return NULL;
}

int metrics_port(const struct metrics *m) {
        return m ? mhd_server_port(m->server) : 0;
}
