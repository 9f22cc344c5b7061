/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metrics server on a real loop, over loopback, as test-health.c does it:
 * each request is made by a forked child with a plain blocking socket that
 * writes the raw response into a pipe, while the parent runs the loop (which
 * serves the request) until the pipe reaches EOF. No sleeps.
 *
 * /metrics is read back with a small strict parser of the text format
 * (0.0.4): every line is a HELP, a TYPE or a sample; families come sorted,
 * HELP then TYPE then samples of that family only; histograms have
 * increasing bounds, cumulative counts, +Inf equal to _count.
 */
#include "http/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "ev/ev.h"
#include "http-client.h"
#include "test.h"
#include "util/buf.h"
#include "util/cleanup.h"

/* ---- a strict reader of the text exposition format ---------------------------------- */

#define EXPO_MAX_SAMPLES 1024
#define EXPO_MAX_FAMILIES 64

struct expo_sample {
        char name[128];
        char labels[256];       /* as written between the braces, "" for none */
        double value;
};

struct expo_family {
        char name[128];
        char type[16];
        char help[256];
        size_t first, n;        /* its samples */
};

struct expo {
        struct expo_sample s[EXPO_MAX_SAMPLES];
        size_t n;
        struct expo_family f[EXPO_MAX_FAMILIES];
        size_t nf;
};

static bool expo_fail(const char *line, const char *why) {
        fprintf(stderr, "  exposition: %s: %.120s\n", why, line);
        return false;
}

static const char *expo_name(const char *p, char *out, size_t outlen) {
        size_t n = 0;

        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' || *p == ':'))
                return NULL;
        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
               *p == ':') {
                if (n + 1 >= outlen)
                        return NULL;
                out[n++] = *p++;
        }
        out[n] = '\0';
        return p;
}

/* {name="value",...}: label names as metric names without ':', values
 * with only \\, \" and \n escaped. Copies the text between the braces. */
static const char *expo_labels(const char *p, char *out, size_t outlen) {
        const char *start = p + 1;
        char name[64];

        if (*p != '{') {
                out[0] = '\0';
                return p;
        }
        p++;
        for (;;) {
                p = expo_name(p, name, sizeof name);
                if (!p || strchr(name, ':') || p[0] != '=' || p[1] != '"')
                        return NULL;
                for (p += 2; *p != '"'; p++) {
                        if (!*p || *p == '\n')
                                return NULL;
                        if (*p == '\\' && (p[1] == '\\' || p[1] == '"' || p[1] == 'n'))
                                p++;
                        else if (*p == '\\')
                                return NULL;
                }
                p++;
                if (*p == '}')
                        break;
                if (*p != ',')
                        return NULL;
                p++;
        }
        if ((size_t) (p - start) >= outlen)
                return NULL;
        memcpy(out, start, (size_t) (p - start));
        out[p - start] = '\0';
        return p + 1;
}

static bool expo_value(const char *p, double *ret) {
        char *end;

        if (strcmp(p, "+Inf") == 0)
                *ret = INFINITY;
        else if (strcmp(p, "-Inf") == 0)
                *ret = -INFINITY;
        else if (strcmp(p, "NaN") == 0)
                *ret = NAN;
        else {
                if (!*p || strchr(p, ' ') || *p == '+')
                        return false;
                *ret = strtod(p, &end);
                return *end == '\0';
        }
        return true;
}

/* A histogram family's samples: name_bucket{...,le="B"} for increasing B
 * ending with +Inf, counts never decreasing, then _sum and _count, with
 * +Inf equal to _count. kube-proxy's histograms carry no other labels. */
static bool expo_check_histogram(const struct expo *e, const struct expo_family *f) {
        char bucket[160], sum[160], count[160];
        double last_le = -INFINITY, last = 0;
        size_t i = f->first, end = f->first + f->n;

        snprintf(bucket, sizeof bucket, "%s_bucket", f->name);
        snprintf(sum, sizeof sum, "%s_sum", f->name);
        snprintf(count, sizeof count, "%s_count", f->name);
        for (; i < end && strcmp(e->s[i].name, bucket) == 0; i++) {
                char text[64];
                const char *q = strchr(e->s[i].labels + 4, '"');
                double le;

                if (strncmp(e->s[i].labels, "le=\"", 4) != 0 || !q || q[1] || (size_t) (q - e->s[i].labels) > 60)
                        return expo_fail(e->s[i].labels, "bucket without le, or more labels");
                snprintf(text, sizeof text, "%.*s", (int) (q - e->s[i].labels - 4), e->s[i].labels + 4);
                if (!expo_value(text, &le) || !(le > last_le))
                        return expo_fail(e->s[i].labels, "le not increasing");
                if (e->s[i].value < last || e->s[i].value != floor(e->s[i].value))
                        return expo_fail(e->s[i].labels, "bucket counts not cumulative");
                last_le = le;
                last = e->s[i].value;
        }
        if (!isinf(last_le))
                return expo_fail(f->name, "no +Inf bucket");
        if (i + 2 != end || strcmp(e->s[i].name, sum) != 0 || strcmp(e->s[i + 1].name, count) != 0 ||
            e->s[i].labels[0] || e->s[i + 1].labels[0])
                return expo_fail(f->name, "histogram not followed by _sum and _count");
        if (e->s[i + 1].value != last)
                return expo_fail(f->name, "+Inf bucket differs from _count");
        return true;
}

