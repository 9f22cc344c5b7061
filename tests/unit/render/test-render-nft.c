/* SPDX-License-Identifier: Apache-2.0 */
/* nftables mode's description (render/nft.c) of small states, as a sink
 * receives it, without a kernel: the fixed part with and without
 * ServiceCIDRs and NodePort addresses, a service's chains and elements
 * under each policy, and where shards put them. The reference is
 * docs/reference/nftables-mode.md (§ numbers below). */
#include <jansson.h>

#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "kube/decode.h"
#include "model/model.h"
#include "render/nftir.h"
#include "render/render.h"
#include "util/buf.h"
#include "test.h"

/* A sink that logs what it is given, one line per object:
 *   table T
 *   set T NAME
 *   chain T NAME rules=N [hook]      then each rule as nft prints it
 *   elem T <the nft "add element" line>
 * T is the table's index (0: "kube-proxy", N: shard "kube-proxy-N"). */
struct rec {
        uint8_t family;
        struct buf log;
};

static void rec_table(void *ud, unsigned idx) {
        struct rec *x = ud;
        buf_printf(&x->log, "table %u\n", idx);
}

static void rec_set(void *ud, const struct nftir_set *s) {
        struct rec *x = ud;
        char name[300];
        buf_printf(&x->log, "set %u %s\n", s->table, nftir_name_join(&s->name, name, sizeof name));
}

static void rec_chain(void *ud, const struct nftir_chain *c) {
        struct rec *x = ud;
        char name[300];
        buf_printf(&x->log, "chain %u %s rules=%zu%s\n", c->table, nftir_name_join(&c->name, name, sizeof name),
                   c->n_rules, c->hook ? " hook" : "");
        for (size_t i = 0; i < c->n_rules; i++)
                nftir_format_rule(x->family, c, &c->rules[i], &x->log);
}

static void rec_elem(void *ud, const struct nftir_elem *e) {
        struct rec *x = ud;
        buf_printf(&x->log, "elem %u ", e->table);
        nftir_format_elem(x->family, e, &x->log);
}

static struct nftir_sink rec_sink(struct rec *x) {
        return (struct nftir_sink) {rec_table, rec_set, rec_chain, rec_elem, x, false};
}

static int count(const struct rec *x, const char *needle) {
        int n = 0;
        for (const char *p = x->log.data; p && (p = strstr(p, needle)); p++)
                n++;
        return n;
}

/* Where needle first occurs in the log, or -1. */
static long at(const struct rec *x, const char *needle) {
        const char *p = x->log.data ? strstr(x->log.data, needle) : NULL;
        return p ? p - x->log.data : -1;
}

/* Both occur, a first. */
static bool before(const struct rec *x, const char *a, const char *b) {
        long i = at(x, a), j = at(x, b);
        return i >= 0 && j >= 0 && i < j;
}

/* Adds one Service or EndpointSlice given as JSON. */
static void add(struct model *m, const char *json) {
        char err[KUBE_ERRLEN];
        json_t *j = json_loads(json, 0, NULL);
        const char *kind = json_string_value(json_object_get(j, "kind"));
        CHECK(j && kind);
        if (kind && strcmp(kind, "Service") == 0) {
                struct svc *s;
                CHECK(kube_decode_service(j, &s, err) == 0);
                model_service_upsert(m, s);
        } else {
                struct slice *s;
                CHECK(kube_decode_slice(j, &s, err) == 0);
                model_slice_upsert(m, s);
        }
        json_decref(j);
}

/* The slice "ns/NAME-1" of service NAME: port "p" 8080, endpoints "IP@NODE" ... */
static void add_slice(struct model *m, const char *svc, const char *const *eps) {
        char text[2048];
        struct buf e = BUF_INIT;
        for (size_t i = 0; eps[i]; i++) {
                char ip[64];
                const char *node = strchr(eps[i], '@');
                snprintf(ip, sizeof ip, "%.*s", (int) (node - eps[i]), eps[i]);
                buf_printf(&e, "%s{\"addresses\":[\"%s\"],\"nodeName\":\"%s\"}", i ? "," : "", ip, node + 1);
        }
        snprintf(text, sizeof text,
                 "{\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":\"%s-1\",\"namespace\":\"ns\",\"labels\":"
                 "{\"kubernetes.io/service-name\":\"%s\"}},\"addressType\":\"IPv4\","
                 "\"ports\":[{\"name\":\"p\",\"port\":8080}],\"endpoints\":[%s]}",
                 svc, svc, e.data ? e.data : "");
        add(m, text);
        buf_done(&e);
}

