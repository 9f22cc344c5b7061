/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: one JSON object through every object decoder
 * (kube/decode*.c) whatever its kind, into a model and out again, and
 * through the intake as each kind of object. A decoder either fails with
 * a message (one line, within KUBE_ERRLEN) and nothing returned, or returns
 * an object whose names are what the Kubernetes grammar allows, which the
 * renderers rely on without escaping (docs/architecture.md).
 */
#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/decode.h"
#include "kube/intake.h"
#include "model/model.h"
#include "util/inet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_err(int r, const char *err) {
        if (r < 0 || r == KUBE_IGNORED)
                assert(err[0] != '\0' && strlen(err) < KUBE_ERRLEN && !strchr(err, '\n'));
}

/* "namespace/name", or "name" for an object sent without a namespace
 * (client-go's MetaNamespaceKeyFunc, kube/decode.h), of [a-z0-9.-]. */
static void check_key(const char *key) {
        const char *slash = strchr(key, '/');
        assert(key[0] && (!slash || (slash > key && slash[1] && !strchr(slash + 1, '/'))));
        for (const char *p = key; *p; p++)
                assert((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' ||
                       p == slash);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_t *obj = json_loadb((const char *) data, size, 0, NULL);
        struct model *m;
        struct intake *in;
        char err[KUBE_ERRLEN], ref[512];
        struct svc *s = NULL;
        struct slice *sl = NULL;
        struct node *n = NULL;
        char *name = NULL;
        struct inet_cidr *cidrs = NULL;
        size_t n_cidrs = 0;
        int r;

        if (!obj)
                return 0;
        m = model_new();
        kube_object_ref(obj, ref, sizeof ref);
        assert(strlen(ref) < sizeof ref);

        err[0] = '\0';
        r = kube_decode_service(obj, &s, err);
        check_err(r, err);
        if (r == 0) {
                check_key(s->key);
                assert(s->name == (strchr(s->key, '/') ? strchr(s->key, '/') + 1 : s->key));
                model_service_upsert(m, s);
        }
        err[0] = '\0';
        r = kube_decode_slice(obj, &sl, err);
        check_err(r, err);
        if (r == 0) {
                check_key(sl->key);
                check_key(sl->service_key);
                model_slice_upsert(m, sl);
        }
        err[0] = '\0';
        r = kube_decode_node(obj, &n, err);
        check_err(r, err);
        if (r == 0)
                model_node_set(m, n);
        err[0] = '\0';
        r = kube_decode_service_cidr(obj, &name, &cidrs, &n_cidrs, err);
        check_err(r, err);
        if (r == 0) {
                assert(n_cidrs == 1 || n_cidrs == 2);
                free(name);
                free(cidrs);
        }
        model_free(m);

        /* The same object as each kind the watches deliver, then gone. */
        if (intake_new("node-1", NULL, &in) < 0)
                abort();
        for (int src = 0; src < _INTAKE_SOURCE_MAX; src++) {
                intake_object(in, (enum intake_source) src, ref, obj);
                intake_object(in, (enum intake_source) src, ref, obj);
        }
        for (int src = 0; src < _INTAKE_SOURCE_MAX; src++)
                intake_object(in, (enum intake_source) src, ref, NULL);
        intake_free(in);
        json_decref(obj);
        return 0;
}