static bool expo_parse(const char *text, struct expo *e) {
        struct expo_family *f = NULL;

        e->n = e->nf = 0;
        if (!text || !*text || text[strlen(text) - 1] != '\n')
                return expo_fail(text ? text : "", "empty, or no final newline");
        for (const char *line = text; *line; line = strchr(line, '\n') + 1) {
                char l[1024], name[128];
                size_t len = strcspn(line, "\n");
                const char *p;

                if (len == 0 || len >= sizeof l)
                        return expo_fail(line, "empty or overlong line");
                memcpy(l, line, len);
                l[len] = '\0';

                if (strncmp(l, "# HELP ", 7) == 0) {
                        p = expo_name(l + 7, name, sizeof name);
                        if (!p || *p != ' ' || !p[1] || e->nf == EXPO_MAX_FAMILIES)
                                return expo_fail(l, "bad HELP");
                        if (e->nf > 0 && strcmp(e->f[e->nf - 1].name, name) >= 0)
                                return expo_fail(l, "families not sorted, or repeated");
                        if (f && f->n == 0)
                                return expo_fail(f->name, "family without samples");
                        f = &e->f[e->nf++];
                        *f = (struct expo_family) {.first = e->n};
                        snprintf(f->name, sizeof f->name, "%s", name);
                        snprintf(f->help, sizeof f->help, "%s", p + 1);
                        continue;
                }
                if (strncmp(l, "# TYPE ", 7) == 0) {
                        p = expo_name(l + 7, name, sizeof name);
                        if (!f || f->type[0] || !p || *p != ' ' || strcmp(name, f->name) != 0)
                                return expo_fail(l, "TYPE without its HELP");
                        if (strcmp(p + 1, "counter") != 0 && strcmp(p + 1, "gauge") != 0 &&
                            strcmp(p + 1, "histogram") != 0)
                                return expo_fail(l, "unknown type");
                        snprintf(f->type, sizeof f->type, "%s", p + 1);
                        continue;
                }
                if (l[0] == '#')
                        return expo_fail(l, "stray comment");

                struct expo_sample *s = &e->s[e->n];
                if (!f || !f->type[0] || e->n == EXPO_MAX_SAMPLES)
                        return expo_fail(l, "sample outside a family");
                p = expo_name(l, s->name, sizeof s->name);
                p = p ? expo_labels(p, s->labels, sizeof s->labels) : NULL;
                if (!p || *p != ' ' || !expo_value(p + 1, &s->value))
                        return expo_fail(l, "bad sample");
                if (strcmp(f->type, "histogram") == 0) {
                        size_t fl = strlen(f->name);
                        if (strncmp(s->name, f->name, fl) != 0 ||
                            (strcmp(s->name + fl, "_bucket") != 0 && strcmp(s->name + fl, "_sum") != 0 &&
                             strcmp(s->name + fl, "_count") != 0))
                                return expo_fail(l, "sample of another family");
                } else {
                        if (strcmp(s->name, f->name) != 0)
                                return expo_fail(l, "sample of another family");
                        /* Go sorts the label sets of a family. */
                        if (f->n > 0 && strcmp(e->s[e->n - 1].labels, s->labels) >= 0)
                                return expo_fail(l, "label sets not sorted, or repeated");
                }
                if (strncmp(f->name, "kubeproxy_", 10) == 0 && strncmp(f->help, "[ALPHA] ", 8) != 0)
                        return expo_fail(f->help, "kube-proxy metric without [ALPHA]");
                e->n++;
                f->n++;
        }
        if (f && f->n == 0)
                return expo_fail(f->name, "family without samples");
        for (size_t i = 0; i < e->nf; i++)
                if (strcmp(e->f[i].type, "histogram") == 0 && !expo_check_histogram(e, &e->f[i]))
                        return false;
        return true;
}

static const struct expo_family *expo_family(const struct expo *e, const char *name) {
        for (size_t i = 0; i < e->nf; i++)
                if (strcmp(e->f[i].name, name) == 0)
                        return &e->f[i];
        return NULL;
}

/* The value of name{labels}, or NaN when there is no such sample. */
static double expo_get(const struct expo *e, const char *name, const char *labels) {
        for (size_t i = 0; i < e->n; i++)
                if (strcmp(e->s[i].name, name) == 0 && strcmp(e->s[i].labels, labels ? labels : "") == 0)
                        return e->s[i].value;
        return NAN;
}

