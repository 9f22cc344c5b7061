/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode's plan (userspace/plan.c) from cluster_small()'s model:
 *  - every service address is held, also one without endpoints; a
 *    frontend per address and port that has endpoints to go to;
 *  - cluster IPs use the cluster list, node ports the external one: with
 *    externalTrafficPolicy Local only node-1's endpoints (a node port
 *    with none on this node has no frontend);
 *  - node ports on the wildcard address, or on nodePortAddresses' match;
 *  - affinity timeouts carried; two services claiming one address and
 *    port: the first in key order; a plan of some services only;
 *  - as this node's clients see it (socket load balancing): external
 *    addresses go to the cluster endpoints under either policy, also on a
 *    node with no endpoint of an ETP Local service; a load-balancer IP
 *    with source ranges and a loopback node-port address are left out.
 */
#include "host/render-params.h"
#include "userspace/plan.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "config/config.h"
#include "config/config-value.h"
#include "host/host.h"
#include "model/model.h"
#include "render/render.h"
#include "test.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "util/inet.h"

struct fixture {
        struct kproxy_config cfg;
        struct host_facts host;
        struct inet_cidr hostaddr;
        struct render_params p;
        struct model *m;
        struct userspace_plan pl;
};

static void fixture_init(struct fixture *f, const char *nodeport_addresses) {
        memset(f, 0, sizeof *f);
        config_init(&f->cfg);
        f->cfg.mode = PROXY_MODE_USERSPACE;
        f->cfg.cluster_cidr = strdup("10.244.0.0/16");
        if (nodeport_addresses)
                CHECK(config_value_strv_push(&f->cfg.nodeport_addresses, &f->cfg.n_nodeport_addresses,
                                             nodeport_addresses, strlen(nodeport_addresses)) == 0);
        inet_cidr_parse("192.168.0.2/32", &f->hostaddr);   /* parsing a /24 keeps its network */
        f->host.addrs = &f->hostaddr;
        f->host.n_addrs = 1;
        CHECK(render_params_init(&f->p, 4, &f->cfg, "node-1", NULL, &f->host, NULL) == 0);
        f->m = model_new();
        cluster_small(f->m, false);
}

static void fixture_done(struct fixture *f) {
        userspace_plan_done(&f->pl);
        model_free(f->m);
        render_params_done(&f->p);
        config_done(&f->cfg);
}

/* The frontend of key as its text line, or "" when there is none. */
static const char *line(const struct userspace_plan *pl, const char *key) {
        static struct buf b = BUF_INIT;
        const struct userspace_frontend *fe = userspace_plan_find(pl, key);

        buf_clear(&b);
        if (fe)
                userspace_frontend_format(fe, &b);
        buf_putc(&b, '\0');
        return b.data;
}

static void test_whole_plan(void) {
        struct fixture f;
        struct buf text = BUF_INIT;

        fixture_init(&f, NULL);
        CHECK(userspace_plan_build(f.m, &f.p, NULL, &f.pl) == 0);
        userspace_plan_format(&f.pl, &text);
        buf_putc(&text, '\0');
        /* Every service address, the one without endpoints (svc-e) too. */
        CHECK(strstr(text.data, "address 10.96.0.14\n"));
        CHECK(strstr(text.data, "address 192.0.2.10\n"));
        CHECK(strstr(text.data, "address 198.51.100.1\n"));
        CHECK_STREQ(line(&f.pl, "tcp 10.96.0.14:80"), "");
        CHECK_STREQ(line(&f.pl, "tcp 192.0.2.10:80"), "");
        /* svc-a: cluster IP, both nodes' endpoints (cluster_endpoints:
         * 10.244.1.10 on node-1, .11 on node-2). */
        CHECK_STREQ(line(&f.pl, "tcp 10.96.0.10:80"), "tcp 10.96.0.10:80 ns/svc-a:http internal -> "
                                                      "10.244.1.10:8080 10.244.1.11:8080");
        /* svc-b: a node port on every address, Cluster policy. */
        CHECK_STREQ(line(&f.pl, "tcp 0.0.0.0:30001"), "tcp 0.0.0.0:30001 ns/svc-b:http external -> "
                                                      "10.244.2.10:8080 10.244.2.11:8080 10.244.2.12:8080");
        /* svc-c: ETP Local: node-1's endpoints only on the external side. */
        CHECK_STREQ(line(&f.pl, "tcp 198.51.100.1:80"), "tcp 198.51.100.1:80 ns/svc-c:http external -> "
                                                        "10.244.3.10:8080 10.244.3.12:8080");
        CHECK_STREQ(line(&f.pl, "tcp 0.0.0.0:30002"), "tcp 0.0.0.0:30002 ns/svc-c:http external -> "
                                                      "10.244.3.10:8080 10.244.3.12:8080");
        CHECK_STREQ(line(&f.pl, "tcp 10.96.0.12:80"), "tcp 10.96.0.12:80 ns/svc-c:http internal -> "
                                                      "10.244.3.10:8080 10.244.3.11:8080 10.244.3.12:8080 "
                                                      "10.244.3.13:8080");
        /* svc-d: affinity. */
        CHECK(strstr(line(&f.pl, "tcp 10.96.0.13:53"), " internal affinity=600 -> "));
        CHECK(f.pl.n_sctp == 0);
        buf_done(&text);
        fixture_done(&f);
}

