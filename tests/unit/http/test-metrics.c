/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metrics server on a real loop, over loopback, as test-health.c does it:
 * each request is made by a forked child with a plain blocking socket that
 * writes the raw response into a pipe, while the parent runs the loop (which
 * serves the request) until the pipe reaches EOF. No sleeps.
 *
 * /metrics is read back with a small strict parser of the text format
 * (0.0.4): every line is a HELP, a TYPE or a sample; families come sorted,
 * HELP then TYPE then samples of that family only, label sets sorted;
 * histogram series have increasing bounds, cumulative counts, +Inf equal
 * to _count. Every scrape is also checked against kproxy's table of
 * families (type, label names, stability, buckets, mode), and the table
 * against upstream's list (metrics-upstream.txt), both ways.
 *
 * Run as root, the program moves into a network namespace of its own
 * (unshare; it goes with the process): the nfacct test creates counters
 * and an iptables rule there, and nothing else's netfilter is read.
 */
#include "http/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apply/nfacct.h"
#include "config/config.h"
#include "ev/ev.h"
#include "http-client.h"
#include "netns.h"
#include "http/metrics-internal.h"
#include "test.h"
#include "util/buf.h"
#include "util/cleanup.h"

/* ---- a strict reader of the text exposition format ---------------------------------- */

#define EXPO_MAX_SAMPLES 4096
#define EXPO_MAX_FAMILIES 64