static bool scrape(struct ev_loop *l, int port, struct expo *e) {
        struct reply r = {0};
        char v[128];
        bool ok;

        if (request(l, AF_INET, port, "GET", "/metrics", &r) < 0) {
                CHECK(!"request failed");
                return false;
        }
        CHECK(r.status == 200);
        CHECK_STREQ(header(&r, "Content-Type", v, sizeof v), "text/plain; version=0.0.4; charset=utf-8");
        ok = expo_parse(r.body, e);
        CHECK(ok);
        reply_done(&r);
        return ok;
}

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* ---- tests ------------------------------------------------------------------------- */

static void test_format_float(void) {
        static const struct {
                double v;
                const char *go;         /* strconv.FormatFloat(v, 'g', -1, 64) */
        } cases[] = {
                {0, "0"}, {-0.0, "0"}, {1, "1"}, {-1, "-1"}, {0.25, "0.25"}, {300, "300"},
                {100000, "100000"}, {123456, "123456"}, {123456.7, "123456.7"}, {1e6, "1e+06"},
                {1234567, "1.234567e+06"}, {8835072, "8.835072e+06"}, {0.0001, "0.0001"}, {0.00001, "1e-05"},
                {2.5e-5, "2.5e-05"}, {0.1 + 0.2, "0.30000000000000004"}, {1738714034.68, "1.73871403468e+09"},
                {18446744073709551615.0, "1.8446744073709552e+19"}, {1e21, "1e+21"}, {5e-324, "5e-324"},
                {1.7976931348623157e308, "1.7976931348623157e+308"}, {-0.5, "-0.5"}, {-1234567, "-1.234567e+06"},
                {INFINITY, "+Inf"}, {-INFINITY, "-Inf"}, {NAN, "NaN"},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct buf b = BUF_INIT;

                metrics_format_float(&b, cases[i].v);
                CHECK_STREQ(b.data, cases[i].go);
                buf_done(&b);
        }
}

/* The reader itself: what it must accept and what it must refuse. */
static void test_parser(void) {
        static const char good[] =
                "# HELP a_hist [ALPHA] h\n# TYPE a_hist histogram\n"
                "a_hist_bucket{le=\"0.5\"} 1\na_hist_bucket{le=\"1\"} 2\na_hist_bucket{le=\"+Inf\"} 3\n"
                "a_hist_sum 7.5\na_hist_count 3\n"
                "# HELP b_vec help \\ text\n# TYPE b_vec gauge\nb_vec{k=\"a\\\"b\"} 1e+06\nb_vec{k=\"c\"} -1\n";
        static const char *const bad[] = {
                "",
                "# HELP a x\n# TYPE a gauge\na 1",                             /* no final newline */
                "# HELP a x\n# TYPE a gauge\n\na 1\n",                       /* empty line */
                "# HELP b x\n# TYPE b gauge\nb 1\n# HELP a x\n# TYPE a gauge\na 1\n", /* unsorted */
                "# HELP a x\n# TYPE a gauge\n",                               /* no samples */
                "# HELP a x\n# TYPE b gauge\na 1\n",                          /* TYPE of another name */
                "# HELP a x\n# TYPE a gauge\nab 1\n",                         /* foreign sample */
                "# HELP a x\n# TYPE a gauge\na{k=\"v\"} 1\na{k=\"u\"} 1\n", /* label sets unsorted */
                "# HELP a x\n# TYPE a gauge\na 1 123\n",                      /* timestamp */
                "# HELP a x\n# TYPE a gauge\na one\n",
                "# HELP a x\n# TYPE a gauge\na{k=v} 1\n",
                "# HELP a x\n# TYPE a summary\na 1\n",
                "# HELP kubeproxy_a x\n# TYPE kubeproxy_a gauge\nkubeproxy_a 1\n", /* no [ALPHA] */
                "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 1\n"
                "h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 2\n",            /* not cumulative */
                "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\n"
                "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",            /* bounds not increasing */
                "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n", /* no +Inf */
                "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n", /* +Inf != count */
                "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n", /* no _sum */
        };
        struct expo *e = calloc(1, sizeof *e);

        CHECK(expo_parse(good, e));
        CHECK(e->nf == 2 && e->n == 7);
        CHECK(expo_get(e, "b_vec", "k=\"a\\\"b\"") == 1e6);
        fprintf(stderr, "  (the exposition errors below are expected)\n");
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                bool ok = expo_parse(bad[i], e);
                if (ok)
                        fprintf(stderr, "  accepted bad exposition #%zu\n", i);
                CHECK(!ok);
        }
        free(e);
}

