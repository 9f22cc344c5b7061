/* SPDX-License-Identifier: Apache-2.0 */
/* The model's containers and upstream's endpoint categorisation. */
#include <errno.h>

#include "model/endpoints.h"
#include "model/model.h"
#include "model/servicecidrs.h"
#include "util/inet.h"
#include "util/cleanup.h"
#include "util/hmap.h"
#include "util/intern.h"
#include "test.h"

static void test_hmap(void) {
        struct hmap m = HMAP_INIT;
        static char keys[2000][24];
        for (int i = 0; i < 2000; i++) {
                snprintf(keys[i], sizeof keys[i], "ns/svc%d", i);
                CHECK(hmap_put(&m, keys[i], keys[i]) == NULL);
        }
        CHECK(m.len == 2000);
        for (int i = 0; i < 2000; i += 2)
                CHECK(hmap_remove(&m, keys[i]) == keys[i]);
        CHECK(m.len == 1000);
        CHECK(hmap_get(&m, "ns/svc2") == NULL);
        CHECK(hmap_get(&m, "ns/svc3") == keys[3]);
        /* Re-adding after removals reuses tombstones without losing entries. */
        for (int i = 0; i < 2000; i += 2)
                hmap_put(&m, keys[i], keys[i]);
        size_t n = 0;
        for (size_t it = 0; hmap_next(&m, &it, NULL, NULL);)
                n++;
        CHECK(n == 2000 && m.len == 2000);
        hmap_done(&m);
}

static struct slice *mk_slice(const char *key, const char *svc_key, int n, const char *const *ips,
                              const char *const *nodes, const bool *ready, const bool *terminating) {
        struct slice *s = calloc(1, sizeof *s);
        s->key = strdup(key);
        s->service_key = strdup(svc_key);
        s->family = 4;
        s->n_ports = 1;
        s->ports = calloc(1, sizeof *s->ports);
        s->ports[0] = (struct slice_port) {strdup("p"), L4_TCP, 8080};
        s->n_endpoints = (size_t) n;
        s->endpoints = calloc((size_t) n, sizeof *s->endpoints);
        s->addrs = calloc((size_t) n, 4);
        for (int i = 0; i < n; i++) {
                struct slice_endpoint *e = &s->endpoints[i];
                struct inet_addr a;
                inet_addr_parse(ips[i], &a);
                slice_endpoint_set_addr(s, (size_t) i, &a);
                e->ready = ready ? ready[i] : true;
                e->terminating = terminating ? terminating[i] : false;
                e->serving = true;
                e->node = nodes && nodes[i] ? intern(nodes[i]) : 0;
        }
        return s;
}

static struct svc *mk_svc(enum traffic_policy etp, enum traffic_policy itp, uint16_t node_port) {
        struct svc *s = calloc(1, sizeof *s);
        s->key = strdup("ns/web");
        s->name = s->key + 3;
        s->type = node_port ? SVC_TYPE_NODE_PORT : SVC_TYPE_CLUSTER_IP;
        s->n_cluster_ips = 1;
        inet_addr_parse("10.96.0.1", &s->cluster_ips[0]);
        s->n_ports = 1;
        s->ports = calloc(1, sizeof *s->ports);
        s->ports[0] = (struct svc_port) {strdup("p"), L4_TCP, 80, node_port};
        s->external_policy = etp;
        s->internal_policy = itp;
        return s;
}