struct env {
        struct kproxy_config cfg;
        struct host_facts host;
        struct render_params p;
        struct model *m;
        struct rec x;
        struct nftir_sink sink;
};

/* This node "n1", cluster CIDR 10.0.0.0/8; nodeport_cidr NULL: NodePorts
 * on every local address. */
static void env_init(struct env *v, const char *nodeport_cidr, unsigned shards) {
        *v = (struct env) {.m = model_new(), .x = {.family = 4}};
        config_init(&v->cfg);
        v->cfg.cluster_cidr = strdup("10.0.0.0/8");
        if (nodeport_cidr) {
                v->cfg.nodeport_addresses = calloc(1, sizeof(char *));
                v->cfg.nodeport_addresses[0] = strdup(nodeport_cidr);
                v->cfg.n_nodeport_addresses = 1;
        }
        CHECK(host_parse_addresses("127.0.0.1/8,192.168.0.2/24,192.168.1.2/24", &v->host.addrs, &v->host.n_addrs) == 0);
        CHECK(render_params_init(&v->p, 4, &v->cfg, "n1", NULL, &v->host, NULL) == 0);
        v->p.nft_shards = shards;
        v->sink = rec_sink(&v->x);
}

static void env_done(struct env *v) {
        buf_done(&v->x.log);
        render_params_done(&v->p);
        free(v->host.addrs);
        model_free(v->m);
        config_done(&v->cfg);
}

static void render_svc(struct env *v, const char *key) {
        const struct svc *s = model_service_get(v->m, key);
        CHECK(s != NULL);
        if (s)
                CHECK(render_nft_service(v->m, s, &v->p, &v->sink) == 0);
}

/* §1-§4: one table; its sets and maps, then helper chains, then base
 * chains in upstream's order (each after the chains it jumps to). */
static void test_fixed(void) {
        struct env v;
        struct inet_cidr cidrs[2];

        env_init(&v, NULL, 0);
        CHECK(render_nft_fixed(&v.p, NULL, 0, &v.sink) == 0);
        CHECK(count(&v.x, "table ") == 1 && count(&v.x, "table 0\n") == 1);
        CHECK(count(&v.x, "set 0 ") == 6);
        /* NodePorts on every local address: no nodeport-ips set; loopback is
         * excluded in the rules instead. */
        CHECK(count(&v.x, "nodeport-ips") == 0);
        CHECK(count(&v.x, "fib daddr type local ip daddr != 127.0.0.0/8") == 1);
        CHECK(count(&v.x, " hook\n") == 8);
        CHECK(before(&v.x, "chain 0 cluster-ips-check", "chain 0 filter-forward"));
        CHECK(before(&v.x, "chain 0 services ", "chain 0 nat-prerouting"));
        CHECK(before(&v.x, "chain 0 filter-prerouting-pre-dnat", "chain 0 filter-output-pre-dnat"));
        CHECK(before(&v.x, "chain 0 nat-output", "chain 0 nat-postrouting"));
        /* Without ServiceCIDRs, only the wrong-port check. */
        CHECK(count(&v.x, "chain 0 cluster-ips-check rules=1\n") == 1);
        CHECK(count(&v.x, "Drop traffic to unallocated ClusterIPs") == 0);
        buf_clear(&v.x.log);

        /* With them: a drop rule for the family's CIDRs only. */
        CHECK(inet_cidr_parse("fd00:10:96::/112", &cidrs[0]) == 0 && inet_cidr_parse("10.96.0.0/12", &cidrs[1]) == 0);
        CHECK(render_nft_fixed(&v.p, cidrs, 2, &v.sink) == 0);
        CHECK(count(&v.x, "chain 0 cluster-ips-check rules=2\n") == 1);
        CHECK(count(&v.x, "ip daddr { 10.96.0.0/12 } drop comment \"Drop traffic to unallocated ClusterIPs\"") == 1);
        CHECK(count(&v.x, "fd00") == 0);
        env_done(&v);

        /* NodePort addresses in a CIDR: a nodeport-ips set holding the
         * host's addresses inside it, matched instead of "local". */
        env_init(&v, "192.168.0.0/16", 0);
        CHECK(render_nft_fixed(&v.p, NULL, 0, &v.sink) == 0);
        CHECK(count(&v.x, "set 0 nodeport-ips\n") == 1);
        CHECK(count(&v.x, "elem 0 add element ip kube-proxy nodeport-ips { 192.168.0.2 }") == 1);
        CHECK(count(&v.x, "elem 0 add element ip kube-proxy nodeport-ips { 192.168.1.2 }") == 1);
        CHECK(count(&v.x, "elem 0 ") == 2);
        CHECK(count(&v.x, "ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports") == 1);
        CHECK(count(&v.x, "fib daddr type local") == 0);
        env_done(&v);
}