static void test_bind(void) {
        struct ev_loop *l = ev_loop_new();
        struct kproxy_config c;
        struct metrics *a = NULL, *b = (struct metrics *) l;  /* sentinel: written only on success */
        char addr[64];
        int port, hold = reserve_port(AF_INET, &port);

        CHECK(config_init(&c) == 0);
        CHECK(hold >= 0);

        /* Port 0 and no address turn the server off; bad addresses are refused. */
        CHECK(metrics_new(l, "127.0.0.1:0", &c, &b) == 0 && b == NULL);
        CHECK(metrics_new(l, NULL, &c, &b) == 0 && b == NULL);
        b = (struct metrics *) l;
        CHECK(metrics_new(l, "localhost:10249", &c, &b) == -EINVAL);
        CHECK(metrics_new(l, "127.0.0.1", &c, &b) == -EINVAL);
        CHECK(metrics_new(l, "::1:10249", &c, &b) == -EINVAL);
        CHECK(b == (struct metrics *) l);

        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
        CHECK(metrics_new(l, addr, &c, &a) == 0 && a);
        CHECK(metrics_port(a) == port);
        /* --bind-address-hard-fail: a taken port is an error; without it
         * (upstream's default) the server waits for the port, port 0 meanwhile. */
        c.bind_address_hard_fail = true;
        CHECK(metrics_new(l, addr, &c, &b) == -EADDRINUSE);
        CHECK(b == (struct metrics *) l);
        c.bind_address_hard_fail = false;
        CHECK(metrics_new(l, addr, &c, &b) == 0 && b && b != (struct metrics *) l);
        CHECK(metrics_port(b) == 0);
        b = metrics_free(b);

        /* A disabled server takes every call. */
        metrics_sync_done(NULL, true, 1);
        metrics_sync_failed(NULL);
        metrics_restore_failed(NULL, true);
        metrics_rules(NULL, "nat", 1, 1);
        metrics_change_queued(NULL, true);
        metrics_changes_applied(NULL);
        metrics_network_programming(NULL, 1);
        metrics_no_local_endpoints(NULL, "internal", 1);
        metrics_health_answer(NULL, "healthz", 200);
        CHECK(metrics_port(NULL) == 0);
        CHECK(metrics_free(NULL) == NULL);

        CHECK(metrics_free(a) == NULL);
        close(hold);
        config_done(&c);
        ev_loop_free(l);
}

/* Starts a server on a held loopback port; returns its port or -1. */
static int start(struct ev_loop *l, const struct kproxy_config *c, struct metrics **ret, int *ret_hold) {
        char addr[64];
        int port;

        *ret_hold = reserve_port(AF_INET, &port);
        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
        if (*ret_hold < 0 || metrics_new(l, addr, c, ret) < 0 || !*ret)
                return -1;
        return port;
}

static void test_fresh(void) {
        static const char *const sync_le[] = {
                "0.001", "0.002", "0.004", "0.008", "0.016", "0.032", "0.064", "0.128",
                "0.256", "0.512", "1.024", "2.048", "4.096", "8.192", "16.384", "+Inf",
        };
        struct ev_loop *l = ev_loop_new();
        struct kproxy_config c;
        struct metrics *m = NULL;
        struct expo *e = calloc(1, sizeof *e);
        const struct expo_family *f;
        char labels[64];
        int hold, port;
        double t = now_s();

        CHECK(config_init(&c) == 0);
        port = start(l, &c, &m, &hold);
        CHECK(port > 0);
        if (port <= 0 || !scrape(l, port, e))
                goto out;

        /* Histograms, plain counters and gauges are there from the start. */
        f = expo_family(e, "kubeproxy_sync_proxy_rules_duration_seconds");
        CHECK(f && strcmp(f->type, "histogram") == 0 && f->n == ELEMENTSOF(sync_le) + 2);
        for (size_t i = 0; f && i < ELEMENTSOF(sync_le); i++) {
                CHECK(strcmp(e->s[f->first + i].name, "kubeproxy_sync_proxy_rules_duration_seconds_bucket") == 0);
                snprintf(labels, sizeof labels, "le=\"%s\"", sync_le[i]);
                CHECK_STREQ(e->s[f->first + i].labels, labels);
                CHECK(e->s[f->first + i].value == 0);
        }
        CHECK(expo_family(e, "kubeproxy_sync_full_proxy_rules_duration_seconds"));
        CHECK(expo_family(e, "kubeproxy_sync_partial_proxy_rules_duration_seconds"));
        f = expo_family(e, "kubeproxy_network_programming_duration_seconds");
        CHECK(f && f->n == 81 + 1 + 2);
        if (f) {
                CHECK_STREQ(e->s[f->first].labels, "le=\"0\"");
                CHECK_STREQ(e->s[f->first + 1].labels, "le=\"0.25\"");
                CHECK_STREQ(e->s[f->first + 2].labels, "le=\"0.5\"");
                CHECK_STREQ(e->s[f->first + 3].labels, "le=\"1\"");
                CHECK_STREQ(e->s[f->first + 61].labels, "le=\"59\"");
                CHECK_STREQ(e->s[f->first + 62].labels, "le=\"60\"");
                CHECK_STREQ(e->s[f->first + 73].labels, "le=\"115\"");
                CHECK_STREQ(e->s[f->first + 74].labels, "le=\"120\"");
                CHECK_STREQ(e->s[f->first + 80].labels, "le=\"300\"");
        }
        static const char *const zero[] = {
                "kubeproxy_sync_proxy_rules_endpoint_changes_pending",
                "kubeproxy_sync_proxy_rules_endpoint_changes_total",
                "kubeproxy_sync_proxy_rules_service_changes_pending",
                "kubeproxy_sync_proxy_rules_service_changes_total",
                "kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
                "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
                "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
                "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
        };
        for (size_t i = 0; i < ELEMENTSOF(zero); i++)
                CHECK(expo_get(e, zero[i], NULL) == 0);
        f = expo_family(e, "kubeproxy_sync_proxy_rules_endpoint_changes_total");
        CHECK(f && strcmp(f->type, "counter") == 0);
        CHECK_STREQ(f ? f->help : NULL, "[ALPHA] EndpointSlice changes seen since start");
        f = expo_family(e, "kubeproxy_sync_proxy_rules_last_timestamp_seconds");
        CHECK(f && strcmp(f->type, "gauge") == 0);

        /* Labelled families print nothing before their first value. */
        CHECK(!expo_family(e, "kubeproxy_proxy_healthz_total"));
        CHECK(!expo_family(e, "kubeproxy_proxy_livez_total"));
        CHECK(!expo_family(e, "kubeproxy_sync_proxy_rules_iptables_total"));
        CHECK(!expo_family(e, "kubeproxy_sync_proxy_rules_iptables_last"));
        CHECK(!expo_family(e, "kubeproxy_sync_proxy_rules_no_local_endpoints_total"));

        /* The process collector's families, with plausible values. */
        double rss = expo_get(e, "process_resident_memory_bytes", NULL);
        double vsz = expo_get(e, "process_virtual_memory_bytes", NULL);
        double start_time = expo_get(e, "process_start_time_seconds", NULL);
        double fds = expo_get(e, "process_open_fds", NULL), max_fds = expo_get(e, "process_max_fds", NULL);
        CHECK(rss > 0 && vsz >= rss);
        CHECK(start_time <= t + 1 && start_time > t - 3600);
        CHECK(fds >= 3 && max_fds >= fds);
        CHECK(expo_get(e, "process_cpu_seconds_total", NULL) >= 0);
        CHECK(expo_get(e, "process_virtual_memory_max_bytes", NULL) > 0);
        f = expo_family(e, "process_cpu_seconds_total");
        CHECK(f && strcmp(f->type, "counter") == 0 && strncmp(f->help, "[ALPHA]", 7) != 0);

out:
        metrics_free(m);
        close(hold);
        free(e);
        config_done(&c);
        ev_loop_free(l);
}