static void test_model_slices_follow_their_service(void) {
        struct model *m = model_new();
        const char *ips[] = {"10.0.0.1"};
        model_slice_upsert(m, mk_slice("ns/a", "ns/web", 1, ips, NULL, NULL, NULL));
        model_slice_upsert(m, mk_slice("ns/b", "ns/web", 1, ips, NULL, NULL, NULL));
        size_t n;
        const struct slice **v = model_service_slices(m, "ns/web", &n);
        CHECK(n == 2 && strcmp(v[0]->key, "ns/a") == 0);
        free(v);
        /* A slice relabelled to another service moves with it. */
        model_slice_upsert(m, mk_slice("ns/b", "ns/api", 1, ips, NULL, NULL, NULL));
        v = model_service_slices(m, "ns/web", &n);
        CHECK(n == 1);
        free(v);
        v = model_service_slices(m, "ns/api", &n);
        CHECK(n == 1);
        free(v);
        CHECK(model_slice_delete(m, "ns/b") == 0);
        CHECK(model_slice_delete(m, "ns/b") == -ENOENT);
        CHECK(model_service_slices(m, "ns/api", &n) == NULL && n == 0);
        CHECK(model_n_slices(m) == 1);
        /* Three slices of one service, then one. */
        model_slice_upsert(m, mk_slice("ns/c", "ns/web", 1, ips, NULL, NULL, NULL));
        model_slice_upsert(m, mk_slice("ns/d", "ns/web", 1, ips, NULL, NULL, NULL));
        v = model_service_slices(m, "ns/web", &n);
        CHECK(n == 3 && strcmp(v[0]->key, "ns/a") == 0 && strcmp(v[1]->key, "ns/c") == 0 &&
              strcmp(v[2]->key, "ns/d") == 0);
        free(v);
        CHECK(model_slice_delete(m, "ns/a") == 0 && model_slice_delete(m, "ns/d") == 0);
        v = model_service_slices(m, "ns/web", &n);
        CHECK(n == 1 && strcmp(v[0]->key, "ns/c") == 0);
        free(v);
        model_free(m);
}

static void test_merge_sort_dedup(void) {
        const char *ips1[] = {"10.0.0.10", "10.0.0.1"};
        const char *ips2[] = {"10.0.0.1", "10.0.0.2"};
        bool term1[] = {false, true}, ready1[] = {true, false};
        struct slice *a = mk_slice("ns/a", "ns/web", 2, ips1, NULL, ready1, term1);
        struct slice *b = mk_slice("ns/b", "ns/web", 2, ips2, NULL, NULL, NULL);
        const struct slice *sl[] = {a, b};
        struct svc *s = mk_svc(TRAFFIC_POLICY_CLUSTER, TRAFFIC_POLICY_CLUSTER, 0);
        struct endpoint_filter f = {.node_name = "n1"};
        struct svc_port_endpoints e;

        CHECK(endpoints_collect(s, &s->ports[0], 4, sl, 2, &f, &e) == 0);
        /* Byte-wise order, as upstream: "10.0.0.10:8080" < "10.0.0.1:8080". */
        CHECK(e.n_all == 3);
        CHECK_STREQ(e.all[0].str, "10.0.0.10:8080");
        CHECK_STREQ(e.all[1].str, "10.0.0.1:8080");
        /* The terminating copy of 10.0.0.1 lost to the later ready one. */
        CHECK(e.all[1].ready && !e.all[1].terminating);
        CHECK(e.n_cluster == 3 && e.has_any);
        endpoints_done(&e);
        /* The other family sees nothing. */
        CHECK(endpoints_collect(s, &s->ports[0], 6, sl, 2, &f, &e) == 0);
        CHECK(e.n_all == 0 && !e.has_any);
        endpoints_done(&e);
        svc_free(s);
        slice_free(a);
        slice_free(b);
}

/* merge()'s sort at a few sizes: shuffled addresses, sorted byte-wise,
 * each once. Every third comes
 * twice, terminating first: the ready copy is kept. Every third but one
 * comes twice, ready both times, from this node first: the first copy is
 * kept (the sort is stable). */
