/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The Prometheus text format's writers (metrics-expo.c) and what they
 * write from: a family's description (the rows of metrics.c's table) and a
 * histogram's counts. The writers of each family build on these alone, so
 * they stand below the table that names them.
 */
#include <stddef.h>
#include <stdint.h>

struct buf;
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
        METRICS_USERSPACE = 1 << 2,
        METRICS_ALL = METRICS_IPTABLES | METRICS_NFTABLES | METRICS_USERSPACE,
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

/* v as Go's strconv.FormatFloat(v, 'g', -1, 64), or +Inf, -Inf, NaN. */
void metrics_format_float(struct buf *b, double v);
