/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What the benchmark programs share: a monotonic clock, and the loader's
 * callback that decodes a state file's objects into a model (objects that
 * do not decode are left out, as the daemon leaves them out).
 */
#include <jansson.h>
#include <string.h>
#include <time.h>

#include "kube/decode.h"
#include "model/model.h"

static inline double bench_now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* A kube_object_fn: u is the struct model. */
static inline int bench_add(void *u, const json_t *obj) {
        struct model *m = u;
        const char *kind = json_string_value(json_object_get(obj, "kind"));
        char err[KUBE_ERRLEN];
        if (kind && strcmp(kind, "Service") == 0) {
                struct svc *s;
                if (kube_decode_service(obj, &s, err) == 0)
                        model_service_upsert(m, s);
        } else if (kind && strcmp(kind, "EndpointSlice") == 0) {
                struct slice *s;
                if (kube_decode_slice(obj, &s, err) == 0)
                        model_slice_upsert(m, s);
        } else if (kind && strcmp(kind, "Node") == 0) {
                struct node *n;
                if (kube_decode_node(obj, &n, err) == 0)
                        model_node_set(m, n);
        }
        return 0;
}
