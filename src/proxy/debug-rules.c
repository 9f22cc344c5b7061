/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/debug-rules.h"

#include <stdbool.h>
#include <string.h>

#include "host/render-params.h"
#include "http/mhd.h"
#include "model/model.h"
#include "proxy/backend.h"
#include "render/render.h"
#include "util/buf.h"

static void family(const struct debug_rules_node *n, uint8_t fam, struct mhd_reply *reply) {
        struct render_params p;
        struct buf warnings = BUF_INIT;
        if (render_params_init(&p, fam, n->cfg, n->node_name, model_node(n->m), n->host, &warnings) < 0) {
                buf_printf(&reply->body, "# IPv%u: no parameters: %s\n", fam, warnings.data ? warnings.data : "");
                buf_done(&warnings);
                return;
        }
        buf_done(&warnings);
        const struct backend_ops *const ops[] = {n->ops, n->companion};
        for (size_t i = 0; i < 2; i++) {
                if (!ops[i])
                        continue;
                buf_printf(&reply->body, "# IPv%u, %s\n", fam, i ? "socket load balancing" : ops[i]->name);
                if (ops[i]->render(n->m, &p, n->service_cidrs, n->n_service_cidrs, false, &reply->body) < 0)
                        buf_puts(&reply->body, "# (out of memory)\n");
        }
        render_params_done(&p);
}

void debug_rules(const struct debug_rules_node *n, struct mhd_reply *reply) {
        reply->content_type = "text/plain; charset=utf-8";
        reply->nosniff = true;
        if (n->too_soon) {
                /* A render of everything is the price of an answer: a
                 * client that loops gets one a period, the sync loop the rest. */
                reply->status = 429;
                mhd_reply_add_header(reply, "Retry-After", "1");
                buf_puts(&reply->body, "/debug/rules answers once a second\n");
                return;
        }
        buf_printf(&reply->body, "# kproxy: what %s mode writes for the model this daemon holds\n", n->ops->name);
        if (n->pending)
                buf_printf(&reply->body, "# %zu service%s changed since the last sync: not all of this is in the "
                           "kernel yet\n", n->pending, n->pending == 1 ? "" : "s");
        else
                buf_puts(&reply->body, "# nothing pending: the kernel holds this since the last sync\n");
        for (size_t i = 0; i < n->n_families; i++)
                family(n, n->families[i], reply);
}
