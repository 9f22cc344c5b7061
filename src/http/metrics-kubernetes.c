/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kubernetes_ families of every Kubernetes component: what kproxy is
 * (kubernetes_build_info, component-base's version package) and how its
 * feature gates are set (kubernetes_feature_enabled, which kube-proxy adds
 * with DefaultMutableFeatureGate.AddMetrics() once its flags are read:
 * every gate of the release, by name and stage, 1 when enabled).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "http/metrics-internal.h"
#include "util/buf.h"
#include "util/cleanup.h"

/* Go's GOARCH names for the machine kproxy was built for. */
#if defined(__x86_64__)
#define METRICS_ARCH "amd64"
#elif defined(__aarch64__)
#define METRICS_ARCH "arm64"
#elif defined(__i386__)
#define METRICS_ARCH "386"
#elif defined(__arm__)
#define METRICS_ARCH "arm"
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define METRICS_ARCH "ppc64le"
#elif defined(__s390x__)
#define METRICS_ARCH "s390x"
#elif defined(__riscv) && __riscv_xlen == 64
#define METRICS_ARCH "riscv64"
#else
#define METRICS_ARCH "unknown"
#endif

#if defined(__clang__)
#define METRICS_COMPILER "clang"
#else
#define METRICS_COMPILER "gcc"
#endif

#ifndef KPROXY_GIT_COMMIT
#define KPROXY_GIT_COMMIT ""
#endif

/* Upstream's labels with kproxy's build: git_version is "v" and VERSION,
 * major and minor its first two numbers; there is no Go version, and an
 * unstamped build date is upstream's unstamped one. */
void metrics_write_build_info(const struct metrics *m, const struct metrics_desc *d, struct buf *b) {
        _cleanup_(buf_done) struct buf labels = BUF_INIT;
        char major[16] = "", minor[16] = "";
        unsigned maj, min;

        (void) m;
        if (sscanf(KPROXY_VERSION, "%u.%u", &maj, &min) == 2) {
                snprintf(major, sizeof major, "%u", maj);
                snprintf(minor, sizeof minor, "%u", min);
        }
        metrics_put_label(&labels, "build_date", "1970-01-01T00:00:00Z");
        metrics_put_label(&labels, "compiler", METRICS_COMPILER);
        metrics_put_label(&labels, "git_commit", KPROXY_GIT_COMMIT);
        metrics_put_label(&labels, "git_tree_state", "");
        metrics_put_label(&labels, "git_version", "v" KPROXY_VERSION);
        metrics_put_label(&labels, "go_version", "");
        metrics_put_label(&labels, "major", major);
        metrics_put_label(&labels, "minor", minor);
        metrics_put_label(&labels, "platform", "linux/" METRICS_ARCH);
        metrics_put_header(b, d);
        metrics_put_sample(b, d->name, labels.data, 1);
}

struct metrics_gates {
        const struct metrics_desc *d;
        struct buf *b;
        struct buf labels;
};

static void metrics_put_gate(void *ctx, const char *name, const char *stage, bool enabled) {
        struct metrics_gates *g = ctx;

        buf_clear(&g->labels);
        metrics_put_label(&g->labels, "name", name);
        metrics_put_label(&g->labels, "stage", stage);
        metrics_put_sample(g->b, g->d->name, g->labels.data, enabled ? 1 : 0);
}

/* The gates come in name order; each name has one stage, so that is
 * Go's order of the label sets too. */
void metrics_write_feature_enabled(const struct kproxy_config *c, const struct metrics_desc *d, struct buf *b) {
        struct metrics_gates g = {.d = d, .b = b, .labels = BUF_INIT};

        metrics_put_header(b, d);
        config_features_foreach(c, metrics_put_gate, &g);
        buf_done(&g.labels);
}
