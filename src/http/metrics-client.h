/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The API client's families, rest_client_* (metrics-client.c): their own
 * state, fed through metrics.c's observers (metrics_api_request(),
 * metrics_api_transport()) and written by the table's rows, which hand
 * the writers that state. Nothing here knows struct metrics.
 */
#include <stdbool.h>
#include <stddef.h>

#include "http/metrics-expo.h"

struct buf;
struct metrics_client;

/* rest_client_*_seconds and _bytes by host and verb; a row's arg: the
 * series' kind. */
enum metrics_client_histogram {
        METRICS_CLIENT_RATE_LIMITER,
        METRICS_CLIENT_DURATION,
        METRICS_CLIENT_REQUEST_SIZE,
        METRICS_CLIENT_RESPONSE_SIZE,
        _METRICS_CLIENT_HISTOGRAM_MAX,
};

/* hist[k]: the family each kind of histogram is observed into (its
 * buckets); borrowed, and must outlive the state. NULL when out of
 * memory. */
struct metrics_client *metrics_client_new(const struct metrics_desc *const hist[_METRICS_CLIENT_HISTOGRAM_MAX]);
struct metrics_client *metrics_client_free(struct metrics_client *c);

/* One request, as metrics_api_request() (metrics.h) describes it. */
void metrics_client_request(struct metrics_client *c, const char *method, const char *host, unsigned code, bool watch,
                            double seconds, double waited, size_t response_bytes);
/* The client built its transport. */
void metrics_client_transport(struct metrics_client *c);

/* The families' writers: rest_client_requests_total; the histograms (the
 * row's arg: an enum metrics_client_histogram); the transport cache's two
 * (arg 0: entries, 1: calls). */
void metrics_client_write_requests(const struct metrics_client *c, const struct metrics_desc *d, struct buf *b);
void metrics_client_write_histogram(const struct metrics_client *c, const struct metrics_desc *d, struct buf *b);
void metrics_client_write_transport(const struct metrics_client *c, const struct metrics_desc *d, struct buf *b);
/* The exec plugin's two, which kproxy never feeds: the table's writer
 * signature, with nothing read from m. */
void metrics_client_write_exec_ttl(const struct metrics *m, const struct metrics_desc *d, struct buf *b);
void metrics_client_write_exec_rotation(const struct metrics *m, const struct metrics_desc *d, struct buf *b);
