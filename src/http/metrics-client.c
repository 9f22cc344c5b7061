/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The API client's families as component-base's restclient package
 * registers them for client-go (rest_client_*).
 *
 * client-go counts a request in rest_client_requests_total when its
 * response headers arrive (or "<error>" when none came); for a request
 * that is not a watch it also records the whole duration, the request
 * body's size (0 for a GET), the wait for the client-side rate limiter and
 * the response body's size. A watch is only counted. kproxy's client
 * reports the same moments (kube/client.c).
 *
 * Series are few (one API server, GET), so they live in small sorted
 * arrays: Go sorts a family's series by their label values.
 *
 * The state is this file's own and it knows nothing of the server's: the
 * server (metrics.c) owns one, feeds it from its observers and hands it to
 * these writers from its table, so the calls run one way, down.
 */
#include "http/metrics-client.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/log.h"

/* More than one API server and a few verbs would already be unusual. */
#define METRICS_CLIENT_MAX_SERIES 8
#define METRICS_CLIENT_MAX_COUNTS 32

/* A histogram series of one host and verb. */
struct metrics_client_series {
        char *host, *verb;
        bool set[_METRICS_CLIENT_HISTOGRAM_MAX];
        struct metrics_histogram h[_METRICS_CLIENT_HISTOGRAM_MAX];
};

/* rest_client_requests_total{code,host,method}. */
struct metrics_client_count {
        char code[16];
        char *host, *method;
        uint64_t n;
};

struct metrics_client {
        const struct metrics_desc *hist[_METRICS_CLIENT_HISTOGRAM_MAX];       /* borrowed */
        struct metrics_client_series series[METRICS_CLIENT_MAX_SERIES];
        size_t n_series;
        struct metrics_client_count counts[METRICS_CLIENT_MAX_COUNTS];
        size_t n_counts;
        bool transport;                 /* the client built its transport */
        bool full_warned;
};

struct metrics_client *metrics_client_new(const struct metrics_desc *const hist[_METRICS_CLIENT_HISTOGRAM_MAX]) {
        struct metrics_client *c = xcalloc(1, sizeof *c);

        memcpy(c->hist, hist, sizeof c->hist);
        return c;
}

struct metrics_client *metrics_client_free(struct metrics_client *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n_series; i++) {
                free(c->series[i].host);
                free(c->series[i].verb);
        }
        for (size_t i = 0; i < c->n_counts; i++) {
                free(c->counts[i].host);
                free(c->counts[i].method);
        }
        free(c);
        return NULL;
}

static void metrics_client_full(struct metrics_client *c, const char *what) {
        if (!c->full_warned)
                log_warning("metrics: no room for another %s series of the API client, ignoring it", what);
        c->full_warned = true;
}

/* The series of (host, verb), inserted in order when new; NULL when full
 * or out of memory. */
static struct metrics_client_series *metrics_client_series(struct metrics_client *c, const char *host,
                                                           const char *verb) {
        size_t i;
        int d = 1;

        for (i = 0; i < c->n_series; i++) {
                d = strcmp(c->series[i].host, host);
                if (d == 0)
                        d = strcmp(c->series[i].verb, verb);
                if (d >= 0)
                        break;
        }
        if (i < c->n_series && d == 0)
                return &c->series[i];
        if (c->n_series == METRICS_CLIENT_MAX_SERIES) {
                metrics_client_full(c, "host and verb");
                return NULL;
        }
        _cleanup_free_ char *h = strdup(host), *v = strdup(verb);
        if (!h || !v)
                return NULL;
        memmove(&c->series[i + 1], &c->series[i], (c->n_series - i) * sizeof c->series[0]);
        c->series[i] = (struct metrics_client_series) {.host = TAKE_PTR(h), .verb = TAKE_PTR(v)};
        c->n_series++;
        return &c->series[i];
}