static void test_values_move(void) {
        struct ev_loop *l = ev_loop_new();
        struct kproxy_config c;
        struct metrics *m = NULL;
        struct expo *e = calloc(1, sizeof *e);
        const char *sync = "kubeproxy_sync_proxy_rules_duration_seconds";
        const char *full = "kubeproxy_sync_full_proxy_rules_duration_seconds";
        const char *partial = "kubeproxy_sync_partial_proxy_rules_duration_seconds";
        const char *last = "kubeproxy_sync_proxy_rules_last_timestamp_seconds";
        char name[128];
        double t0, t1, ts;
        int hold, port;

        CHECK(config_init(&c) == 0);
        port = start(l, &c, &m, &hold);
        CHECK(port > 0);
        if (port <= 0)
                goto out;

        /* A full sync of 3 ms: counted in both histograms, timestamp set. */
        t0 = now_s();
        metrics_sync_done(m, true, 0.003);
        t1 = now_s();
        if (!scrape(l, port, e))
                goto out;
        snprintf(name, sizeof name, "%s_count", sync);
        CHECK(expo_get(e, name, NULL) == 1);
        snprintf(name, sizeof name, "%s_sum", sync);
        CHECK(expo_get(e, name, NULL) == 0.003);
        snprintf(name, sizeof name, "%s_bucket", sync);
        CHECK(expo_get(e, name, "le=\"0.002\"") == 0);
        CHECK(expo_get(e, name, "le=\"0.004\"") == 1);
        CHECK(expo_get(e, name, "le=\"16.384\"") == 1);
        snprintf(name, sizeof name, "%s_count", full);
        CHECK(expo_get(e, name, NULL) == 1);
        snprintf(name, sizeof name, "%s_count", partial);
        CHECK(expo_get(e, name, NULL) == 0);
        ts = expo_get(e, last, NULL);
        CHECK(ts >= t0 - 0.001 && ts <= t1 + 0.001);

        /* A failed partial restore, then its sync (100 s: past every bound):
         * both failure counters, the duration observed, the timestamp kept. */
        metrics_restore_failed(m, true);
        metrics_sync_done(m, false, 100);
        if (!scrape(l, port, e))
                goto out;
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_restore_failures_total", NULL) == 1);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", NULL) == 1);
        snprintf(name, sizeof name, "%s_bucket", sync);
        CHECK(expo_get(e, name, "le=\"16.384\"") == 1);
        CHECK(expo_get(e, name, "le=\"+Inf\"") == 2);
        snprintf(name, sizeof name, "%s_bucket", partial);
        CHECK(expo_get(e, name, "le=\"16.384\"") == 0);
        CHECK(expo_get(e, name, "le=\"+Inf\"") == 1);
        CHECK(expo_get(e, last, NULL) == ts);

        /* A failed full restore counts once; another failure, then a success. */
        metrics_restore_failed(m, false);
        metrics_sync_done(m, true, 0.5);
        metrics_sync_failed(m);
        metrics_sync_done(m, true, 0.5);
        if (!scrape(l, port, e))
                goto out;
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_restore_failures_total", NULL) == 2);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", NULL) == 1);
        CHECK(expo_get(e, last, NULL) == ts);
        t0 = now_s();
        metrics_sync_done(m, false, 0.001);
        t1 = now_s();

        /* Rules per table, changes queued and applied, network programming,
         * Local policies without endpoints, health answers. */
        metrics_rules(m, "nat", 120, 30);
        metrics_rules(m, "filter", 10, 2);
        metrics_change_queued(m, true);
        metrics_change_queued(m, true);
        metrics_change_queued(m, false);
        metrics_network_programming(m, 0.3);
        metrics_network_programming(m, 400);
        metrics_no_local_endpoints(m, "internal", 3);
        metrics_no_local_endpoints(m, "external", 0);
        metrics_health_answer(m, "healthz", 503);
        metrics_health_answer(m, "healthz", 200);
        metrics_health_answer(m, "healthz", 200);
        metrics_health_answer(m, "livez", 200);
        if (!scrape(l, port, e))
                goto out;
        ts = expo_get(e, last, NULL);
        CHECK(ts >= t0 - 0.001 && ts <= t1 + 0.001);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_total", "table=\"filter\"") == 10);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_total", "table=\"nat\"") == 120);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_last", "table=\"filter\"") == 2);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_last", "table=\"nat\"") == 30);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_endpoint_changes_pending", NULL) == 2);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_endpoint_changes_total", NULL) == 2);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_service_changes_pending", NULL) == 1);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_service_changes_total", NULL) == 1);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", NULL) >= t0);
        CHECK(expo_get(e, "kubeproxy_network_programming_duration_seconds_bucket", "le=\"0.25\"") == 0);
        CHECK(expo_get(e, "kubeproxy_network_programming_duration_seconds_bucket", "le=\"0.5\"") == 1);
        CHECK(expo_get(e, "kubeproxy_network_programming_duration_seconds_bucket", "le=\"300\"") == 1);
        CHECK(expo_get(e, "kubeproxy_network_programming_duration_seconds_count", NULL) == 2);
        CHECK(expo_get(e, "kubeproxy_network_programming_duration_seconds_sum", NULL) == 400.3);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_no_local_endpoints_total", "traffic_policy=\"external\"") == 0);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_no_local_endpoints_total", "traffic_policy=\"internal\"") == 3);
        CHECK(expo_get(e, "kubeproxy_proxy_healthz_total", "code=\"200\"") == 2);
        CHECK(expo_get(e, "kubeproxy_proxy_healthz_total", "code=\"503\"") == 1);
        CHECK(expo_get(e, "kubeproxy_proxy_livez_total", "code=\"200\"") == 1);
        CHECK(isnan(expo_get(e, "kubeproxy_proxy_livez_total", "code=\"503\"")));

        /* Applying the changes empties the queue; totals stay. */
        metrics_changes_applied(m);
        if (!scrape(l, port, e))
                goto out;
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_endpoint_changes_pending", NULL) == 0);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_service_changes_pending", NULL) == 0);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_endpoint_changes_total", NULL) == 2);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_service_changes_total", NULL) == 1);