struct expo_sample {
        char name[128];
        char labels[512];       /* as written between the braces, "" for none */
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

/* A bucket's labels without its trailing le="...": the series' labels. */
static bool expo_bucket_split(const char *labels, char *series, size_t len, char *le, size_t le_len) {
        const char *p = strstr(labels, "le=\"");

        while (p && p != labels && p[-1] != ',')
                p = strstr(p + 1, "le=\"");
        if (!p || !p[4] || p[strlen(p) - 1] != '"' || strchr(p + 4, '"') != p + strlen(p) - 1)
                return false;
        snprintf(series, len, "%.*s", (int) (p - labels - (p != labels)), labels);
        snprintf(le, le_len, "%.*s", (int) (strlen(p) - 5), p + 4);
        return true;
}

/* A histogram family's series, each name_bucket{labels...,le="B"} for
 * increasing B ending with +Inf, counts never decreasing, then
 * _sum{labels} and _count{labels}, with +Inf equal to _count; series sorted
 * by their labels. */
static bool expo_check_histogram(const struct expo *e, const struct expo_family *f) {
        char bucket[160], sum[160], count[160], prev[512] = "";
        size_t i = f->first, end = f->first + f->n;
        bool first = true;

        snprintf(bucket, sizeof bucket, "%s_bucket", f->name);
        snprintf(sum, sizeof sum, "%s_sum", f->name);
        snprintf(count, sizeof count, "%s_count", f->name);
        while (i < end) {
                char series[512], le_text[64];
                double last_le = -INFINITY, last = 0;

                if (strcmp(e->s[i].name, bucket) != 0 ||
                    !expo_bucket_split(e->s[i].labels, series, sizeof series, le_text, sizeof le_text))
                        return expo_fail(e->s[i].name, "series does not start with a bucket");
                if (!first && strcmp(prev, series) >= 0)
                        return expo_fail(series, "histogram series not sorted, or repeated");
                first = false;
                snprintf(prev, sizeof prev, "%s", series);
                for (; i < end && strcmp(e->s[i].name, bucket) == 0; i++) {
                        char s2[512];
                        double le;

                        if (!expo_bucket_split(e->s[i].labels, s2, sizeof s2, le_text, sizeof le_text) ||
                            strcmp(s2, series) != 0)
                                return expo_fail(e->s[i].labels, "bucket of another series, or without le");
                        if (!expo_value(le_text, &le) || !(le > last_le))
                                return expo_fail(e->s[i].labels, "le not increasing");
                        if (e->s[i].value < last || e->s[i].value != floor(e->s[i].value))
                                return expo_fail(e->s[i].labels, "bucket counts not cumulative");
                        last_le = le;
                        last = e->s[i].value;
                }
                if (!isinf(last_le))
                        return expo_fail(f->name, "no +Inf bucket");
                if (i + 2 > end || strcmp(e->s[i].name, sum) != 0 || strcmp(e->s[i + 1].name, count) != 0 ||
                    strcmp(e->s[i].labels, series) != 0 || strcmp(e->s[i + 1].labels, series) != 0)
                        return expo_fail(f->name, "series not followed by its _sum and _count");
                if (e->s[i + 1].value != last)
                        return expo_fail(f->name, "+Inf bucket differs from _count");
                i += 2;
        }
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

/* The label names of a sample's label text (already checked by the
 * parser), comma-separated, le left out. */
static void expo_label_names(const char *labels, char *out, size_t len) {
        out[0] = '\0';
        for (const char *p = labels; *p;) {
                const char *eq = strchr(p, '=');

                if (!eq)
                        break;
                if (!(eq - p == 2 && strncmp(p, "le", 2) == 0))
                        snprintf(out + strlen(out), len - strlen(out), "%s%.*s", out[0] ? "," : "", (int) (eq - p), p);
                for (p = eq + 2; *p && *p != '"'; p++)
                        if (*p == '\\')
                                p++;
                if (*p)
                        p++;
                if (*p == ',')
                        p++;
        }
}

/* Each family of the exposition is one of the table's for mode, with its
 * type, HELP prefix, label names (le aside) and bucket bounds. */
static bool expo_matches_table(const struct expo *e, unsigned mode) {
        size_t n;
        const struct metrics_desc *d = metrics_descs(&n);
        bool ok = true;

        for (size_t i = 0; i < e->nf; i++) {
                const struct expo_family *f = &e->f[i];
                const struct metrics_desc *t = NULL;
                char prefix[32];
                size_t k = 0;

                for (size_t j = 0; j < n; j++)
                        if (strcmp(d[j].name, f->name) == 0)
                                t = &d[j];
                if (!t || !(t->modes & mode)) {
                        fprintf(stderr, "  %s: not a family of this mode\n", f->name);
                        ok = false;
                        continue;
                }
                snprintf(prefix, sizeof prefix, "[%s] ", t->stability ? t->stability : "");
                if (strcmp(f->type, metrics_type_to_string(t->type)) != 0 ||
                    (t->stability ? strncmp(f->help, prefix, strlen(prefix)) != 0 : f->help[0] == '[')) {
                        fprintf(stderr, "  %s: type %s or help \"%s\" not the table's\n", f->name, f->type, f->help);
                        ok = false;
                }
                for (size_t j = f->first; j < f->first + f->n; j++) {
                        char names[256], series[512], le_text[64];
                        double bound;

                        expo_label_names(e->s[j].labels, names, sizeof names);
                        if (strcmp(names, t->labels) != 0) {
                                fprintf(stderr, "  %s{%s}: label names %s, the table's %s\n", e->s[j].name,
                                        e->s[j].labels, names, t->labels);
                                ok = false;
                        }
                        if (strcmp(e->s[j].name + strlen(f->name), "_bucket") != 0 ||
                            !expo_bucket_split(e->s[j].labels, series, sizeof series, le_text, sizeof le_text) ||
                            !expo_value(le_text, &bound))
                                continue;
                        /* The k-th bound of every series is the table's k-th, then +Inf. */
                        if (k < t->n_buckets ? bound != t->buckets[k] : !isinf(bound)) {
                                fprintf(stderr, "  %s: bucket %s is not the table's\n", f->name, le_text);
                                ok = false;
                        }
                        k = isinf(bound) ? 0 : k + 1;
                }
        }
        return ok;
}

static bool scrape_mode(struct ev_loop *l, int port, unsigned mode, struct expo *e) {
        struct reply r = {0};
        char v[128];
        bool ok;

        if (request(l, AF_INET, port, "GET", "/metrics", &r) < 0) {
                CHECK(!"request failed");
                return false;
        }
        CHECK(r.status == 200);
        CHECK_STREQ(header(&r, "Content-Type", v, sizeof v), "text/plain; version=0.0.4; charset=utf-8");
        ok = expo_parse(r.body, e) && expo_matches_table(e, mode);
        if (!ok)
                fprintf(stderr, "%s", r.body);
        CHECK(ok);
        reply_done(&r);
        return ok;
}

static bool scrape(struct ev_loop *l, int port, struct expo *e) {
        return scrape_mode(l, port, METRICS_IPTABLES, e);
}

/* The clock as metrics.c reads it, rounded the same way (nanoseconds, then
 * one division): sec + nsec / 1e9 can round a later instant to a double
 * below an earlier one's, by one unit in the last place (238 ns today), and
 * the calls this brackets are closer together than that. */
static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (double) ((int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec) / 1e9;
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
                "# HELP b_vec help \\ text\n# TYPE b_vec gauge\nb_vec{k=\"a\\\"b\"} 1e+06\nb_vec{k=\"c\"} -1\n"
                "# HELP c_hist h\n# TYPE c_hist histogram\n"
                "c_hist_bucket{f=\"a\",le=\"1\"} 1\nc_hist_bucket{f=\"a\",le=\"+Inf\"} 1\n"
                "c_hist_sum{f=\"a\"} 1\nc_hist_count{f=\"a\"} 1\n"
                "c_hist_bucket{f=\"b\",le=\"1\"} 0\nc_hist_bucket{f=\"b\",le=\"+Inf\"} 2\n"
                "c_hist_sum{f=\"b\"} 4\nc_hist_count{f=\"b\"} 2\n";
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
                "# HELP h x\n# TYPE h histogram\nh_bucket{f=\"b\",le=\"+Inf\"} 1\nh_sum{f=\"b\"} 1\n"
                "h_count{f=\"b\"} 1\nh_bucket{f=\"a\",le=\"+Inf\"} 1\nh_sum{f=\"a\"} 1\nh_count{f=\"a\"} 1\n",
                                                                            /* series unsorted */
                "# HELP h x\n# TYPE h histogram\nh_bucket{f=\"a\",le=\"+Inf\"} 1\nh_sum{f=\"b\"} 1\n"
                "h_count{f=\"a\"} 1\n",                                        /* _sum of another series */
                "# HELP h x\n# TYPE h histogram\nh_bucket{f=\"a\",le=\"1\"} 1\nh_bucket{f=\"b\",le=\"+Inf\"} 1\n"
                "h_sum{f=\"b\"} 1\nh_count{f=\"b\"} 1\n",                    /* buckets of two series mixed */
        };
        struct expo *e = calloc(1, sizeof *e);

        CHECK(expo_parse(good, e));
        CHECK(e->nf == 3 && e->n == 15);
        CHECK(expo_get(e, "b_vec", "k=\"a\\\"b\"") == 1e6);
        CHECK(expo_get(e, "c_hist_count", "f=\"b\"") == 2);
        fprintf(stderr, "  (the exposition errors below are expected)\n");
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                bool ok = expo_parse(bad[i], e);
                if (ok)
                        fprintf(stderr, "  accepted bad exposition #%zu\n", i);
                CHECK(!ok);
        }
        free(e);
}