static void metrics_client_count(struct metrics_client *c, const char *code, const char *host, const char *method) {
        size_t i;
        int d = 1;

        for (i = 0; i < c->n_counts; i++) {
                const struct metrics_client_count *k = &c->counts[i];

                d = strcmp(k->code, code);
                if (d == 0)
                        d = strcmp(k->host, host);
                if (d == 0)
                        d = strcmp(k->method, method);
                if (d >= 0)
                        break;
        }
        if (i < c->n_counts && d == 0) {
                c->counts[i].n++;
                return;
        }
        if (c->n_counts == METRICS_CLIENT_MAX_COUNTS) {
                metrics_client_full(c, "status code");
                return;
        }
        _cleanup_free_ char *h = strdup(host), *mm = strdup(method);
        if (!h || !mm)
                return;
        memmove(&c->counts[i + 1], &c->counts[i], (c->n_counts - i) * sizeof c->counts[0]);
        c->counts[i] = (struct metrics_client_count) {.host = TAKE_PTR(h), .method = TAKE_PTR(mm), .n = 1};
        snprintf(c->counts[i].code, sizeof c->counts[i].code, "%s", code);
        c->n_counts++;
}

static void metrics_client_observe(const struct metrics_client *c, struct metrics_client_series *s,
                                   enum metrics_client_histogram k, double v) {
        s->set[k] = true;
        metrics_histogram_observe(&s->h[k], c->hist[k], v);
}

void metrics_client_request(struct metrics_client *c, const char *method, const char *host, unsigned code, bool watch,
                            double seconds, double waited, size_t response_bytes) {
        struct metrics_client_series *s;
        char text[16];

        method = method ? method : "";
        host = host ? host : "";
        /* client-go's updateURLMetrics: any transport error is "<error>". */
        if (code == 0)
                snprintf(text, sizeof text, "<error>");
        else
                snprintf(text, sizeof text, "%u", code);
        metrics_client_count(c, text, host, method);
        if (watch || !(s = metrics_client_series(c, host, method)))
                return;
        metrics_client_observe(c, s, METRICS_CLIENT_DURATION, seconds);
        metrics_client_observe(c, s, METRICS_CLIENT_RATE_LIMITER, waited);
        metrics_client_observe(c, s, METRICS_CLIENT_REQUEST_SIZE, 0);
        if (code != 0)
                metrics_client_observe(c, s, METRICS_CLIENT_RESPONSE_SIZE, (double) response_bytes);
}

void metrics_client_transport(struct metrics_client *c) {
        c->transport = true;
}

/* ---- writers ---- */

void metrics_client_write_requests(const struct metrics_client *c, const struct metrics_desc *d, struct buf *b) {
        _cleanup_(buf_done) struct buf labels = BUF_INIT;

        if (c->n_counts == 0)
                return;
        metrics_put_header(b, d);
        for (size_t i = 0; i < c->n_counts; i++) {
                buf_clear(&labels);
                metrics_put_label(&labels, "code", c->counts[i].code);
                metrics_put_label(&labels, "host", c->counts[i].host);
                metrics_put_label(&labels, "method", c->counts[i].method);
                metrics_put_sample(b, d->name, labels.data, (double) c->counts[i].n);
        }
}

void metrics_client_write_histogram(const struct metrics_client *c, const struct metrics_desc *d, struct buf *b) {
        _cleanup_(buf_done) struct buf labels = BUF_INIT;
        size_t k = d->arg;
        bool header = false;

        for (size_t i = 0; i < c->n_series; i++) {
                if (!c->series[i].set[k])
                        continue;
                if (!header)
                        metrics_put_header(b, d);
                header = true;
                buf_clear(&labels);
                metrics_put_label(&labels, "host", c->series[i].host);
                metrics_put_label(&labels, "verb", c->series[i].verb);
                metrics_put_histogram(b, d, labels.data, &c->series[i].h[k]);
        }
}

/* client-go's transport cache: kproxy builds one transport for its API
 * server connection, and keeps it (arg 0: the entries; 1: the calls). */
void metrics_client_write_transport(const struct metrics_client *c, const struct metrics_desc *d, struct buf *b) {
        if (d->arg == 0) {
                metrics_put_header(b, d);
                metrics_put_sample(b, d->name, NULL, c->transport ? 1 : 0);
        } else if (c->transport) {
                metrics_put_header(b, d);
                metrics_put_sample(b, d->name, "result=\"miss\"", 1);
        }
}

void metrics_client_write_exec_ttl(const struct metrics *m, const struct metrics_desc *d, struct buf *b) {
        (void) m;
        metrics_put_header(b, d);
        metrics_put_sample(b, d->name, NULL, INFINITY);
}

void metrics_client_write_exec_rotation(const struct metrics *m, const struct metrics_desc *d, struct buf *b) {
        static const struct metrics_histogram empty;

        (void) m;
        metrics_put_header(b, d);
        metrics_put_histogram(b, d, NULL, &empty);
}
