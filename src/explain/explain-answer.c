/* SPDX-License-Identifier: Apache-2.0 */
/*
 * explain for a node described by its configuration: the family's
 * parameters as the renderers derive them, the mode, and the answer as
 * JSON. `kproxy explain` and the daemon's /debug/explain both ask here,
 * so the two give the same answer for the same model.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>

#include "config/config.h"
#include "explain/explain.h"
#include "host/host.h"
#include "host/render-params.h"
#include "model/model.h"
#include "render/render.h"
#include "util/buf.h"

int explain_mode_of_config(const struct kproxy_config *c, enum explain_mode *ret, FILE *why) {
        switch (c->mode) {
        case PROXY_MODE_IPTABLES:
                *ret = EXPLAIN_MODE_IPTABLES;
                return 0;
        case PROXY_MODE_NFTABLES:
                *ret = EXPLAIN_MODE_NFTABLES;
                return 0;
        case PROXY_MODE_USERSPACE:
                if (c->socket_lb) {
                        if (why)
                                fprintf(why, "kproxy explain: --socket-lb works beside iptables or nftables mode, not "
                                        "userspace mode\n");
                        return -EINVAL;
                }
                *ret = EXPLAIN_MODE_USERSPACE;
                return 0;
        default:
                if (why)
                        fprintf(why, "kproxy explain: proxy mode %s is not supported: kproxy runs in " PROXY_MODE_NAMES
                                " mode\n",
                        proxy_mode_to_string(c->mode));
                return -EINVAL;
        }
}

int explain_answer(const struct model *m, const struct kproxy_config *c, bool socket_lb, const char *node_name,
                       const struct host_facts *host, const struct inet_cidr *cidrs, size_t n_cidrs,
                       const struct explain_query *q, json_t **ret) {
        struct render_params p;
        struct buf warnings = BUF_INIT;
        struct explain_result res;
        enum explain_mode mode;
        int r = explain_mode_of_config(c, &mode, NULL);
        if (r < 0)
                return r;
        r = render_params_init(&p, q->dst.family, c, node_name, model_node(m), host, &warnings);
                buf_done(&warnings);
        if (r < 0)
                return r;
        const struct explain_node n = {
                .p = &p,
                .mode = mode,
                .socket_lb = socket_lb,
                .host_addrs = host->addrs,
                .n_host_addrs = host->n_addrs,
                /* Only nftables mode acts on them (and the daemon
                 * watches them only then): the others' answers do not
                 * depend on whether they were read. */
                .service_cidrs = mode == EXPLAIN_MODE_NFTABLES ? cidrs : NULL,
                .n_service_cidrs = mode == EXPLAIN_MODE_NFTABLES ? n_cidrs : 0,
        };
        r = explain_connection(m, &n, q, &res);
        render_params_done(&p);
        if (r < 0)
                return r;
        *ret = explain_to_json(q, &res);
        explain_result_done(&res);
        return *ret ? 0 : -ENOMEM;
}