/* tests/unit/metrics-upstream.txt (shared with the e2e suite): one family a
 * line. */
struct upstream {
        char name[128], type[16], labels[160], modes[32], stability[16], buckets[1024];
};

static size_t read_upstream(struct upstream *out, size_t max) {
        char path[4096], line[2048], *dir;
        size_t n = 0;
        FILE *f;

        snprintf(path, sizeof path, "%s", __FILE__);
        dir = dirname(path);
        snprintf(line, sizeof line, "%s/../metrics-upstream.txt", dir);
        f = fopen(line, "re");
        CHECK(f != NULL);
        if (!f) {
                fprintf(stderr, "  cannot read %s (run from the source tree's top)\n", line);
                return 0;
        }
        while (fgets(line, sizeof line, f) && n < max) {
                struct upstream *u = &out[n];

                if (line[0] == '#' || line[0] == '\n')
                        continue;
                if (sscanf(line, "%127s %15s %159s %31s %15s %1023s", u->name, u->type, u->labels, u->modes,
                           u->stability, u->buckets) != 6) {
                        fprintf(stderr, "  bad line: %s", line);
                        CHECK(!"metrics-upstream.txt line");
                        continue;
                }
                n++;
        }
        fclose(f);
        return n;
}

static bool upstream_in_mode(const struct upstream *u, const char *mode) {
        char modes[32];

        snprintf(modes, sizeof modes, "%s", u->modes);
        for (char *save, *t = strtok_r(modes, ",", &save); t; t = strtok_r(NULL, ",", &save))
                if (strcmp(t, mode) == 0)
                        return true;
        return false;
}

/* kproxy's table and upstream's list name the same families in each mode,
 * with the same type, label names, stability and buckets. */
static void test_table_is_upstreams(void) {
        static const struct {
                const char *name;
                unsigned bit;
        } modes[] = {{"iptables", METRICS_IPTABLES}, {"nftables", METRICS_NFTABLES}};
        struct upstream *u = calloc(128, sizeof *u);
        size_t n_up = read_upstream(u, 128), n;
        const struct metrics_desc *d = metrics_descs(&n);

        CHECK(n == _MF_MAX);
        CHECK(n_up == n);
        for (size_t i = 1; i < n; i++)
                CHECK(strcmp(d[i - 1].name, d[i].name) < 0);    /* sorted: the exposition's order */
        for (size_t i = 1; i < n_up; i++)
                CHECK(strcmp(u[i - 1].name, u[i].name) < 0);
        for (size_t mi = 0; mi < ELEMENTSOF(modes); mi++) {
                /* Upstream's, in kproxy's table. */
                for (size_t i = 0; i < n_up; i++) {
                        const struct metrics_desc *t = NULL;
                        struct buf b = BUF_INIT;

                        if (!upstream_in_mode(&u[i], modes[mi].name))
                                continue;
                        for (size_t j = 0; j < n; j++)
                                if (strcmp(d[j].name, u[i].name) == 0 && (d[j].modes & modes[mi].bit))
                                        t = &d[j];
                        if (!t) {
                                fprintf(stderr, "  %s mode: kproxy lacks %s\n", modes[mi].name, u[i].name);
                                CHECK(!"a family of upstream's is missing");
                                continue;
                        }
                        /* Bounds compared as numbers: the list writes 1048576,
                         * Go (and kproxy) print 1.048576e+06. */
                        bool same_buckets = strcmp(u[i].buckets, "-") == 0 ? t->n_buckets == 0 : true;
                        char *p = strcmp(u[i].buckets, "-") == 0 ? NULL : u[i].buckets;
                        for (size_t k = 0; k < t->n_buckets; k++) {
                                char *end = NULL;
                                if (k > 0)
                                        buf_putc(&b, ',');
                                metrics_format_float(&b, t->buckets[k]);
                                same_buckets &= p && strtod(p, &end) == t->buckets[k] && end != p &&
                                                (*end == ',' || (!*end && k + 1 == t->n_buckets));
                                p = end && *end == ',' ? end + 1 : NULL;
                        }
                        if (strcmp(u[i].type, metrics_type_to_string(t->type)) != 0 ||
                            strcmp(u[i].labels, t->labels[0] ? t->labels : "-") != 0 ||
                            strcmp(u[i].stability, t->stability ? t->stability : "-") != 0 || !same_buckets) {
                                fprintf(stderr, "  %s: upstream %s {%s} %s [%s], kproxy %s {%s} %s [%s]\n",
                                        u[i].name, u[i].type, u[i].labels, u[i].stability, u[i].buckets,
                                        metrics_type_to_string(t->type), t->labels, t->stability,
                                        b.data ? b.data : "-");
                                CHECK(!"a family differs from upstream's");
                        }
                        buf_done(&b);
                }
                /* kproxy's, in upstream's list. */
                for (size_t j = 0; j < n; j++) {
                        bool found = false;

                        if (!(d[j].modes & modes[mi].bit))
                                continue;
                        for (size_t i = 0; i < n_up; i++)
                                found |= strcmp(d[j].name, u[i].name) == 0 && upstream_in_mode(&u[i], modes[mi].name);
                        if (!found) {
                                fprintf(stderr, "  %s mode: upstream has no %s\n", modes[mi].name, d[j].name);
                                CHECK(!"kproxy serves a family upstream does not");
                        }
                }
        }
        free(u);
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
        CHECK(metrics_new(l, "127.0.0.1:0", &c, "iptables", &b) == 0 && b == NULL);
        CHECK(metrics_new(l, NULL, &c, "iptables", &b) == 0 && b == NULL);
        b = (struct metrics *) l;
        CHECK(metrics_new(l, "localhost:10249", &c, "iptables", &b) == -EINVAL);
        CHECK(metrics_new(l, "127.0.0.1", &c, "iptables", &b) == -EINVAL);
        CHECK(metrics_new(l, "::1:10249", &c, "iptables", &b) == -EINVAL);
        CHECK(b == (struct metrics *) l);

        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
        CHECK(metrics_new(l, addr, &c, "iptables", &a) == 0 && a);
        CHECK(metrics_port(a) == port);
        /* --bind-address-hard-fail: a taken port is an error; without it
         * (upstream's default) the server waits for the port, port 0 meanwhile. */
        c.bind_address_hard_fail = true;
        CHECK(metrics_new(l, addr, &c, "iptables", &b) == -EADDRINUSE);
        CHECK(b == (struct metrics *) l);
        c.bind_address_hard_fail = false;
        CHECK(metrics_new(l, addr, &c, "iptables", &b) == 0 && b && b != (struct metrics *) l);
        CHECK(metrics_port(b) == 0);
        b = metrics_free(b);

        /* A disabled server takes every call. */
        metrics_sync_queued(NULL, 4);
        metrics_sync_done(NULL, 4, true, true, 1);
        metrics_apply_failed(NULL, 6, true);
        metrics_rules(NULL, 4, "nat", 1, 1);
        metrics_no_local_endpoints(NULL, 4, "internal", 1);
        metrics_network_programming(NULL, 6, 1);
        metrics_conntrack_reconciled(NULL, 4, 0.1, 3);
        metrics_change_queued(NULL, true);
        metrics_changes_applied(NULL);
        metrics_health_answer(NULL, "healthz", 200);
        metrics_api_request(NULL, "GET", "h:1", 200, false, 0.1, 0, 10);
        metrics_api_transport(NULL);
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
        if (*ret_hold < 0 || metrics_new(l, addr, c, proxy_mode_to_string(c->mode), ret) < 0 || !*ret)
                return -1;
        return port;
}