static void check_shuffled(int distinct) {
        char text[64][16];
        const char *ips[96], *nodes[96];
        bool ready[96], term[96];
        int n = 0;
        uint32_t x = 12345u + (uint32_t) distinct;
        for (int i = 0; i < distinct; i++) {
                snprintf(text[i], sizeof text[i], "10.0.%d.%d", i % 3, i * 7 % 256);
                if (i % 3 != 2) {
                        ips[n] = text[i];
                        nodes[n] = "n1";
                        ready[n] = i % 3 == 1;
                        term[n++] = i % 3 == 0;
                }
                ips[n] = text[i];
                nodes[n] = "n2";
                ready[n] = true;
                term[n++] = false;
        }
        for (int i = n - 1; i > 0; i--) {
                x = x * 1103515245u + 12345u;
                int j = (int) (x >> 16) % (i + 1);
                const char *t = ips[i], *d = nodes[i];
                bool r = ready[i], m = term[i];
                ips[i] = ips[j], nodes[i] = nodes[j], ready[i] = ready[j], term[i] = term[j];
                ips[j] = t, nodes[j] = d, ready[j] = r, term[j] = m;
        }
        /* Each pair's n1 copy back in front of its n2 copy. */
        for (int i = 0; i < n; i++)
                for (int j = i + 1; j < n; j++)
                        if (ips[i] == ips[j] && strcmp(nodes[i], "n2") == 0) {
                                nodes[i] = "n1", nodes[j] = "n2";
                                bool r = ready[i], m = term[i];
                                ready[i] = ready[j], term[i] = term[j];
                                ready[j] = r, term[j] = m;
                        }
        struct slice *a = mk_slice("ns/a", "ns/web", n, ips, nodes, ready, term);
        const struct slice *sl[] = {a};
        struct svc *s = mk_svc(TRAFFIC_POLICY_CLUSTER, TRAFFIC_POLICY_CLUSTER, 0);
        struct endpoint_filter f = {.node_name = "n1"};
        struct svc_port_endpoints e;
        CHECK(endpoints_collect(s, &s->ports[0], 4, sl, 1, &f, &e) == 0);
        CHECK(e.n_all == (size_t) distinct);
        for (size_t i = 0; i < e.n_all; i++) {
                CHECK(i == 0 || strcmp(e.all[i - 1].str, e.all[i].str) < 0);
                CHECK(e.all[i].ready && !e.all[i].terminating);
                /* Which address is it: the kept copy's node follows. */
                for (int k = 0; k < distinct; k++)
                        if (strncmp(e.all[i].str, text[k], strlen(text[k])) == 0 &&
                            e.all[i].str[strlen(text[k])] == ':')
                                CHECK(e.all[i].local == (k % 3 == 1));
        }
        endpoints_done(&e);
        svc_free(s);
        slice_free(a);
}

static void test_merge_sort_shuffled(void) {
        check_shuffled(5);      /* 9 endpoints */
        check_shuffled(12);     /* 20 */
        check_shuffled(40);     /* 67 */
}