static void test_nodeport_addresses(void) {
        struct fixture f;

        fixture_init(&f, "192.168.0.0/24");
        CHECK(userspace_plan_build(f.m, &f.p, NULL, &f.pl) == 0);
        CHECK_STREQ(line(&f.pl, "tcp 0.0.0.0:30001"), "");
        CHECK(strstr(line(&f.pl, "tcp 192.168.0.2:30001"), "ns/svc-b:http external"));
        fixture_done(&f);
}

static void test_local_policy_without_local_endpoints(void) {
        struct fixture f;

        fixture_init(&f, NULL);
        /* svc-h: a NodePort with ETP Local, one endpoint on each node. */
        cluster_service(f.m, &(struct cluster_svc) {.name = "svc-h", .ip = "10.96.0.20", .type = "NodePort",
                                                    .port = 80, .node_port = 30020, .local = true});
        cluster_endpoints(f.m, "svc-h", 20, 2);         /* .10 node-1, .11 node-2 */
        CHECK(userspace_plan_build(f.m, &f.p, NULL, &f.pl) == 0);
        CHECK_STREQ(line(&f.pl, "tcp 0.0.0.0:30020"), "tcp 0.0.0.0:30020 ns/svc-h:http external -> 10.244.20.10:8080");
        userspace_plan_done(&f.pl);
        /* On a node with no endpoint of it, the node port has no frontend
         * (connections are refused) while the cluster IP keeps both. */
        render_params_done(&f.p);
        CHECK(render_params_init(&f.p, 4, &f.cfg, "node-3", NULL, &f.host, NULL) == 0);
        CHECK(userspace_plan_build(f.m, &f.p, NULL, &f.pl) == 0);
        CHECK_STREQ(line(&f.pl, "tcp 0.0.0.0:30020"), "");
        CHECK_STREQ(line(&f.pl, "tcp 10.96.0.20:80"), "tcp 10.96.0.20:80 ns/svc-h:http internal -> "
                                                      "10.244.20.10:8080 10.244.20.11:8080");
        fixture_done(&f);
}

static void test_claims_and_partial_plans(void) {
        struct fixture f;
        struct hmap only = HMAP_INIT_STRINGS;

        fixture_init(&f, NULL);
        /* svc-z and svc-y both claim external IP 192.0.2.50 port 80. */
        cluster_service(f.m, &(struct cluster_svc) {.name = "svc-z", .ip = "10.96.0.30", .port = 80,
                                                    .ext = "192.0.2.50"});
        cluster_endpoints(f.m, "svc-z", 30, 1);
        cluster_service(f.m, &(struct cluster_svc) {.name = "svc-y", .ip = "10.96.0.31", .port = 80,
                                                    .ext = "192.0.2.50"});
        cluster_endpoints(f.m, "svc-y", 31, 1);
        CHECK(userspace_plan_build(f.m, &f.p, NULL, &f.pl) == 0);
        CHECK(strstr(line(&f.pl, "tcp 192.0.2.50:80"), " ns/svc-y:http external -> 10.244.31.10:8080"));
        /* One address, wanted by both. */
        size_t n = 0;
        for (size_t i = 0; i < f.pl.n_addrs; i++)
                n += strcmp(inet_addr_format(&f.pl.addrs[i].a, (char[INET_ADDR_STRLEN]) {0}), "192.0.2.50") == 0;
        CHECK(n == 2);
        userspace_plan_done(&f.pl);
        /* Only svc-z: its own frontends and addresses, nothing else. */
        hmap_put(&only, "ns/svc-z", "ns/svc-z");
        hmap_put(&only, "ns/gone", "ns/gone");
        CHECK(userspace_plan_build(f.m, &f.p, &only, &f.pl) == 0);
        CHECK(f.pl.n_fe == 2 && f.pl.n_addrs == 2);
        CHECK(strstr(line(&f.pl, "tcp 192.0.2.50:80"), " ns/svc-z:http "));
        CHECK_STREQ(line(&f.pl, "tcp 10.96.0.10:80"), "");
        hmap_done(&only);
        fixture_done(&f);
}