static void test_fresh(void) {
        struct ev_loop *l = ev_loop_new();
        struct kproxy_config c;
        struct metrics *m = NULL;
        struct expo *e = calloc(1, sizeof *e);
        const struct expo_family *f;
        int hold, port;
        double t = now_s();

        CHECK(config_init(&c) == 0);
        port = start(l, &c, &m, &hold);
        CHECK(port > 0);
        if (port <= 0 || !scrape(l, port, e))
                goto out;

        /* Plain counters, gauges and histograms are there from the start. */
        static const char *const zero[] = {
                "kubeproxy_sync_proxy_rules_endpoint_changes_pending",
                "kubeproxy_sync_proxy_rules_endpoint_changes_total",
                "kubeproxy_sync_proxy_rules_service_changes_pending",
                "kubeproxy_sync_proxy_rules_service_changes_total",
                "rest_client_transport_cache_entries",
        };
        for (size_t i = 0; i < ELEMENTSOF(zero); i++)
                CHECK(expo_get(e, zero[i], NULL) == 0);
        f = expo_family(e, "kubeproxy_sync_proxy_rules_endpoint_changes_total");
        CHECK(f && strcmp(f->type, "counter") == 0);
        CHECK_STREQ(f ? f->help : NULL, "[ALPHA] EndpointSlice changes seen since start");
        CHECK(isinf(expo_get(e, "rest_client_exec_plugin_ttl_seconds", NULL)));
        f = expo_family(e, "rest_client_exec_plugin_certificate_rotation_age");
        CHECK(f && f->n == 11 + 1 + 2);
        CHECK(expo_get(e, "rest_client_exec_plugin_certificate_rotation_age_bucket", "le=\"1.24416e+08\"") == 0);
        CHECK(expo_get(e, "rest_client_exec_plugin_certificate_rotation_age_count", NULL) == 0);

        /* kubernetes_build_info: 1, labelled with kproxy's version. */
        f = expo_family(e, "kubernetes_build_info");
        CHECK(f && f->n == 1 && e->s[f->first].value == 1);
        if (f && f->n == 1) {
                const char *lb = e->s[f->first].labels;
                static const char date[] = "build_date=\"1970-01-01T00:00:00Z\",compiler=\"";
                CHECK(strncmp(lb, date, strlen(date)) == 0);
                CHECK(strstr(lb, ",git_version=\"v" KPROXY_VERSION "\",go_version=\"\",major=\""));
                CHECK(strstr(lb, ",platform=\"linux/"));
        }

        /* Every gate of the release, by name and stage, with its value:
         * PreferSameTrafficDistribution is beta and on by default in 1.34,
         * a GA gate has an empty stage. */
        f = expo_family(e, "kubernetes_feature_enabled");
        CHECK(f && f->n > 100 && strncmp(f->help, "[BETA] ", 7) == 0);
        CHECK(expo_get(e, "kubernetes_feature_enabled",
                       "name=\"PreferSameTrafficDistribution\",stage=\"BETA\"") == 1);
        CHECK(expo_get(e, "kubernetes_feature_enabled", "name=\"AllAlpha\",stage=\"ALPHA\"") == 0);
        CHECK(expo_get(e, "kubernetes_feature_enabled", "name=\"ComponentSLIs\",stage=\"\"") == 1);

        /* Labelled families print nothing before their first value: every
         * ip_family family, health answers, API requests. */
        static const char *const absent[] = {
                "kubeproxy_sync_proxy_rules_duration_seconds",
                "kubeproxy_sync_full_proxy_rules_duration_seconds",
                "kubeproxy_network_programming_duration_seconds",
                "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
                "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
                "kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
                "kubeproxy_sync_proxy_rules_iptables_total",
                "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
                "kubeproxy_conntrack_reconciler_sync_duration_seconds",
                "kubeproxy_proxy_healthz_total",
                "kubeproxy_proxy_livez_total",
                "rest_client_requests_total",
                "rest_client_request_duration_seconds",
                "rest_client_transport_create_calls_total",
        };
        for (size_t i = 0; i < ELEMENTSOF(absent); i++)
                if (expo_family(e, absent[i])) {
                        fprintf(stderr, "  %s printed before any value\n", absent[i]);
                        CHECK(!"a labelled family printed early");
                }

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
        /* The scrape itself went over loopback IP: the namespace's octets. */
        CHECK(expo_get(e, "process_network_receive_bytes_total", NULL) > 0);
        CHECK(expo_get(e, "process_network_transmit_bytes_total", NULL) > 0);
        f = expo_family(e, "process_cpu_seconds_total");
        CHECK(f && strcmp(f->type, "counter") == 0 && strncmp(f->help, "[ALPHA]", 7) != 0);

out:
        metrics_free(m);
        close(hold);
        free(e);
        config_done(&c);
        ev_loop_free(l);
}