/* With shards, the shards' nat side first (their own dispatch maps and
 * nat base chains), then the main table without them. */
static void test_fixed_shards(void) {
        struct env v;

        env_init(&v, NULL, 2);
        CHECK(render_nft_fixed(&v.p, NULL, 0, &v.sink) == 0);
        CHECK(before(&v.x, "table 1\n", "table 2\n") && before(&v.x, "table 2\n", "table 0\n"));
        for (unsigned t = 1; t <= 2; t++) {
                char want[64];
                snprintf(want, sizeof want, "set %u service-ips\n", t);
                CHECK(count(&v.x, want) == 1);
                snprintf(want, sizeof want, "chain %u nat-prerouting rules=1 hook\n", t);
                CHECK(count(&v.x, want) == 1);
                snprintf(want, sizeof want, "chain %u mark-for-masquerade ", t);
                CHECK(count(&v.x, want) == 1);
                snprintf(want, sizeof want, "chain %u masquerading ", t);
                CHECK(count(&v.x, want) == 0);
        }
        CHECK(count(&v.x, "set 0 service-ips") == 0 && count(&v.x, "chain 0 nat-prerouting") == 0);
        CHECK(count(&v.x, "chain 0 masquerading rules=3\n") == 1);
        CHECK(count(&v.x, "chain 0 nat-postrouting rules=1 hook\n") == 1);
        CHECK(count(&v.x, "set 0 no-endpoint-services\n") == 1);
        env_done(&v);
}

/* §6.1, §6.2: a ClusterIP service with two endpoints. */
static void test_service_cluster(void) {
        struct env v;

        env_init(&v, NULL, 0);
        add(v.m, "{\"kind\":\"Service\",\"metadata\":{\"name\":\"web\",\"namespace\":\"ns\"},\"spec\":{\"clusterIP\":"
                 "\"172.30.0.10\",\"ports\":[{\"name\":\"p\",\"port\":80}]}}");
        add_slice(v.m, "web", (const char *[]) {"10.1.0.2@n2", "10.1.0.1@n1", NULL});
        render_svc(&v, "ns/web");
        CHECK(count(&v.x, "elem 0 add element ip kube-proxy cluster-ips { 172.30.0.10 }") == 1);
        CHECK(count(&v.x, "service-ips { 172.30.0.10 . tcp . 80 : goto service-") == 1);
        CHECK(count(&v.x, "-ns/web/tcp/p }\n") == 1);
        /* Endpoint chains first, sorted by address, then the service chain. */
        CHECK(count(&v.x, "chain 0 endpoint-") == 2);
        CHECK(before(&v.x, "ns/web/tcp/p__10.1.0.1/8080 rules=2", "ns/web/tcp/p__10.1.0.2/8080 rules=2"));
        CHECK(before(&v.x, "chain 0 endpoint-", "chain 0 service-"));
        CHECK(count(&v.x, "ip saddr 10.1.0.1 jump mark-for-masquerade") == 1);
        CHECK(count(&v.x, "meta l4proto tcp dnat to 10.1.0.2:8080") == 1);
        /* Masquerade what is not from the cluster CIDR, then pick one. */
        CHECK(count(&v.x, "-ns/web/tcp/p rules=3\n") == 1);
        CHECK(count(&v.x, "ip daddr 172.30.0.10 ip saddr != 10.0.0.0/8 jump mark-for-masquerade") == 1);
        CHECK(count(&v.x, "numgen random mod 2 == 0 goto endpoint-") == 1);
        /* No external destination: no external chain, no local chain. */
        CHECK(count(&v.x, "external-") == 0 && count(&v.x, "local-") == 0 && count(&v.x, "no-endpoint") == 0);
        env_done(&v);
}