static void test_local_clients(void) {
        struct fixture f;

        fixture_init(&f, NULL);
        cluster_service(f.m, &(struct cluster_svc) {.name = "svc-f", .ip = "10.96.0.15", .type = "LoadBalancer",
                                                    .port = 80, .node_port = 30005, .lb = "198.51.100.2",
                                                    .ranges = {"203.0.113.0/25"}});
        cluster_endpoints(f.m, "svc-f", 5, 2);
        /* Seen from outside, svc-c's (ETP Local) external side has node-1's
         * endpoints only; from this node, all four, as its cluster IP. */
        CHECK(userspace_plan_build_local(f.m, &f.p, NULL, &f.pl) == 0);
        CHECK_STREQ(line(&f.pl, "tcp 198.51.100.1:80"), "tcp 198.51.100.1:80 ns/svc-c:http external -> "
                                                        "10.244.3.10:8080 10.244.3.11:8080 10.244.3.12:8080 "
                                                        "10.244.3.13:8080");
        CHECK_STREQ(line(&f.pl, "tcp 0.0.0.0:30002"), "tcp 0.0.0.0:30002 ns/svc-c:http external -> "
                                                      "10.244.3.10:8080 10.244.3.11:8080 10.244.3.12:8080 "
                                                      "10.244.3.13:8080");
        CHECK_STREQ(line(&f.pl, "tcp 0.0.0.0:30001"), "tcp 0.0.0.0:30001 ns/svc-b:http external -> "
                                                      "10.244.2.10:8080 10.244.2.11:8080 10.244.2.12:8080");
        /* svc-f's load-balancer IP filters sources: the rules keep it; its
         * cluster IP and node port are translated. */
        CHECK_STREQ(line(&f.pl, "tcp 198.51.100.2:80"), "");
        CHECK(strstr(line(&f.pl, "tcp 10.96.0.15:80"), "ns/svc-f:http internal"));
        CHECK(strstr(line(&f.pl, "tcp 0.0.0.0:30005"), "ns/svc-f:http external"));
        userspace_plan_done(&f.pl);
        /* A node with no endpoint of svc-c still sends its own clients to
         * the cluster's. */
        render_params_done(&f.p);
        CHECK(render_params_init(&f.p, 4, &f.cfg, "node-3", NULL, &f.host, NULL) == 0);
        CHECK(userspace_plan_build_local(f.m, &f.p, NULL, &f.pl) == 0);
        CHECK(strstr(line(&f.pl, "tcp 198.51.100.1:80"), "external -> 10.244.3.10:8080 10.244.3.11:8080 "));
        userspace_plan_done(&f.pl);
        /* userspace mode's own plan (outside clients) has none there. */
        CHECK(userspace_plan_build(f.m, &f.p, NULL, &f.pl) == 0);
        CHECK_STREQ(line(&f.pl, "tcp 198.51.100.1:80"), "");
        CHECK_STREQ(line(&f.pl, "tcp 198.51.100.2:80"), "tcp 198.51.100.2:80 ns/svc-f:http external "
                                                        "sources=203.0.113.0/25 -> 10.244.5.10:8080 10.244.5.11:8080");
        fixture_done(&f);
}