#define SYNC "kubeproxy_sync_proxy_rules_duration_seconds"
#define FULL "kubeproxy_sync_full_proxy_rules_duration_seconds"
#define PARTIAL "kubeproxy_sync_partial_proxy_rules_duration_seconds"
#define LAST "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
#define V4 "ip_family=\"IPv4\""
#define V6 "ip_family=\"IPv6\""

static void test_values_move(void) {
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
        double t0, t1, ts;
        int hold, port;

        CHECK(config_init(&c) == 0);
        port = start(l, &c, &m, &hold);
        CHECK(port > 0);
        if (port <= 0)
                goto out;

        /* Asked for: the queued timestamp of that family only. */
        t0 = now_s();
        metrics_sync_queued(m, 4);
        if (!scrape(l, port, e))
                goto out;
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", V4) >= t0);
        CHECK(isnan(expo_get(e, "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", V6)));

        /* IPv4's full sync of 3 ms: in the sync and full histograms, with
         * upstream's buckets; no partial series yet; the timestamp set. */
        t0 = now_s();
        metrics_sync_done(m, 4, true, true, 0.003);
        t1 = now_s();
        if (!scrape(l, port, e))
                goto out;
        f = expo_family(e, SYNC);
        CHECK(f && strcmp(f->type, "histogram") == 0 && f->n == ELEMENTSOF(sync_le) + 2);
        for (size_t i = 0; f && i < ELEMENTSOF(sync_le); i++) {
                snprintf(labels, sizeof labels, V4 ",le=\"%s\"", sync_le[i]);
                CHECK_STREQ(e->s[f->first + i].labels, labels);
                CHECK(e->s[f->first + i].value == (i >= 2));
        }
        CHECK(expo_get(e, SYNC "_sum", V4) == 0.003);
        CHECK(expo_get(e, FULL "_count", V4) == 1);
        CHECK(!expo_family(e, PARTIAL));
        ts = expo_get(e, LAST, V4);
        CHECK(ts >= t0 - 0.001 && ts <= t1 + 0.001);
        CHECK(isnan(expo_get(e, LAST, V6)));

        /* A partial sync whose restore failed (100 s: past every bound):
         * both failure counters, the duration observed, the timestamp kept. */
        metrics_apply_failed(m, 4, true);
        metrics_sync_done(m, 4, false, false, 100);
        if (!scrape(l, port, e))
                goto out;
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_restore_failures_total", V4) == 1);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", V4) == 1);
        CHECK(expo_get(e, SYNC "_bucket", V4 ",le=\"16.384\"") == 1);
        CHECK(expo_get(e, SYNC "_bucket", V4 ",le=\"+Inf\"") == 2);
        CHECK(expo_get(e, PARTIAL "_bucket", V4 ",le=\"+Inf\"") == 1);
        CHECK(expo_get(e, PARTIAL "_bucket", V4 ",le=\"16.384\"") == 0);
        CHECK(expo_get(e, LAST, V4) == ts);

        /* IPv6 has its own series, printed after IPv4's; a failed full
         * restore counts once, not as partial. */
        metrics_apply_failed(m, 6, false);
        metrics_sync_done(m, 6, true, false, 0.5);
        metrics_sync_done(m, 6, true, true, 0.5);
        if (!scrape(l, port, e))
                goto out;
        CHECK(expo_get(e, SYNC "_count", V4) == 2);
        CHECK(expo_get(e, SYNC "_count", V6) == 2);
        CHECK(expo_get(e, FULL "_sum", V6) == 1);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_restore_failures_total", V6) == 1);
        CHECK(isnan(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", V6)));
        CHECK(expo_get(e, LAST, V6) >= t1);
        CHECK(expo_get(e, LAST, V4) == ts);
        f = expo_family(e, SYNC);
        CHECK(f && strncmp(e->s[f->first].labels, V4, strlen(V4)) == 0 &&
              strcmp(e->s[f->first + f->n - 1].labels, V6) == 0);

        /* Rules per family and table, changes queued and applied, network
         * programming, Local policies without endpoints, the conntrack
         * reconciler, health answers. */
        metrics_rules(m, 4, "nat", 120, 30);
        metrics_rules(m, 4, "filter", 10, 2);
        metrics_rules(m, 6, "nat", 50, 5);
        metrics_change_queued(m, true);
        metrics_change_queued(m, true);
        metrics_change_queued(m, false);
        metrics_network_programming(m, 4, 0.3);
        metrics_network_programming(m, 4, 400);
        metrics_network_programming(m, 6, 2);
        metrics_no_local_endpoints(m, 4, "internal", 3);
        metrics_no_local_endpoints(m, 4, "external", 0);
        metrics_no_local_endpoints(m, 6, "external", 1);
        metrics_conntrack_reconciled(m, 4, 0.0005, 0);
        metrics_health_answer(m, "healthz", 503);
        metrics_health_answer(m, "healthz", 200);
        metrics_health_answer(m, "healthz", 200);
        metrics_health_answer(m, "livez", 200);
        if (!scrape(l, port, e))
                goto out;
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_total", V4 ",table=\"filter\"") == 10);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_total", V4 ",table=\"nat\"") == 120);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_last", V4 ",table=\"filter\"") == 2);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_last", V4 ",table=\"nat\"") == 30);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_last", V6 ",table=\"nat\"") == 5);
        CHECK(isnan(expo_get(e, "kubeproxy_sync_proxy_rules_iptables_last", V6 ",table=\"filter\"")));
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_endpoint_changes_pending", NULL) == 2);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_endpoint_changes_total", NULL) == 2);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_service_changes_pending", NULL) == 1);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_service_changes_total", NULL) == 1);
        CHECK(expo_get(e, "kubeproxy_network_programming_duration_seconds_bucket", V4 ",le=\"0.25\"") == 0);
        CHECK(expo_get(e, "kubeproxy_network_programming_duration_seconds_bucket", V4 ",le=\"0.5\"") == 1);
        CHECK(expo_get(e, "kubeproxy_network_programming_duration_seconds_bucket", V4 ",le=\"300\"") == 1);
        CHECK(expo_get(e, "kubeproxy_network_programming_duration_seconds_count", V4) == 2);
        CHECK(expo_get(e, "kubeproxy_network_programming_duration_seconds_sum", V4) == 400.3);
        CHECK(expo_get(e, "kubeproxy_network_programming_duration_seconds_bucket", V6 ",le=\"2\"") == 1);
        CHECK(expo_get(e, "kubeproxy_network_programming_duration_seconds_bucket", V6 ",le=\"1\"") == 0);
        f = expo_family(e, "kubeproxy_network_programming_duration_seconds");
        CHECK(f && f->n == 2 * (81 + 1 + 2));
        if (f) {
                CHECK_STREQ(e->s[f->first].labels, V4 ",le=\"0\"");
                CHECK_STREQ(e->s[f->first + 1].labels, V4 ",le=\"0.25\"");
                CHECK_STREQ(e->s[f->first + 3].labels, V4 ",le=\"1\"");
                CHECK_STREQ(e->s[f->first + 61].labels, V4 ",le=\"59\"");
                CHECK_STREQ(e->s[f->first + 62].labels, V4 ",le=\"60\"");
                CHECK_STREQ(e->s[f->first + 73].labels, V4 ",le=\"115\"");
                CHECK_STREQ(e->s[f->first + 74].labels, V4 ",le=\"120\"");
                CHECK_STREQ(e->s[f->first + 80].labels, V4 ",le=\"300\"");
        }
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
                       V4 ",traffic_policy=\"external\"") == 0);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
                       V4 ",traffic_policy=\"internal\"") == 3);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
                       V6 ",traffic_policy=\"external\"") == 1);
        /* The reconciler's count exists from its first run, at 0. */
        CHECK(expo_get(e, "kubeproxy_conntrack_reconciler_deleted_entries_total", V4) == 0);
        CHECK(expo_get(e, "kubeproxy_conntrack_reconciler_sync_duration_seconds_bucket", V4 ",le=\"0.001\"") == 1);
        CHECK(isnan(expo_get(e, "kubeproxy_conntrack_reconciler_deleted_entries_total", V6)));
        CHECK(expo_get(e, "kubeproxy_proxy_healthz_total", "code=\"200\"") == 2);
        CHECK(expo_get(e, "kubeproxy_proxy_healthz_total", "code=\"503\"") == 1);
        CHECK(expo_get(e, "kubeproxy_proxy_livez_total", "code=\"200\"") == 1);
        CHECK(isnan(expo_get(e, "kubeproxy_proxy_livez_total", "code=\"503\"")));

        /* Applying the changes empties the queue; totals stay; deletions add up. */
        metrics_changes_applied(m);
        metrics_conntrack_reconciled(m, 4, 0.002, 3);
        metrics_conntrack_reconciled(m, 4, 0.002, 2);
        if (!scrape(l, port, e))
                goto out;
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_endpoint_changes_pending", NULL) == 0);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_service_changes_pending", NULL) == 0);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_endpoint_changes_total", NULL) == 2);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_service_changes_total", NULL) == 1);
        CHECK(expo_get(e, "kubeproxy_conntrack_reconciler_deleted_entries_total", V4) == 5);
        CHECK(expo_get(e, "kubeproxy_conntrack_reconciler_sync_duration_seconds_count", V4) == 3);

