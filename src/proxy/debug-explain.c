/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/debug-explain.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "explain/explain.h"
#include "http/mhd.h"
#include "util/buf.h"

struct args {
        struct explain_query q;
        char err[EXPLAIN_ERRLEN];
        bool bad;
};

static void on_arg(void *userdata, const char *key, const char *value) {
        struct args *a = userdata;
        if (a->bad)
                return;
        if (!value || explain_query_set(&a->q, key, value, a->err) < 0) {
                if (!value)
                        snprintf(a->err, sizeof a->err, "%.64s has no value", key);
                a->bad = true;
        }
}

static void bad_request(struct mhd_reply *reply, const char *err) {
        reply->status = 400;
        reply->content_type = "text/plain; charset=utf-8";
        buf_printf(&reply->body, "%s\n", err);
}

void debug_explain(const struct debug_explain_node *n, const struct mhd_request *req, struct mhd_reply *reply) {
        struct args a = {0};

        mhd_request_foreach_arg(req, on_arg, &a);
        if (a.bad || explain_query_check(&a.q, a.err) < 0) {
                bad_request(reply, a.err);
                return;
        }
        debug_explain_answer(n, &a.q, reply);
}

void debug_explain_answer(const struct debug_explain_node *n, const struct explain_query *q,
                          struct mhd_reply *reply) {
        json_t *j = NULL;
        int r = explain_answer(n->m, n->cfg, n->socket_lb, n->node_name, n->host, n->service_cidrs,
                               n->n_service_cidrs, q, &j);
        char *text = r == 0 ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
        json_decref(j);
        if (!text) {
                reply->status = 500;
                reply->content_type = "text/plain; charset=utf-8";
                buf_printf(&reply->body, "cannot explain: %s\n", strerror(r < 0 ? -r : ENOMEM));
                return;
        }
        reply->content_type = "application/json";
        reply->nosniff = true;
        buf_puts(&reply->body, text);
        buf_putc(&reply->body, '\n');
        free(text);
}