out:
        metrics_free(m);
        close(hold);
        free(e);
        config_done(&c);
        ev_loop_free(l);
}

static void check_text(struct ev_loop *l, int port, const char *method, const char *path, int status,
                       const char *type, bool nosniff, const char *body) {
        struct reply r = {0};
        char v[128];

        if (request(l, AF_INET, port, method, path, &r) < 0) {
                CHECK(!"request failed");
                return;
        }
        if (r.status != status)
                fprintf(stderr, "  %s %s: %d\n", method, path, r.status);
        CHECK(r.status == status);
        CHECK_STREQ(header(&r, "Content-Type", v, sizeof v), type);
        CHECK((header(&r, "X-Content-Type-Options", v, sizeof v) != NULL) == nosniff);
        CHECK_STREQ(r.body, body);
        reply_done(&r);
}

static bool keys_are(json_t *o, const char *expected) {
        struct buf b = BUF_INIT;
        bool ok;

        /* jansson keeps keys in document order. */
        for (void *it = json_object_iter(o); it; it = json_object_iter_next(o, it))
                buf_printf(&b, "%s%s", b.len ? "," : "", json_object_iter_key(it));
        ok = b.data && strcmp(b.data, expected) == 0;
        if (!ok)
                fprintf(stderr, "  keys: %s\n  expected: %s\n", b.data ? b.data : "(none)", expected);
        buf_done(&b);
        return ok;
}