out:
        metrics_free(m);
        close(hold);
        free(e);
        config_done(&c);
        ev_loop_free(l);
}

/* nftables mode serves its own families: no iptables ones, the nftables
 * sync failures, full and partial histograms. */
static void test_nftables_mode(void) {
        struct ev_loop *l = ev_loop_new();
        struct kproxy_config c;
        struct metrics *m = NULL;
        struct expo *e = calloc(1, sizeof *e);
        int hold, port;

        char *args[] = {"--proxy-mode=nftables", "--feature-gates=PreferSameTrafficDistribution=false,AllAlpha=true"};
        char **rest = NULL;
        size_t n_rest = 0;

        CHECK(config_init(&c) == 0);
        CHECK(config_parse_args(&c, (int) ELEMENTSOF(args), args, NULL, 0, NULL, &rest, &n_rest) == 0);
        free(rest);
        CHECK(c.mode == PROXY_MODE_NFTABLES);
        port = start(l, &c, &m, &hold);
        CHECK(port > 0);
        if (port <= 0)
                goto out;
        metrics_sync_done(m, 4, true, true, 0.2);
        metrics_apply_failed(m, 6, true);
        metrics_sync_done(m, 6, false, false, 0.01);
        metrics_rules(m, 4, "nat", 5, 5);              /* iptables mode's: not served here */
        metrics_no_local_endpoints(m, 4, "external", 2);
        metrics_conntrack_reconciled(m, 6, 0.01, 1);
        if (!scrape_mode(l, port, METRICS_NFTABLES, e))
                goto out;
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_nftables_sync_failures_total", V6) == 1);
        CHECK(isnan(expo_get(e, "kubeproxy_sync_proxy_rules_nftables_sync_failures_total", V4)));
        CHECK(expo_get(e, FULL "_count", V4) == 1);
        CHECK(expo_get(e, PARTIAL "_count", V6) == 1);
        CHECK(expo_get(e, "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
                       V4 ",traffic_policy=\"external\"") == 2);
        CHECK(expo_get(e, "kubeproxy_conntrack_reconciler_deleted_entries_total", V6) == 1);
        CHECK(!expo_family(e, "kubeproxy_sync_proxy_rules_iptables_total"));
        CHECK(!expo_family(e, "kubeproxy_sync_proxy_rules_iptables_restore_failures_total"));
        CHECK(!expo_family(e, "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total"));
        /* The gates as set: by name, and alpha ones by AllAlpha. */
        CHECK(expo_get(e, "kubernetes_feature_enabled",
                       "name=\"PreferSameTrafficDistribution\",stage=\"BETA\"") == 0);
        CHECK(expo_get(e, "kubernetes_feature_enabled", "name=\"AllAlpha\",stage=\"ALPHA\"") == 1);
        CHECK(expo_get(e, "kubernetes_feature_enabled", "name=\"CBORServingAndStorage\",stage=\"ALPHA\"") == 1);
        /* Never separate from the sync's transaction in kproxy: no sample. */
        CHECK(!expo_family(e, "kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total"));
out:
        metrics_free(m);
        close(hold);
        free(e);
        config_done(&c);
        ev_loop_free(l);
}

