/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The health-check node ports the model asks for (proxy/hcnp-feed.c's
 * plan): one per service with a healthCheckNodePort, in key order, with
 * its namespace and name, and this node's ready endpoints counted
 * (another node's, or another family's, not at all).
 */
#include <string.h>

#include "cluster.h"
#include "http/hcnp.h"
#include "model/model.h"
#include "proxy/hcnp-feed.h"
#include "test.h"

static void test_plan(void) {
        struct model *m = model_new();
        struct hcnp_feed_plan p;

        cluster_service(m, &(struct cluster_svc) {.name = "web", .ip = "10.96.0.10", .type = "LoadBalancer",
                                                  .port = 80, .node_port = 30080, .lb = "198.51.100.1",
                                                  .local = true, .health_check_node_port = 31000});
        cluster_service(m, &(struct cluster_svc) {.name = "api", .ip = "10.96.0.11", .type = "LoadBalancer",
                                                  .port = 80, .node_port = 30081, .lb = "198.51.100.2",
                                                  .local = true, .health_check_node_port = 31001});
        cluster_service(m, &(struct cluster_svc) {.name = "plain", .ip = "10.96.0.12", .port = 80});
        /* web: 5 endpoints on node-1 and node-2 by turns (3 on node-1);
         * plain's endpoints do not matter; api has none. */
        cluster_endpoints(m, "web", 1, 5);
        cluster_endpoints(m, "plain", 2, 4);

        hcnp_feed_plan(m, 4, "node-1", &p);
        CHECK(p.n == 2);
        if (p.n == 2) {
                CHECK_STREQ(p.svcs[0].ns, "ns");
                CHECK_STREQ(p.svcs[0].name, "api");
                CHECK(p.svcs[0].port == 31001 && p.svcs[0].local_endpoints == 0);
                CHECK_STREQ(p.svcs[1].name, "web");
                CHECK(p.svcs[1].port == 31000 && p.svcs[1].local_endpoints == 3);
        }
        hcnp_feed_plan_done(&p);

        hcnp_feed_plan(m, 4, "node-2", &p);
        CHECK(p.n == 2 && p.svcs[1].local_endpoints == 2);
        hcnp_feed_plan_done(&p);
        hcnp_feed_plan(m, 4, "node-9", &p);
        CHECK(p.n == 2 && p.svcs[1].local_endpoints == 0);
        hcnp_feed_plan_done(&p);
        /* Another family: the services are there, their endpoints are not. */
        hcnp_feed_plan(m, 6, "node-1", &p);
        CHECK(p.n == 2 && p.svcs[1].local_endpoints == 0);
        hcnp_feed_plan_done(&p);
        model_free(m);
}

static void test_empty(void) {
        struct model *m = model_new();
        struct hcnp_feed_plan p;
        hcnp_feed_plan(m, 4, "node-1", &p);
        CHECK(p.n == 0);
        hcnp_feed_plan_done(&p);
        /* No server: nothing to do, nothing touched. */
        hcnp_feed(NULL, m, NULL, "node-1");
        model_free(m);
}

int main(void) {
        TEST_RUN(test_plan);
        TEST_RUN(test_empty);
        TEST_DONE();
}