/* §6: no endpoints (reject), and a Local policy without a local endpoint
 * (drop; the external chain remains for local traffic). */
static void test_service_no_endpoints(void) {
        struct env v;

        env_init(&v, NULL, 0);
        add(v.m, "{\"kind\":\"Service\",\"metadata\":{\"name\":\"none\",\"namespace\":\"ns\"},\"spec\":{\"clusterIP\":"
                 "\"172.30.0.11\",\"ports\":[{\"name\":\"p\",\"port\":80}]}}");
        render_svc(&v, "ns/none");
        CHECK(count(&v.x, "no-endpoint-services { 172.30.0.11 . tcp . 80 comment \"ns/none:p\" : goto reject-chain }") ==
              1);
        CHECK(count(&v.x, "chain 0 ") == 0 && count(&v.x, "service-ips") == 0);
        buf_clear(&v.x.log);

        add(v.m, "{\"kind\":\"Service\",\"metadata\":{\"name\":\"np\",\"namespace\":\"ns\"},\"spec\":{\"type\":"
                 "\"NodePort\",\"externalTrafficPolicy\":\"Local\",\"clusterIP\":\"172.30.0.12\",\"ports\":"
                 "[{\"name\":\"p\",\"port\":80,\"nodePort\":30080}]}}");
        add_slice(v.m, "np", (const char *[]) {"10.1.0.5@n2", NULL});
        render_svc(&v, "ns/np");
        /* Internal traffic goes on (Cluster policy); external is dropped. */
        CHECK(count(&v.x, "service-ips { 172.30.0.12 . tcp . 80 : goto service-") == 1);
        CHECK(count(&v.x, "no-endpoint-nodeports { tcp . 30080 comment \"ns/np:p\" : drop }") == 1);
        CHECK(count(&v.x, "service-nodeports { tcp . 30080 : goto external-") == 1);
        CHECK(count(&v.x, "-ns/np/tcp/p rules=3\n") == 1);       /* the external chain, without "goto local-" */
        CHECK(count(&v.x, "short-circuit pod traffic") == 1 && count(&v.x, "goto local-") == 0);
        CHECK(count(&v.x, "chain 0 local-") == 0);
        env_done(&v);
}

/* §6: source ranges filter a load balancer's traffic even without
 * endpoints (iptables mode's KUBE-FW- chain would not exist). */
static void test_service_source_ranges(void) {
        struct env v;

        env_init(&v, NULL, 0);
        add(v.m, "{\"kind\":\"Service\",\"metadata\":{\"name\":\"lb\",\"namespace\":\"ns\"},\"spec\":{\"type\":"
                 "\"LoadBalancer\",\"clusterIP\":\"172.30.0.13\",\"loadBalancerSourceRanges\":[\"203.0.113.0/24\"],"
                 "\"ports\":[{\"name\":\"p\",\"port\":443,\"nodePort\":30443}]},\"status\":{\"loadBalancer\":"
                 "{\"ingress\":[{\"ip\":\"198.51.100.7\"}]}}}");
        render_svc(&v, "ns/lb");
        CHECK(count(&v.x, "firewall-ips { 198.51.100.7 . tcp . 443 : goto firewall-") == 1);
        CHECK(count(&v.x, "chain 0 firewall-") == 1);
        CHECK(count(&v.x, "ip saddr != { 203.0.113.0/24 } drop") == 1);
        CHECK(count(&v.x, "no-endpoint-services { 198.51.100.7 . tcp . 443 comment \"ns/lb:p\" : goto reject-chain }") ==
              1);
        CHECK(count(&v.x, "service-ips") == 0 && count(&v.x, "chain 0 external-") == 0);
        env_done(&v);
}