/* loadBalancerSourceRanges on the load-balancer IPs' frontends only, as
 * the rules' firewall chains: the family's ranges, and the load-balancer
 * IPs themselves when the node's IP is in a range; an address that is
 * also an external IP of the service is the external IP's, unfiltered. */
static void test_source_ranges(void) {
        struct fixture f;

        fixture_init(&f, NULL);
        cluster_service(f.m, &(struct cluster_svc) {.name = "svc-g", .ip = "10.96.0.16", .type = "LoadBalancer",
                                                    .port = 80, .node_port = 30006, .lb = "198.51.100.3",
                                                    .ranges = {"127.0.0.0/8", "fd00::/8"}});
        cluster_endpoints(f.m, "svc-g", 6, 1);
        cluster_service(f.m, &(struct cluster_svc) {.name = "svc-h", .ip = "10.96.0.17", .type = "LoadBalancer",
                                                    .port = 80, .lb = "198.51.100.4", .ext = "198.51.100.4",
                                                    .ranges = {"203.0.113.0/24"}});
        cluster_endpoints(f.m, "svc-h", 7, 1);
        CHECK(userspace_plan_build(f.m, &f.p, NULL, &f.pl) == 0);
        /* The node's IP (127.0.0.1 without a Node object) is in a range:
         * its own traffic to the load-balancer IP comes from that IP, and
         * is let in; the other family's range is not the frontend's. */
        CHECK_STREQ(line(&f.pl, "tcp 198.51.100.3:80"), "tcp 198.51.100.3:80 ns/svc-g:http external "
                                                        "sources=127.0.0.0/8,198.51.100.3/32 -> 10.244.6.10:8080");
        CHECK_STREQ(line(&f.pl, "tcp 10.96.0.16:80"), "tcp 10.96.0.16:80 ns/svc-g:http internal -> 10.244.6.10:8080");
        CHECK_STREQ(line(&f.pl, "tcp 0.0.0.0:30006"), "tcp 0.0.0.0:30006 ns/svc-g:http external -> 10.244.6.10:8080");
        CHECK_STREQ(line(&f.pl, "tcp 198.51.100.4:80"), "tcp 198.51.100.4:80 ns/svc-h:http external -> "
                                                        "10.244.7.10:8080");
        fixture_done(&f);
}

static void test_local_clients_loopback_nodeports(void) {
        struct fixture f;
        struct inet_cidr addrs[2];

        fixture_init(&f, "0.0.0.0/0");
        render_params_done(&f.p);
        free(f.cfg.nodeport_addresses[0]);
        f.cfg.nodeport_addresses[0] = strdup("127.0.0.0/8");
        CHECK(config_value_strv_push(&f.cfg.nodeport_addresses, &f.cfg.n_nodeport_addresses, "192.168.0.0/24",
                                     strlen("192.168.0.0/24")) == 0);
        inet_cidr_parse("127.0.0.1/32", &addrs[0]);
        addrs[1] = f.hostaddr;
        f.host.addrs = addrs;
        f.host.n_addrs = 2;
        CHECK(render_params_init(&f.p, 4, &f.cfg, "node-1", NULL, &f.host, NULL) == 0);
        CHECK(userspace_plan_build(f.m, &f.p, NULL, &f.pl) == 0);
        CHECK(strstr(line(&f.pl, "tcp 127.0.0.1:30001"), "ns/svc-b:http external"));
        userspace_plan_done(&f.pl);
        CHECK(userspace_plan_build_local(f.m, &f.p, NULL, &f.pl) == 0);
        CHECK_STREQ(line(&f.pl, "tcp 127.0.0.1:30001"), "");
        CHECK(strstr(line(&f.pl, "tcp 192.168.0.2:30001"), "ns/svc-b:http external"));
        f.host.addrs = &f.hostaddr;
        f.host.n_addrs = 1;
        fixture_done(&f);
}

int main(void) {
        TEST_RUN(test_whole_plan);
        TEST_RUN(test_nodeport_addresses);
        TEST_RUN(test_local_policy_without_local_endpoints);
        TEST_RUN(test_claims_and_partial_plans);
        TEST_RUN(test_local_clients);
        TEST_RUN(test_local_clients_loopback_nodeports);
        TEST_RUN(test_source_ranges);
        TEST_DONE();
}