static const char *jstr(json_t *o, const char *key) {
        return json_string_value(json_object_get(o, key));
}

static void test_paths(void) {
        struct ev_loop *l = ev_loop_new();
        struct kproxy_config c;
        struct metrics *m = NULL;
        struct reply r = {0};
        json_t *j, *k;
        char v[128];
        int hold, port;

        CHECK(config_init(&c) == 0);
        port = start(l, &c, &m, &hold);
        CHECK(port > 0);
        if (port <= 0)
                goto out;

        check_text(l, port, "GET", "/proxyMode", 200, "text/plain; charset=utf-8", true, "iptables");
        check_text(l, port, "GET", "/healthz", 200, "text/plain; charset=utf-8", true, "ok");
        check_text(l, port, "GET", "/healthz?verbose", 200, "text/plain; charset=utf-8", true,
                   "[+]ping ok\nhealthz check passed\n");
        check_text(l, port, "GET", "/healthz?verbose=0&exclude=zz&exclude=ping&exclude=aa&exclude=zz", 200,
                   "text/plain; charset=utf-8", true,
                   "[+]ping excluded: ok\nwarn: some health checks cannot be excluded: no matches for "
                   "\"aa\",\"zz\"\nhealthz check passed\n");
        check_text(l, port, "GET", "/healthz/ping", 200, "text/plain; charset=utf-8", false, "ok");
        check_text(l, port, "GET", "/nope", 404, "text/plain; charset=utf-8", true, "404 page not found\n");
        check_text(l, port, "GET", "/metrics/", 404, "text/plain; charset=utf-8", true, "404 page not found\n");
        check_text(l, port, "GET", "/", 404, "text/plain; charset=utf-8", true, "404 page not found\n");
        check_text(l, port, "POST", "/proxyMode", 200, "text/plain; charset=utf-8", true, "iptables");

        /* HEAD: the headers with the length, no body. */
        CHECK(request(l, AF_INET, port, "HEAD", "/metrics", &r) == 0);
        CHECK(r.status == 200);
        CHECK(header(&r, "Content-Length", v, sizeof v) && atoi(v) > 1000);
        CHECK_STREQ(r.body, "");
        reply_done(&r);

        /* /configz: one compact object under the group name, holding the
         * internal configuration with Go's field names. */
        CHECK(request(l, AF_INET, port, "GET", "/configz", &r) == 0);
        CHECK(r.status == 200);
        CHECK_STREQ(header(&r, "Content-Type", v, sizeof v), "application/json");
        CHECK(header(&r, "X-Content-Type-Options", v, sizeof v) != NULL);
        CHECK(!strchr(r.body, ' ') && !strchr(r.body, '\n'));
        j = json_loads(r.body, 0, NULL);
        CHECK(json_is_object(j) && keys_are(j, "kubeproxy.config.k8s.io"));
        k = json_object_get(j, "kubeproxy.config.k8s.io");
        CHECK(keys_are(k, "Linux,Windows,FeatureGates,ClientConnection,Logging,HostnameOverride,BindAddress,"
                          "HealthzBindAddress,MetricsBindAddress,BindAddressHardFail,EnableProfiling,"
                          "ShowHiddenMetricsForVersion,Mode,IPTables,IPVS,Winkernel,NFTables,DetectLocalMode,"
                          "DetectLocal,NodePortAddresses,SyncPeriod,MinSyncPeriod,ConfigSyncPeriod"));
        CHECK_STREQ(jstr(k, "Mode"), "iptables");
        CHECK_STREQ(jstr(k, "MetricsBindAddress"), "127.0.0.1:10249");
        CHECK_STREQ(jstr(k, "SyncPeriod"), "30s");
        CHECK_STREQ(jstr(k, "MinSyncPeriod"), "1s");
        CHECK_STREQ(jstr(k, "ConfigSyncPeriod"), "15m0s");
        CHECK_STREQ(jstr(k, "DetectLocalMode"), "ClusterCIDR");
        CHECK(json_is_null(json_object_get(k, "NodePortAddresses")));
        json_t *ct = json_object_get(json_object_get(k, "Linux"), "Conntrack");
        CHECK(keys_are(ct, "MaxPerCore,Min,TCPEstablishedTimeout,TCPCloseWaitTimeout,TCPBeLiberal,UDPTimeout,"
                           "UDPStreamTimeout"));
        CHECK(json_integer_value(json_object_get(ct, "MaxPerCore")) == 32768);
        CHECK_STREQ(jstr(ct, "TCPEstablishedTimeout"), "24h0m0s");
        CHECK(json_integer_value(json_object_get(json_object_get(k, "Linux"), "OOMScoreAdj")) == -999);
        json_t *cc = json_object_get(k, "ClientConnection");
        CHECK(keys_are(cc, "Kubeconfig,AcceptContentTypes,ContentType,QPS,Burst"));
        CHECK(json_number_value(json_object_get(cc, "QPS")) == 5);
        json_t *lg = json_object_get(k, "Logging");
        CHECK(keys_are(lg, "format,flushFrequency,verbosity,options"));
        CHECK_STREQ(jstr(lg, "flushFrequency"), "5s");
        CHECK(keys_are(json_object_get(k, "IPTables"), "MasqueradeBit,LocalhostNodePorts"));
        CHECK(keys_are(json_object_get(k, "DetectLocal"), "BridgeInterface,ClusterCIDRs,InterfaceNamePrefix"));
        json_decref(j);
        reply_done(&r);

out:
        metrics_free(m);
        close(hold);
        config_done(&c);
        ev_loop_free(l);
}

