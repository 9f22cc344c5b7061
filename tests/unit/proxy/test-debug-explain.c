/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /debug/explain's answer (proxy/debug-explain.c) without a server: for a
 * query, the daemon's model answers as JSON (explain's schema), with the
 * endpoints of the service; an address no service has is "none".
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "config/config.h"
#include "explain/explain.h"
#include "host/host.h"
#include "http/mhd.h"
#include "model/model.h"
#include "proxy/debug-explain.h"
#include "test.h"
#include "util/buf.h"
#include "util/inet.h"

static json_t *ask(const struct debug_explain_node *n, const char *dst, unsigned *status) {
        struct explain_query q = {0};
        char err[EXPLAIN_ERRLEN];
        struct mhd_reply r = {.status = 200, .body = BUF_INIT, .headers = BUF_INIT};
        CHECK(explain_query_set(&q, "source", "10.244.1.5", err) == 0);
        CHECK(explain_query_set(&q, "destination", dst, err) == 0);
        CHECK(explain_query_check(&q, err) == 0);
        debug_explain_answer(n, &q, &r);
        *status = r.status;
        json_t *j = json_loadb(r.body.data ? r.body.data : "", r.body.len, 0, NULL);
        CHECK(r.content_type && strcmp(r.content_type, "application/json") == 0);
        buf_done(&r.body);
        buf_done(&r.headers);
        return j;
}

static void test_answer(void) {
        struct kproxy_config cfg;
        struct host_facts host = {0};
        struct inet_cidr hostaddr;
        unsigned status;

        config_init(&cfg);
        cfg.mode = PROXY_MODE_NFTABLES;
        cfg.cluster_cidr = strdup("10.244.0.0/16");
        inet_cidr_parse("192.168.0.2/24", &hostaddr);
        host.addrs = &hostaddr;
        host.n_addrs = 1;
        struct model *m = model_new();
        cluster_small(m, false);
        struct debug_explain_node n = {.m = m, .cfg = &cfg, .node_name = "node-1", .host = &host};

        json_t *j = ask(&n, "10.96.0.10:80", &status);
        CHECK(status == 200 && j);
        CHECK_STREQ(json_string_value(json_object_get(j, "verdict")), "forward");
        CHECK_STREQ(json_string_value(json_object_get(json_object_get(j, "service"), "name")), "ns/svc-a");
        CHECK(json_array_size(json_object_get(j, "endpoints")) == 2);
        json_decref(j);

        j = ask(&n, "10.96.0.99:80", &status);
        CHECK(status == 200 && j);
        CHECK_STREQ(json_string_value(json_object_get(j, "verdict")), "none");
        json_decref(j);

        model_free(m);
        config_done(&cfg);
}

int main(void) {
        TEST_RUN(test_answer);
        TEST_DONE();
}
