/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/hcnp-feed.h"

#include <stdlib.h>
#include <string.h>

#include "http/hcnp.h"
#include "model/endpoints.h"
#include "model/model.h"
#include "render/render.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/hmap.h"

/* This node's ready endpoints of s, as distinct IPs: a pod serving two
 * ports counts once. */
static size_t local_ready_ips(const struct model *m, const struct svc *s, uint8_t family,
                              const struct endpoint_filter *f) {
        struct hmap ips = HMAP_INIT;
        struct buf keys = BUF_INIT;
        size_t n_slices;
        const struct slice **slices = model_service_slices(m, s->key, &n_slices);

        for (size_t j = 0; j < s->n_ports; j++) {
                struct svc_port_endpoints e;
                if (endpoints_collect(s, &s->ports[j], family, slices, n_slices, f, &e) < 0)
                        continue;
                for (size_t k = 0; k < e.n_all; k++)
                        if (e.all[k].local && e.all[k].ready) {
                                buf_put(&keys, e.all[k].str + e.all[k].ip_off, e.all[k].ip_len);
                                buf_putc(&keys, '\n');
                        }
                endpoints_done(&e);
        }
        free(slices);
        for (char *q = keys.data; q && *q;) {
                char *nl = strchr(q, '\n');
                *nl = '\0';
                hmap_put(&ips, q, q);
                q = nl + 1;
        }
        size_t n = ips.len;
        hmap_done(&ips);
        buf_done(&keys);
        return n;
}

void hcnp_feed_plan(const struct model *m, uint8_t family, const char *node_name, struct hcnp_feed_plan *ret) {
        struct endpoint_filter f = {.node_name = node_name};
        size_t n = 0, n_svcs;
        const struct svc **svcs = model_services_sorted(m, &n_svcs);
        struct hcnp_service *hs = xcalloc(n_svcs + 1, sizeof *hs);
        /* Namespaces: each key up to its slash, copied (the key is "ns/name",
         * or the bare name of a service sent without a namespace). */
        char **ns = xcalloc(n_svcs + 1, sizeof *ns);

        for (size_t i = 0; i < n_svcs; i++) {
                const struct svc *s = svcs[i];
                if (!s->health_check_node_port)
                        continue;
                ns[n] = xstrndup(s->key, s->name == s->key ? 0 : (size_t) (s->name - s->key) - 1);
                hs[n] = (struct hcnp_service) {
                        .ns = ns[n],
                        .name = s->name,
                        .port = s->health_check_node_port,
                        .local_endpoints = local_ready_ips(m, s, family, &f),
                };
                n++;
        }
        free(svcs);
        *ret = (struct hcnp_feed_plan) {.svcs = hs, .ns = ns, .n = n};
}

void hcnp_feed_plan_done(struct hcnp_feed_plan *p) {
        for (size_t i = 0; i < p->n; i++)
                free(p->ns[i]);
        free(p->ns);
        free(p->svcs);
        *p = (struct hcnp_feed_plan) {0};
}

void hcnp_feed(struct hcnp *h, const struct model *m, const struct render_params *rp, const char *node_name) {
        struct hcnp_feed_plan p;

        if (!h)
                return;
        hcnp_feed_plan(m, rp->family, node_name, &p);
        if (rp->nodeports_match_all)
                hcnp_sync(h, p.svcs, p.n, NULL, 0);
        else
                hcnp_sync(h, p.svcs, p.n, rp->nodeport_ips, rp->n_nodeport_ips);
        hcnp_feed_plan_done(&p);
}
