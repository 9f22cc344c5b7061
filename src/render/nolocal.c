/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the tally: only services that have a Local policy without a
 * local endpoint are kept (few, usually), each with its share; the totals
 * move by the difference when a service is recounted. The test is the
 * renderers' (has endpoints, and the policy that applies is Local with no
 * local endpoint), made on the same categorisation (model/endpoints.h).
 */
#include "render/nolocal.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/endpoints.h"
#include "model/model.h"
#include "render/render.h"
#include "util/alloc.h"
#include "util/hmap.h"

struct nolocal_entry {
        char *key;              /* the service's, owned */
        uint32_t internal, external;
};

struct nolocal {
        struct hmap services;   /* key -> struct nolocal_entry, only shares above 0 */
        size_t internal, external;
};

struct nolocal *nolocal_new(void) {
        struct nolocal *t = xcalloc(1, sizeof *t);

        t->services = (struct hmap) HMAP_INIT_KEYED(struct nolocal_entry, key);
        return t;
}

static void nolocal_clear(struct nolocal *t) {
        void *v;

        for (size_t i = 0; hmap_next(&t->services, &i, NULL, &v);) {
                struct nolocal_entry *e = v;
                free(e->key);
                free(e);
        }
        hmap_done(&t->services);
        t->internal = t->external = 0;
}

struct nolocal *nolocal_free(struct nolocal *t) {
        if (!t)
                return NULL;
        nolocal_clear(t);
        free(t);
        return NULL;
}

/* s's ports (of p's family) with a Local policy in use and no local
 * endpoint while others exist. */
static void nolocal_count(const struct model *m, const struct svc *s, const struct render_params *p,
                          uint32_t *ret_internal, uint32_t *ret_external) {
        struct endpoint_filter f = {.node_name = p->node_name, .zone = p->node_zone,
                                    .prefer_same_node = p->prefer_same_node};
        uint32_t internal = 0, external = 0;
        size_t n_slices;
        const struct slice **slices;

        *ret_internal = *ret_external = 0;
        /* A service without a cluster IP of the family has no rules in it. */
        if (!svc_cluster_ip(s, p->family))
                return;
        slices = model_service_slices(m, s->key, &n_slices);
        for (size_t j = 0; j < s->n_ports; j++) {
                struct svc_port_endpoints e;

                if (endpoints_collect(s, &s->ports[j], p->family, slices, n_slices, &f, &e) < 0)
                        continue;
                if (e.has_any && e.n_local == 0) {
                        internal += e.internal_policy_local;
                        external += e.external_policy_local;
                }
                endpoints_done(&e);
        }
        free(slices);
        *ret_internal = internal;
        *ret_external = external;
}

static void nolocal_recount(struct nolocal *t, const struct model *m, const struct render_params *p,
                            const char *key) {
        const struct svc *s = model_service_get(m, key);
        struct nolocal_entry *e = hmap_get(&t->services, key);
        uint32_t internal = 0, external = 0;

        if (s)
                nolocal_count(m, s, p, &internal, &external);
        if (e) {
                t->internal -= e->internal;
                t->external -= e->external;
        }
        t->internal += internal;
        t->external += external;
        if (internal == 0 && external == 0) {
                if (e) {
                        hmap_remove(&t->services, key);
                        free(e->key);
                        free(e);
                }
                return;
        }
        if (!e) {
                e = xcalloc(1, sizeof *e);
                e->key = xstrdup(key);
                hmap_put(&t->services, e->key, e);
        }
        e->internal = internal;
        e->external = external;
}

void nolocal_update(struct nolocal *t, const struct model *m, const struct render_params *p,
                    const struct hmap *changed) {
        const char *key;

        if (changed) {
                for (size_t i = 0; hmap_next(changed, &i, &key, NULL);)
                        nolocal_recount(t, m, p, key);
                return;
        }
        size_t n;
        const struct svc **svcs = model_services_sorted(m, &n);

        nolocal_clear(t);
        for (size_t i = 0; i < n; i++)
                nolocal_recount(t, m, p, svcs[i]->key);
        free(svcs);
}

void nolocal_totals(const struct nolocal *t, size_t *ret_internal, size_t *ret_external) {
        *ret_internal = t->internal;
        *ret_external = t->external;
}