/* The API client's requests as client-go's metrics count them: every
 * request by status, method and host; lists also by duration, wait for the
 * rate limit and sizes; watches only counted. */
static void test_client(void) {
        struct ev_loop *l = ev_loop_new();
        struct kproxy_config c;
        struct metrics *m = NULL;
        struct expo *e = calloc(1, sizeof *e);
        const struct expo_family *f;
        int hold, port;
#define HOST "host=\"10.0.0.1:6443\""

        CHECK(config_init(&c) == 0);
        port = start(l, &c, &m, &hold);
        CHECK(port > 0);
        if (port <= 0)
                goto out;
        metrics_api_transport(m);
        metrics_api_request(m, "GET", "10.0.0.1:6443", 200, false, 0.03, 0.02, 3000);
        metrics_api_request(m, "GET", "10.0.0.1:6443", 200, true, 5, 0.5, 0);
        metrics_api_request(m, "GET", "10.0.0.1:6443", 410, true, 0.01, 0, 0);
        metrics_api_request(m, "GET", "10.0.0.1:6443", 0, false, 10, 0, 0);
        metrics_api_request(m, "GET", "a\"b\\c\nd", 500, false, 0.001, 0, 70);
        if (!scrape(l, port, e))
                goto out;
        CHECK(expo_get(e, "rest_client_transport_cache_entries", NULL) == 1);
        CHECK(expo_get(e, "rest_client_transport_create_calls_total", "result=\"miss\"") == 1);
        CHECK(expo_get(e, "rest_client_requests_total", "code=\"200\"," HOST ",method=\"GET\"") == 2);
        CHECK(expo_get(e, "rest_client_requests_total", "code=\"410\"," HOST ",method=\"GET\"") == 1);
        CHECK(expo_get(e, "rest_client_requests_total", "code=\"<error>\"," HOST ",method=\"GET\"") == 1);
        CHECK(expo_get(e, "rest_client_requests_total", "code=\"500\",host=\"a\\\"b\\\\c\\nd\",method=\"GET\"") == 1);
        f = expo_family(e, "rest_client_requests_total");
        CHECK(f && f->n == 4);
        /* Two lists to 10.0.0.1 (the watches are not timed). */
        CHECK(expo_get(e, "rest_client_request_duration_seconds_count", HOST ",verb=\"GET\"") == 2);
        CHECK(expo_get(e, "rest_client_request_duration_seconds_bucket", HOST ",verb=\"GET\",le=\"0.025\"") == 0);
        CHECK(expo_get(e, "rest_client_request_duration_seconds_bucket", HOST ",verb=\"GET\",le=\"0.1\"") == 1);
        CHECK(expo_get(e, "rest_client_request_duration_seconds_bucket", HOST ",verb=\"GET\",le=\"15\"") == 2);
        CHECK(expo_get(e, "rest_client_request_duration_seconds_sum", HOST ",verb=\"GET\"") == 10.03);
        /* Lists' waits for the rate limit (a watch's 0.5 s is not one). */
        CHECK(expo_get(e, "rest_client_rate_limiter_duration_seconds_bucket", HOST ",verb=\"GET\",le=\"0.005\"") == 1);
        CHECK(expo_get(e, "rest_client_rate_limiter_duration_seconds_bucket", HOST ",verb=\"GET\",le=\"0.025\"") == 2);
        CHECK(expo_get(e, "rest_client_rate_limiter_duration_seconds_sum", HOST ",verb=\"GET\"") == 0.02);
        CHECK(expo_get(e, "rest_client_request_size_bytes_bucket", HOST ",verb=\"GET\",le=\"64\"") == 2);
        /* Only the answered list has a response size. */
        CHECK(expo_get(e, "rest_client_response_size_bytes_count", HOST ",verb=\"GET\"") == 1);
        CHECK(expo_get(e, "rest_client_response_size_bytes_bucket", HOST ",verb=\"GET\",le=\"1024\"") == 0);
        CHECK(expo_get(e, "rest_client_response_size_bytes_bucket", HOST ",verb=\"GET\",le=\"4096\"") == 1);
        /* Series sorted by host: "10..." before "a...". */
        f = expo_family(e, "rest_client_request_duration_seconds");
        CHECK(f && strncmp(e->s[f->first].labels, HOST, strlen(HOST)) == 0);
        CHECK(!expo_family(e, "rest_client_request_retries_total"));
        CHECK(!expo_family(e, "rest_client_exec_plugin_call_total"));
#undef HOST
out:
        metrics_free(m);
        close(hold);
        free(e);
        config_done(&c);
        ev_loop_free(l);
}