/* "ip:port" as Go's JoinHostPort writes it, and where the address sits. */
static void test_endpoint_format(void) {
        static const struct {
                const char *ip;
                uint16_t port;
                const char *want;
        } cases[] = {
                {"10.0.0.1", 1, "10.0.0.1:1"},
                {"255.255.255.255", 65535, "255.255.255.255:65535"},
                {"0.0.0.0", 0, "0.0.0.0:0"},
                {"fd00::1", 8080, "[fd00::1]:8080"},
                {"1111:2222:3333:4444:5555:6666:7777:8888", 65535, "[1111:2222:3333:4444:5555:6666:7777:8888]:65535"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct inet_addr a;
                char out[ENDPOINT_STRLEN];
                CHECK(inet_addr_parse(cases[i].ip, &a) == 0);
                endpoint_format(&a, cases[i].port, out);
                CHECK_STREQ(out, cases[i].want);
        }
        /* A collected endpoint's str, and its address inside it. */
        const char *ips[] = {"fd00::a"};
        struct slice *sl = mk_slice("ns/a", "ns/web", 1, ips, NULL, NULL, NULL);
        sl->family = 6;
        free(sl->addrs);
        sl->addrs = calloc(1, 16);
        struct inet_addr a6;
        CHECK(inet_addr_parse("fd00::a", &a6) == 0);
        slice_endpoint_set_addr(sl, 0, &a6);
        const struct slice *v[] = {sl};
        struct svc *s = mk_svc(TRAFFIC_POLICY_CLUSTER, TRAFFIC_POLICY_CLUSTER, 0);
        struct endpoint_filter f = {.node_name = "n1"};
        struct svc_port_endpoints e;
        CHECK(endpoints_collect(s, &s->ports[0], 6, v, 1, &f, &e) == 0);
        CHECK(e.n_all == 1);
        if (e.n_all == 1) {
                CHECK_STREQ(e.all[0].str, "[fd00::a]:8080");
                CHECK(e.all[0].ip_off == 1 && e.all[0].ip_len == 7);
        }
        endpoints_done(&e);
        svc_free(s);
        slice_free(sl);
}

static void test_policies(void) {
        const char *ips[] = {"10.0.0.1", "10.0.0.2", "10.0.0.3"};
        const char *nodes[] = {"n1", "n2", "n1"};
        bool ready[] = {true, true, false}, term[] = {false, false, true};
        struct slice *a = mk_slice("ns/a", "ns/web", 3, ips, nodes, ready, term);
        const struct slice *sl[] = {a};
        struct endpoint_filter f = {.node_name = "n1"};
        struct svc_port_endpoints e;

        /* ETP Local on a NodePort: cluster list for internal traffic, local
         * ready endpoints for external; both get SEP chains. */
        struct svc *s = mk_svc(TRAFFIC_POLICY_LOCAL, TRAFFIC_POLICY_CLUSTER, 30080);
        CHECK(endpoints_collect(s, &s->ports[0], 4, sl, 1, &f, &e) == 0);
        CHECK(e.external_policy_local && e.uses_cluster && e.uses_local);
        CHECK(e.n_cluster == 2 && e.n_local == 1 && e.n_reachable == 2);
        CHECK_STREQ(e.local[0]->str, "10.0.0.1:8080");
        endpoints_done(&e);
        svc_free(s);

        /* ITP Local on a ClusterIP service: only local endpoints. */
        s = mk_svc(TRAFFIC_POLICY_CLUSTER, TRAFFIC_POLICY_LOCAL, 0);
        CHECK(endpoints_collect(s, &s->ports[0], 4, sl, 1, &f, &e) == 0);
        CHECK(!e.uses_cluster && e.uses_local && e.n_local == 1 && e.n_reachable == 1);
        endpoints_done(&e);
        /* On another node with no local endpoint: still has_any, no local. */
        f.node_name = "n3";
        CHECK(endpoints_collect(s, &s->ports[0], 4, sl, 1, &f, &e) == 0);
        CHECK(e.has_any && e.n_local == 0 && e.n_reachable == 0);
        endpoints_done(&e);
        svc_free(s);

        /* ETP Local on a ClusterIP service without external IPs is Cluster. */
        s = mk_svc(TRAFFIC_POLICY_LOCAL, TRAFFIC_POLICY_CLUSTER, 0);
        CHECK(endpoints_collect(s, &s->ports[0], 4, sl, 1, &f, &e) == 0);
        CHECK(!e.external_policy_local && !e.uses_local);
        endpoints_done(&e);
        svc_free(s);
        slice_free(a);
}

static void test_terminating_fallback_local(void) {
        const char *ips[] = {"10.0.0.1", "10.0.0.2"};
        const char *nodes[] = {"n1", "n2"};
        bool ready[] = {false, true}, term[] = {true, false};
        struct slice *a = mk_slice("ns/a", "ns/web", 2, ips, nodes, ready, term);
        const struct slice *sl[] = {a};
        struct endpoint_filter f = {.node_name = "n1"};
        struct svc_port_endpoints e;
        struct svc *s = mk_svc(TRAFFIC_POLICY_LOCAL, TRAFFIC_POLICY_CLUSTER, 30080);

        /* Cluster list has a ready endpoint; the local list falls back to
         * this node's serving-and-terminating one. */
        CHECK(endpoints_collect(s, &s->ports[0], 4, sl, 1, &f, &e) == 0);
        CHECK(e.n_cluster == 1 && strcmp(e.cluster[0]->str, "10.0.0.2:8080") == 0);
        CHECK(e.n_local == 1 && strcmp(e.local[0]->str, "10.0.0.1:8080") == 0);
        CHECK(e.n_reachable == 2 && e.n_local_ready == 0);
        endpoints_done(&e);
        svc_free(s);
        slice_free(a);
}

/* svc's load-balancer IPs, source ranges and external IPs, "" ending each
 * list; each list is allocated as svc_free() frees it. */
static void svc_add_addrs(struct svc *s, const char *const *lbs, const char *const *ranges, const char *const *eips) {
        for (; lbs && **lbs; lbs++) {
                s->lb_ips = realloc(s->lb_ips, (s->n_lb_ips + 1) * sizeof *s->lb_ips);
                CHECK(inet_addr_parse(*lbs, &s->lb_ips[s->n_lb_ips++]) == 0);
        }
        for (; ranges && **ranges; ranges++) {
                s->source_ranges = realloc(s->source_ranges, (s->n_source_ranges + 1) * sizeof *s->source_ranges);
                CHECK(inet_cidr_parse(*ranges, &s->source_ranges[s->n_source_ranges++]) == 0);
        }
        for (; eips && **eips; eips++) {
                s->external_ips = realloc(s->external_ips, (s->n_external_ips + 1) * sizeof *s->external_ips);
                CHECK(inet_addr_parse(*eips, &s->external_ips[s->n_external_ips++]) == 0);
        }
}

/* s's plan on node (family 4) with the endpoints of a, masquerading by
 * detector unless masq says otherwise. */
static struct endpoints_plan plan_of(const struct svc *s, const struct slice *a, const char *node,
                                     const struct endpoints_masq *masq) {
        static const struct endpoints_masq by_detector = {.detect_local = true};
        const struct slice *sl[] = {a};
        struct endpoint_filter f = {.node_name = node};
        struct svc_port_endpoints e;
        struct endpoints_plan pl;

        CHECK(endpoints_collect(s, &s->ports[0], 4, sl, a ? 1 : 0, &f, &e) == 0);
        endpoints_plan(s, 4, &e, masq ? masq : &by_detector, &pl);
        endpoints_done(&e);
        /* Traffic passes exactly when it has endpoints; blocked traffic is
         * rejected when there is none at all, else dropped. */
        CHECK((pl.internal_block == ENDPOINTS_PASS) == pl.has_internal);
        CHECK((pl.external_block == ENDPOINTS_PASS) == pl.has_external);
        CHECK(pl.has_any || (pl.internal_block == ENDPOINTS_REJECT && pl.external_block == ENDPOINTS_REJECT));
        return pl;
}

/* The plan against upstream's per-port decisions (docs/reference/iptables-mode.md
 * §6.2 and §7, nftables-mode.md §6). */
static void test_plan_cluster_ip(void) {
        const char *ips[] = {"10.0.0.1", "10.0.0.2"}, *nodes[] = {"n1", "n2"};
        struct slice *a = mk_slice("ns/a", "ns/web", 2, ips, nodes, NULL, NULL);
        struct svc *s = mk_svc(TRAFFIC_POLICY_CLUSTER, TRAFFIC_POLICY_CLUSTER, 0);

        /* Endpoints: the cluster chain only; its first rule masquerades
         * what the detector does not call local. */
        struct endpoints_plan pl = plan_of(s, a, "n1", NULL);
        CHECK(pl.has_any && pl.has_internal && pl.has_external);
        CHECK(pl.uses_cluster_chain && !pl.uses_local_chain && !pl.uses_external_chain);
        CHECK(!pl.uses_firewall_chain && !pl.filters_sources);
        CHECK(pl.masq_internal && !pl.masq_external && !pl.short_circuit_pods);
        /* No detector for the family and no --masquerade-all: no rule. */
        struct endpoints_masq none = {0}, all = {.all = true};
        CHECK(!plan_of(s, a, "n1", &none).masq_internal);
        CHECK(plan_of(s, a, "n1", &all).masq_internal);

        /* No endpoints: both kinds of traffic rejected, no chain at all. */
        pl = plan_of(s, NULL, "n1", NULL);
        CHECK(!pl.has_any && pl.internal_block == ENDPOINTS_REJECT && pl.external_block == ENDPOINTS_REJECT);
        CHECK(!pl.uses_cluster_chain && !pl.uses_local_chain && !pl.uses_external_chain && !pl.masq_internal);
        svc_free(s);

        /* ITP Local: the local chain, if this node has an endpoint... */
        s = mk_svc(TRAFFIC_POLICY_CLUSTER, TRAFFIC_POLICY_LOCAL, 0);
        pl = plan_of(s, a, "n1", NULL);
        CHECK(pl.internal_policy_local && pl.has_internal && pl.masq_internal);
        CHECK(pl.uses_local_chain && !pl.uses_cluster_chain);
        /* ...else internal traffic is dropped (others have endpoints),
         * with no chain and nothing to masquerade. */
        pl = plan_of(s, a, "n3", NULL);
        CHECK(pl.has_any && !pl.has_internal && pl.internal_block == ENDPOINTS_DROP);
        CHECK(!pl.uses_local_chain && !pl.uses_cluster_chain && !pl.masq_internal);
        /* External traffic has no Local policy here: it would pass. */
        CHECK(pl.has_external);
        svc_free(s);
        slice_free(a);
}

static void test_plan_external_policy(void) {
        const char *ips[] = {"10.0.0.1", "10.0.0.2"}, *nodes[] = {"n1", "n2"};
        struct slice *a = mk_slice("ns/a", "ns/web", 2, ips, nodes, NULL, NULL);
        struct svc *s = mk_svc(TRAFFIC_POLICY_LOCAL, TRAFFIC_POLICY_CLUSTER, 30080);

        /* ETP Local on a NodePort, with a local endpoint: cluster chain for
         * internal traffic, local chain for external, and the external
         * chain that short-circuits pods and the node's own traffic. */
        struct endpoints_plan pl = plan_of(s, a, "n1", NULL);
        CHECK(pl.external_policy_local && !pl.internal_policy_local);
        CHECK(pl.uses_cluster_chain && pl.uses_local_chain && pl.uses_external_chain);
        CHECK(pl.has_external && !pl.masq_external && pl.short_circuit_pods);
        struct endpoints_masq none = {0};
        CHECK(!plan_of(s, a, "n1", &none).short_circuit_pods);

        /* No local endpoint: external traffic dropped, but the external
         * chain stays (it still short-circuits local traffic). */
        pl = plan_of(s, a, "n3", NULL);
        CHECK(pl.has_any && pl.has_internal && !pl.has_external && pl.external_block == ENDPOINTS_DROP);
        CHECK(pl.uses_external_chain && !pl.uses_local_chain && pl.uses_cluster_chain);
        svc_free(s);

        /* ETP Cluster: the external chain masquerades everything. */
        s = mk_svc(TRAFFIC_POLICY_CLUSTER, TRAFFIC_POLICY_CLUSTER, 30080);
        pl = plan_of(s, a, "n3", NULL);
        CHECK(pl.uses_external_chain && pl.masq_external && !pl.short_circuit_pods && pl.has_external);
        CHECK(!pl.uses_local_chain);
        svc_free(s);

        /* ETP Local on a ClusterIP service with an external IP: the policy
         * applies (the type admits external IPs); with one of the other
         * family only, there is no external destination in this family. */
        s = mk_svc(TRAFFIC_POLICY_LOCAL, TRAFFIC_POLICY_CLUSTER, 0);
        svc_add_addrs(s, NULL, NULL, (const char *[]) {"192.0.2.10", ""});
        pl = plan_of(s, a, "n1", NULL);
        CHECK(pl.external_policy_local && pl.uses_external_chain && pl.n_external_ips == 1);
        svc_free(s);
        s = mk_svc(TRAFFIC_POLICY_LOCAL, TRAFFIC_POLICY_CLUSTER, 0);
        svc_add_addrs(s, NULL, NULL, (const char *[]) {"2001:db8::10", ""});
        pl = plan_of(s, a, "n1", NULL);
        CHECK(pl.external_policy_local && !pl.uses_external_chain && !pl.uses_local_chain);
        CHECK(pl.n_external_ips == 0);
        svc_free(s);
        slice_free(a);
}

/* Source ranges: iptables mode's KUBE-FW- chain needs endpoints, nftables
 * mode's firewall- chain does not (nftables-mode.md §6). */
static void test_plan_source_ranges(void) {
        const char *ips[] = {"10.0.0.1"}, *nodes[] = {"n2"};
        struct slice *a = mk_slice("ns/a", "ns/web", 1, ips, nodes, NULL, NULL);
        struct svc *s = mk_svc(TRAFFIC_POLICY_CLUSTER, TRAFFIC_POLICY_CLUSTER, 30080);

        s->type = SVC_TYPE_LOAD_BALANCER;
        svc_add_addrs(s, (const char *[]) {"192.0.2.1", "2001:db8::1", ""},
                      (const char *[]) {"203.0.113.0/24", "2001:db8:1::/48", ""}, NULL);
        struct endpoints_plan pl = plan_of(s, a, "n1", NULL);
        CHECK(pl.n_lb_ips == 1 && pl.n_source_ranges == 1);
        CHECK(pl.uses_firewall_chain && pl.filters_sources && pl.uses_external_chain);
        pl = plan_of(s, NULL, "n1", NULL);
        CHECK(!pl.uses_firewall_chain && pl.filters_sources && !pl.uses_external_chain);
        CHECK(pl.external_block == ENDPOINTS_REJECT);
        svc_free(s);

        /* Ranges of the other family only: no filtering in this one. */
        s = mk_svc(TRAFFIC_POLICY_CLUSTER, TRAFFIC_POLICY_CLUSTER, 30080);
        s->type = SVC_TYPE_LOAD_BALANCER;
        svc_add_addrs(s, (const char *[]) {"192.0.2.1", ""}, (const char *[]) {"2001:db8:1::/48", ""}, NULL);
        pl = plan_of(s, a, "n1", NULL);
        CHECK(!pl.uses_firewall_chain && !pl.filters_sources && pl.n_source_ranges == 0);
        svc_free(s);
        slice_free(a);
}

static void test_cluster_ip_of_family(void) {
        struct svc *s = mk_svc(TRAFFIC_POLICY_CLUSTER, TRAFFIC_POLICY_CLUSTER, 0);
        CHECK(svc_cluster_ip(s, 4) == &s->cluster_ips[0]);
        CHECK(svc_cluster_ip(s, 6) == NULL);
        /* Dual-stack, IPv6 first. */
        s->cluster_ips[1] = s->cluster_ips[0];
        CHECK(inet_addr_parse("fd00::1", &s->cluster_ips[0]) == 0);
        s->n_cluster_ips = 2;
        CHECK(svc_cluster_ip(s, 6) == &s->cluster_ips[0] && svc_cluster_ip(s, 4) == &s->cluster_ips[1]);
        s->n_cluster_ips = 0;   /* headless */
        CHECK(svc_cluster_ip(s, 4) == NULL && svc_cluster_ip(s, 6) == NULL);
        svc_free(s);
}

/* Endpoints share one copy of each node name, freed with the last of them. */
static void test_intern(void) {
        size_t before = intern_count();
        char name[16] = "node-7";
        uint32_t a = intern(name), b = intern("node-7"), c = intern("node-8");
        CHECK(a != 0 && a == b && interned(a) != name && strcmp(interned(a), "node-7") == 0);
        CHECK(c != a && intern_count() == before + 2 && strcmp(interned(c), "node-8") == 0);
        intern_release(a);
        CHECK(intern_count() == before + 2 && strcmp(interned(b), "node-7") == 0);
        intern_release(b);
        CHECK(intern_count() == before + 1 && !interned(b) && strcmp(interned(c), "node-8") == 0);
        /* A freed number is used again, for another string. */
        uint32_t d = intern("node-9");
        CHECK(d == b && strcmp(interned(d), "node-9") == 0 && strcmp(interned(c), "node-8") == 0);
        intern_release(d);
        intern_release(c);
        intern_release(0);
        CHECK(intern_count() == before && !interned(0));
        /* Deleting a slice releases its endpoints' names. */
        struct model *m = model_new();
        const char *ips[] = {"10.0.0.1", "10.0.0.2"}, *nodes[] = {"n1", "n1"};
        model_slice_upsert(m, mk_slice("ns/web-1", "ns/web", 2, ips, nodes, NULL, NULL));
        CHECK(intern_count() == before + 1);
        CHECK(model_slice_delete(m, "ns/web-1") == 0);
        CHECK(intern_count() == before);
        model_free(m);
}

static struct inet_cidr cidr(const char *s) {
        struct inet_cidr c;
        if (inet_cidr_parse(s, &c) < 0)
                abort();
        return c;
}

/* The union of every ServiceCIDR's CIDRs: sorted, unique, and a CIDR two
 * objects share stays while either has it (upstream keeps one set of
 * strings and loses it when the first of them goes). */
static void test_service_cidrs(void) {
        struct service_cidrs *s = service_cidrs_new();
        struct inet_cidr a[2] = {cidr("fd00::/108"), cidr("10.96.0.0/12")}, b[1] = {cidr("10.96.0.0/12")},
                         c[1] = {cidr("10.100.0.0/24")};
        const struct inet_cidr *all;
        size_t n;
        char t[INET_ADDR_STRLEN + 4];

        CHECK(service_cidrs_all(s, &n) == NULL || n == 0);
        CHECK(service_cidrs_set(s, "kubernetes", a, 2));
        CHECK(!service_cidrs_set(s, "kubernetes", a, 2));       /* no change */
        CHECK(!service_cidrs_set(s, "dup", b, 1));              /* already in the union */
        CHECK(service_cidrs_set(s, "extra", c, 1));
        all = service_cidrs_all(s, &n);
        CHECK(n == 3);
        CHECK_STREQ(inet_cidr_format(&all[0], t), "10.96.0.0/12");
        CHECK_STREQ(inet_cidr_format(&all[1], t), "10.100.0.0/24");
        CHECK_STREQ(inet_cidr_format(&all[2], t), "fd00::/108");
        CHECK(service_cidrs_set(s, "kubernetes", NULL, 0));    /* fd00::/108 goes */
        all = service_cidrs_all(s, &n);
        CHECK(n == 2);                                          /* "dup" still holds 10.96.0.0/12 */
        CHECK_STREQ(inet_cidr_format(&all[0], t), "10.96.0.0/12");
        CHECK(service_cidrs_set(s, "dup", NULL, 0));
        CHECK(service_cidrs_set(s, "extra", NULL, 0));
        service_cidrs_all(s, &n);
        CHECK(n == 0);
        CHECK(service_cidrs_free(s) == NULL);
        CHECK(service_cidrs_free(NULL) == NULL);
}

int main(void) {
        TEST_RUN(test_hmap);
        TEST_RUN(test_intern);
        TEST_RUN(test_model_slices_follow_their_service);
        TEST_RUN(test_merge_sort_dedup);
        TEST_RUN(test_merge_sort_shuffled);
        TEST_RUN(test_endpoint_format);
        TEST_RUN(test_policies);
        TEST_RUN(test_terminating_fallback_local);
        TEST_RUN(test_plan_cluster_ip);
        TEST_RUN(test_plan_external_policy);
        TEST_RUN(test_plan_source_ranges);
        TEST_RUN(test_cluster_ip_of_family);
        TEST_RUN(test_service_cidrs);
        TEST_DONE();
}
