/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Prometheus text format (0.0.4) as the Go client writes it: HELP with
 * component-base's stability prefix, then TYPE, then the samples; numbers
 * as Go's strconv.FormatFloat(v, 'g', -1, 64); a histogram series as its
 * cumulative buckets, _sum and _count. Writers only: what to print and in
 * which order is the callers' (metrics.c's table).
 */
#include "http/metrics-expo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/cleanup.h"

static const char *const metrics_type_table[_METRICS_TYPE_MAX] = {
        [METRICS_COUNTER] = "counter",
        [METRICS_GAUGE] = "gauge",
        [METRICS_HISTOGRAM] = "histogram",
};

const char *metrics_type_to_string(enum metrics_type t) {
        return t >= 0 && t < _METRICS_TYPE_MAX ? metrics_type_table[t] : NULL;
}

void metrics_histogram_observe(struct metrics_histogram *h, const struct metrics_desc *d, double v) {
        for (size_t i = 0; i < d->n_buckets; i++)
                if (v <= d->buckets[i]) {
                        h->counts[i]++;
                        break;
                }
        h->count++;
        h->sum += v;
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

void metrics_put_header(struct buf *b, const struct metrics_desc *d) {
        buf_printf(b, "# HELP %s ", d->name);
        if (d->stability)
                buf_printf(b, "[%s] ", d->stability);
        buf_printf(b, "%s\n# TYPE %s %s\n", d->help, d->name, metrics_type_to_string(d->type));
}

void metrics_put_sample(struct buf *b, const char *name, const char *labels, double v) {
        buf_puts(b, name);
        if (labels && *labels)
                buf_printf(b, "{%s}", labels);
        buf_putc(b, ' ');
        metrics_format_float(b, v);
        buf_putc(b, '\n');
}

void metrics_put_label(struct buf *labels, const char *name, const char *value) {
        if (labels->len > 0)
                buf_putc(labels, ',');
        buf_printf(labels, "%s=\"", name);
        for (const char *p = value ? value : ""; *p; p++) {
                if (*p == '\\' || *p == '"')
                        buf_putc(labels, '\\');
                if (*p == '\n') {
                        buf_puts(labels, "\\n");
                        continue;
                }
                buf_putc(labels, *p);
        }
        buf_putc(labels, '"');
}

void metrics_put_histogram(struct buf *b, const struct metrics_desc *d, const char *labels,
                           const struct metrics_histogram *h) {
        const char *sep = labels && *labels ? "," : "";
        uint64_t cumulative = 0;

        labels = labels ? labels : "";
        for (size_t i = 0; i < d->n_buckets; i++) {
                cumulative += h->counts[i];
                buf_printf(b, "%s_bucket{%s%sle=\"", d->name, labels, sep);
                metrics_format_float(b, d->buckets[i]);
                buf_puts(b, "\"} ");
                metrics_format_float(b, (double) cumulative);
                buf_putc(b, '\n');
        }
        buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} ", d->name, labels, sep);
        metrics_format_float(b, (double) h->count);
        buf_printf(b, "\n%s_sum%s%s%s ", d->name, *labels ? "{" : "", labels, *labels ? "}" : "");
        metrics_format_float(b, h->sum);
        buf_printf(b, "\n%s_count%s%s%s ", d->name, *labels ? "{" : "", labels, *labels ? "}" : "");
        metrics_format_float(b, (double) h->count);
        buf_putc(b, '\n');
}