/* config_format_json on its own: escaping, lists, floats, the mode's
 * section. */
static void test_config_json(void) {
        struct kproxy_config c;
        struct buf b = BUF_INIT;
        json_t *j;
        char *args[] = {
                "--feature-gates=Zeta=true,Alpha=false", "--cluster-cidr=10.0.0.0/8,fd00::/48",
                "--nodeport-addresses=10.1.0.0/16,primary", "--proxy-mode=nftables", "--kube-api-qps=0.3",
                "--vmodule=proxier=4,ev*=2",
        };
        char **rest = NULL;
        size_t n_rest = 0;

        CHECK(config_init(&c) == 0);
        CHECK(config_parse_args(&c, (int) ELEMENTSOF(args), args, NULL, 0, NULL, &rest, &n_rest) == 0);
        free(rest);
        c.nftables.sync_period_ms = 7000;
        c.nftables.masquerade_all = true;
        free(c.kubeconfig);
        c.kubeconfig = strdup("/k/<a&b>\"\\\n\t\x01\xe2\x80\xa8\xff.conf");

        CHECK(config_format_json(&c, &b) == 0);
        CHECK(b.data && strstr(b.data, "\"Kubeconfig\":\"/k/\\u003ca\\u0026b\\u003e\\\"\\\\\\n\\t\\u0001\\u2028"
                                       "\\ufffd.conf\""));
        CHECK(b.data && strstr(b.data, "\"QPS\":0.3,"));
        j = json_loads(b.data ? b.data : "", 0, NULL);
        CHECK(json_is_object(j));
        CHECK(keys_are(json_object_get(j, "FeatureGates"), "Alpha,Zeta"));
        CHECK(json_is_false(json_object_get(json_object_get(j, "FeatureGates"), "Alpha")));
        json_t *cidrs = json_object_get(json_object_get(j, "DetectLocal"), "ClusterCIDRs");
        CHECK(json_array_size(cidrs) == 2 && strcmp(json_string_value(json_array_get(cidrs, 1)), "fd00::/48") == 0);
        CHECK(json_array_size(json_object_get(j, "NodePortAddresses")) == 2);
        CHECK_STREQ(jstr(j, "Mode"), "nftables");
        CHECK_STREQ(jstr(j, "SyncPeriod"), "7s");
        CHECK(json_is_true(json_object_get(json_object_get(j, "Linux"), "MasqueradeAll")));
        json_t *vm = json_object_get(json_object_get(j, "Logging"), "vmodule");
        CHECK(json_array_size(vm) == 2);
        CHECK(keys_are(json_array_get(vm, 1), "filePattern,verbosity"));
        CHECK_STREQ(jstr(json_array_get(vm, 1), "filePattern"), "ev*");
        CHECK(json_integer_value(json_object_get(json_array_get(vm, 1), "verbosity")) == 2);
        json_decref(j);

        /* encoding/json's float32 forms. */
        static const struct {
                float qps;
                const char *text;
        } floats[] = {
                {5, "\"QPS\":5,"}, {0.5f, "\"QPS\":0.5,"}, {3.3f, "\"QPS\":3.3,"}, {1e-7f, "\"QPS\":1e-7,"},
                {1234.5f, "\"QPS\":1234.5,"}, {1e20f, "\"QPS\":100000000000000000000,"}, {1e21f, "\"QPS\":1e+21,"},
                {0.000001f, "\"QPS\":0.000001,"},
        };
        for (size_t i = 0; i < ELEMENTSOF(floats); i++) {
                buf_clear(&b);
                c.qps = floats[i].qps;
                CHECK(config_format_json(&c, &b) == 0);
                if (!b.data || !strstr(b.data, floats[i].text))
                        fprintf(stderr, "  expected %s in %.200s\n", floats[i].text, strstr(b.data, "\"QPS\""));
                CHECK(b.data && strstr(b.data, floats[i].text));
        }
        buf_done(&b);
        config_done(&c);
}

int main(void) {
        TEST_RUN(test_format_float);
        TEST_RUN(test_parser);
        TEST_RUN(test_bind);
        TEST_RUN(test_fresh);
        TEST_RUN(test_values_move);
        TEST_RUN(test_paths);
        TEST_RUN(test_config_json);
        TEST_DONE();
}