/* Runs argv, waits; its exit status or -1. */
static int run(const char *const *argv) {
        int status;
        pid_t pid = fork();

        if (pid == 0) {
                int devnull = open("/dev/null", O_WRONLY);
                if (devnull >= 0)
                        dup2(devnull, 1);
                execvp(argv[0], (char *const *) argv);
                _exit(127);
        }
        if (pid < 0 || waitpid(pid, &status, 0) < 0)
                return -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* In the test's own network namespace: the nfacct families follow the
 * kernel's counters, read at scrape time; a missing counter prints
 * nothing, as upstream's collector. */
/* Whether main() moved into a network namespace of its own. */
static bool in_own_netns;

static void test_nfacct(void) {
        static const char *const rule[] = {
                "iptables", "-w", "-A", "OUTPUT", "-d", "127.0.0.1", "-p", "udp", "--dport", "9", "-m", "nfacct",
                "--nfacct-name", "localhost_nps_accepted_pkts", NULL,
        };
        struct ev_loop *l = ev_loop_new();
        struct kproxy_config c;
        struct metrics *m = NULL;
        struct expo *e = calloc(1, sizeof *e);
        struct nfacct *a = NULL;
        uint64_t packets = 99;
        int hold = -1, port, fd = -1;
        const char *invalid = "kubeproxy_iptables_ct_state_invalid_dropped_packets_total";
        const char *localhost = "kubeproxy_iptables_localhost_nodeports_accepted_packets_total";

        CHECK(config_init(&c) == 0);
        if (!in_own_netns) {
                fprintf(stderr, "  skipped: needs root for a network namespace of its own\n");
                goto out;
        }
        port = start(l, &c, &m, &hold);
        CHECK(port > 0);
        CHECK(nfacct_open(&a) == 0);
        if (port <= 0 || !a)
                goto out;

        /* A new namespace has no counters. */
        CHECK(nfacct_get(a, NFACCT_COUNTER_LOCALHOST_NODEPORTS, &packets) == -ENOENT);
        fprintf(stderr, "  (two warnings about missing counters are expected)\n");
        if (!scrape(l, port, e))
                goto out;
        CHECK(!expo_family(e, invalid) && !expo_family(e, localhost));

        CHECK(nfacct_ensure_all());
        CHECK(nfacct_ensure_all());     /* again: they exist, their counts stay */
        if (!scrape(l, port, e))
                goto out;
        CHECK(expo_get(e, invalid, NULL) == 0);
        CHECK(expo_get(e, localhost, NULL) == 0);

        /* Three packets through a rule that counts in one of them. */
        CHECK(run(rule) == 0);
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        CHECK(fd >= 0);
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(9), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        for (int i = 0; fd >= 0 && i < 3; i++)
                CHECK(sendto(fd, "x", 1, 0, (struct sockaddr *) &to, sizeof to) == 1);
        CHECK(nfacct_get(a, NFACCT_COUNTER_LOCALHOST_NODEPORTS, &packets) == 0 && packets == 3);
        CHECK(nfacct_ensure_all());
        if (!scrape(l, port, e))
                goto out;
        CHECK(expo_get(e, localhost, NULL) == 3);
        CHECK(expo_get(e, invalid, NULL) == 0);
out:
        if (fd >= 0)
                close(fd);
        nfacct_close(a);
        metrics_free(m);
        if (hold >= 0)
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
        in_own_netns = test_netns_enter() == 0;
        TEST_RUN(test_format_float);
        TEST_RUN(test_parser);
        TEST_RUN(test_table_is_upstreams);
        TEST_RUN(test_bind);
        TEST_RUN(test_fresh);
        TEST_RUN(test_values_move);
        TEST_RUN(test_nftables_mode);
        TEST_RUN(test_client);
        TEST_RUN(test_nfacct);
        TEST_RUN(test_paths);
        TEST_RUN(test_config_json);
        TEST_DONE();
}