/* With shards, a service's nat side lives in its shard, its filter side
 * (elements of the filter maps, the firewall chain) in the main table; a
 * render for the main table leaves the nat chains out. */
static void test_service_shards(void) {
        struct env v;
        char want[96];

        env_init(&v, NULL, 3);
        add(v.m, "{\"kind\":\"Service\",\"metadata\":{\"name\":\"lb\",\"namespace\":\"ns\"},\"spec\":{\"type\":"
                 "\"LoadBalancer\",\"clusterIP\":\"172.30.0.14\",\"loadBalancerSourceRanges\":[\"203.0.113.0/24\"],"
                 "\"ports\":[{\"name\":\"p\",\"port\":443,\"nodePort\":30443}]},\"status\":{\"loadBalancer\":"
                 "{\"ingress\":[{\"ip\":\"198.51.100.8\"}]}}}");
        add_slice(v.m, "lb", (const char *[]) {"10.1.0.9@n1", NULL});
        unsigned shard = render_nft_shard("ns/lb", 3);
        CHECK(shard >= 1 && shard <= 3 && render_nft_shard("ns/lb", 3) == shard);
        CHECK(render_nft_shard("ns/lb", 0) == 0);

        render_svc(&v, "ns/lb");
        snprintf(want, sizeof want, "elem %u add element ip kube-proxy-%u service-ips { 172.30.0.14 ", shard, shard);
        CHECK(count(&v.x, want) == 1);
        snprintf(want, sizeof want, "elem %u add element ip kube-proxy-%u service-nodeports ", shard, shard);
        CHECK(count(&v.x, want) == 1);
        snprintf(want, sizeof want, "chain %u endpoint-", shard);
        CHECK(count(&v.x, want) == 1);
        snprintf(want, sizeof want, "chain %u external-", shard);
        CHECK(count(&v.x, want) == 1);
        CHECK(count(&v.x, "elem 0 add element ip kube-proxy cluster-ips { 172.30.0.14 }") == 1);
        CHECK(count(&v.x, "elem 0 add element ip kube-proxy firewall-ips ") == 1);
        CHECK(count(&v.x, "chain 0 firewall-") == 1);
        CHECK(count(&v.x, "chain 0 endpoint-") == 0 && count(&v.x, "chain 0 service-") == 0);
        buf_clear(&v.x.log);

        /* The main table's view: the same elements, no nat chains. */
        const struct svc *s = model_service_get(v.m, "ns/lb");
        CHECK(render_nft_service_table(v.m, s, &v.p, &v.sink, 0) == 0);
        CHECK(count(&v.x, "chain 0 firewall-") == 1);
        CHECK(count(&v.x, "endpoint-") == 0 && count(&v.x, "chain 0 external-") == 0);
        CHECK(count(&v.x, "firewall-ips") == 1 && count(&v.x, "cluster-ips") == 1);
        buf_clear(&v.x.log);

        /* A service without a cluster IP of the family gives nothing. */
        v.p.family = 6;
        CHECK(render_nft_service(v.m, s, &v.p, &v.sink) == 0);
        CHECK(v.x.log.len == 0);
        env_done(&v);
}

int main(void) {
        TEST_RUN(test_fixed);
        TEST_RUN(test_fixed_shards);
        TEST_RUN(test_service_cluster);
        TEST_RUN(test_service_no_endpoints);
        TEST_RUN(test_service_source_ranges);
        TEST_RUN(test_service_shards);
        TEST_DONE();
}
