/* SPDX-License-Identifier: Apache-2.0 */
/* The allow-lists of the addresses services claim (model/admit.h): each
 * reason, the exemption of an address listed alone, lists off and "none",
 * the spec's order kept through refusals and re-admissions, and the words. */
#include <jansson.h>
#include <stdlib.h>

#include "kube/decode.h"
#include "model/admit.h"
#include "model/model.h"
#include "util/buf.h"
#include "util/inet.h"
#include "test.h"

static struct svc *decode(const char *text) {
        json_error_t e;
        char err[KUBE_ERRLEN];
        struct svc *s = NULL;
        json_t *j = json_loads(text, 0, &e);
        if (!j)
                fprintf(stderr, "bad test JSON: %s\n", e.text);
        if (kube_decode_service(j, &s, err) != 0)
                fprintf(stderr, "decode: %s\n", err);
        json_decref(j);
        return s;
}

/* default/kubernetes (10.96.0.1) with one endpoint, 192.168.0.10:6443, and
 * this node (192.168.0.2). */
static struct model *cluster(void) {
        struct model *m = model_new();
        model_service_upsert(m, decode("{\"kind\":\"Service\",\"metadata\":{\"name\":\"kubernetes\",\"namespace\":"
                                       "\"default\"},\"spec\":{\"clusterIP\":\"10.96.0.1\",\"clusterIPs\":["
                                       "\"10.96.0.1\"],\"ports\":[{\"name\":\"https\",\"port\":443}]}}"));
        json_error_t e;
        char err[KUBE_ERRLEN];
        json_t *j = json_loads("{\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":\"kubernetes\",\"namespace\":"
                               "\"default\",\"labels\":{\"kubernetes.io/service-name\":\"kubernetes\"}},"
                               "\"addressType\":\"IPv4\",\"endpoints\":[{\"addresses\":[\"192.168.0.10\"]}],"
                               "\"ports\":[{\"name\":\"https\",\"port\":6443}]}",
                               0, &e);
        struct slice *sl = NULL;
        CHECK(kube_decode_slice(j, &sl, err) == 0);
        json_decref(j);
        model_slice_upsert(m, sl);
        struct node *n = calloc(1, sizeof *n);
        n->name = strdup("node-1");
        n->n_addrs = 1;
        n->addrs = calloc(1, sizeof *n->addrs);
        inet_addr_parse("192.168.0.2", &n->addrs[0].addr);
        n->addrs[0].type = NODE_ADDR_INTERNAL;
        model_node_set(m, n);
        return m;
}

static enum admit_reason check(const struct admit_policy *p, const struct model *m, enum admit_list l,
                               const char *ip) {
        struct inet_addr a;
        CHECK(inet_addr_parse(ip, &a) == 0);
        return admit_check(p, m, l, &a);
}

static void policy(struct admit_policy *p, const char *ext, const char *lb) {
        char *e[4] = {0}, *b[4] = {0};
        size_t ne = 0, nb = 0;
        char *es = ext ? strdup(ext) : NULL, *bs = lb ? strdup(lb) : NULL;
        for (char *t = es ? strtok(es, ",") : NULL; t && ne < 4; t = strtok(NULL, ","))
                e[ne++] = t;
        for (char *t = bs ? strtok(bs, ",") : NULL; t && nb < 4; t = strtok(NULL, ","))
                b[nb++] = t;
        *p = (struct admit_policy) {0};
        CHECK(admit_policy_set(p, ADMIT_EXTERNAL_IPS, e, ne) == 0);
        CHECK(admit_policy_set(p, ADMIT_LB_IPS, b, nb) == 0);
        free(es);
        free(bs);
}

static void test_reasons(void) {
        struct model *m = cluster();
        struct admit_policy p;

        policy(&p, "0.0.0.0/0,::/0", NULL);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "203.0.113.5") == ADMIT_OK);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "2001:db8::5") == ADMIT_OK);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "192.168.0.10") == ADMIT_API_SERVER);  /* endpoint */
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "10.96.0.1") == ADMIT_API_SERVER);     /* cluster IP */
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "192.168.0.2") == ADMIT_NODE);         /* the Node's */
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "192.168.0.3") == ADMIT_OK);           /* its subnet is not */
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "127.0.0.53") == ADMIT_LOOPBACK);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "::1") == ADMIT_LOOPBACK);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "169.254.169.254") == ADMIT_LINK_LOCAL);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "fe80::1") == ADMIT_LINK_LOCAL);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "224.0.0.251") == ADMIT_MULTICAST);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "ff02::fb") == ADMIT_MULTICAST);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "0.0.0.0") == ADMIT_UNSPECIFIED);
        /* IPv4-mapped IPv6 addresses are what their IPv4 address is. */
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "::ffff:127.0.0.1") == ADMIT_LOOPBACK);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "::ffff:192.168.0.10") == ADMIT_API_SERVER);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "::ffff:192.168.0.2") == ADMIT_NODE);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "::ffff:203.0.113.5") == ADMIT_OK);
        /* The load-balancer list is off: everything, as upstream. */
        CHECK(check(&p, m, ADMIT_LB_IPS, "192.168.0.10") == ADMIT_OK);
        CHECK(check(&p, m, ADMIT_LB_IPS, "127.0.0.1") == ADMIT_OK);
        admit_policy_done(&p);

        /* Inside a CIDR is not enough for the special ones; alone it is. */
        policy(&p, "192.168.0.0/16,192.168.0.2/32", "none");
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "192.168.7.7") == ADMIT_OK);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "192.168.0.2") == ADMIT_OK);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "192.168.0.10") == ADMIT_API_SERVER);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "10.1.2.3") == ADMIT_NOT_LISTED);
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "2001:db8::5") == ADMIT_NOT_LISTED);
        CHECK(check(&p, m, ADMIT_LB_IPS, "192.168.7.7") == ADMIT_NOT_LISTED);   /* none */
        CHECK(admit_policy_on(&p));
        admit_policy_done(&p);

        policy(&p, NULL, NULL);
        CHECK(!admit_policy_on(&p));
        CHECK(check(&p, m, ADMIT_EXTERNAL_IPS, "192.168.0.10") == ADMIT_OK);
        CHECK(!admit_policy_on(NULL));
        admit_policy_done(&p);
        model_free(m);
}

static void addrs(char *out, size_t size, const struct inet_addr *a, uint32_t n) {
        out[0] = '\0';
        for (uint32_t i = 0; i < n; i++) {
                char t[INET_ADDR_STRLEN];
                snprintf(out + strlen(out), size - strlen(out), "%s%s", i ? "," : "", inet_addr_format(&a[i], t));
        }
}

#define EVIL                                                                                                    \
        "{\"kind\":\"Service\",\"metadata\":{\"name\":\"evil\",\"namespace\":\"shop\"},\"spec\":{\"type\":"    \
        "\"LoadBalancer\",\"clusterIP\":\"10.96.5.5\",\"clusterIPs\":[\"10.96.5.5\"],\"ports\":[{\"port\":80,"  \
        "\"nodePort\":30080}],\"externalIPs\":[\"203.0.113.1\",\"192.168.0.10\",\"203.0.113.2\",\"10.9.9.9\","  \
        "\"203.0.113.3\"]},\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"198.51.100.1\"},{\"ip\":"       \
        "\"198.51.100.2\"}]}}}"

static void test_service(void) {
        struct model *m = cluster();
        struct admit_policy p;
        char got[256];
        struct svc *raw = decode(EVIL);

        /* Off: nothing to do. */
        CHECK(admit_service(NULL, m, raw) == NULL);
        policy(&p, NULL, NULL);
        CHECK(admit_service(&p, m, raw) == NULL);
        admit_policy_done(&p);

        policy(&p, "203.0.113.0/24", "198.51.100.2/32");
        struct svc *a = admit_service(&p, m, raw);
        CHECK(a != NULL);
        if (!a)
                goto out;
        addrs(got, sizeof got, a->external_ips, a->n_external_ips);
        CHECK_STREQ(got, "203.0.113.1,203.0.113.2,203.0.113.3");
        addrs(got, sizeof got, a->lb_ips, a->n_lb_ips);
        CHECK_STREQ(got, "198.51.100.2");
        CHECK(a->n_refused == 3);
        CHECK(a->refused[0].list == ADMIT_EXTERNAL_IPS && a->refused[0].reason == ADMIT_API_SERVER &&
              a->refused[0].index == 1);
        CHECK(a->refused[1].list == ADMIT_EXTERNAL_IPS && a->refused[1].reason == ADMIT_NOT_LISTED &&
              a->refused[1].index == 3);
        CHECK(a->refused[2].list == ADMIT_LB_IPS && a->refused[2].reason == ADMIT_NOT_LISTED &&
              a->refused[2].index == 0);
        /* The rest of the service is as it was. */
        CHECK(a->n_ports == 1 && a->ports[0].node_port == 30080 && strcmp(a->key, "shop/evil") == 0 &&
              strcmp(a->name, "evil") == 0 && a->type == SVC_TYPE_LOAD_BALANCER);
        /* Decided again with nothing changed: nothing to do. */
        CHECK(admit_service(&p, m, a) == NULL);

        /* The words, as the log and explain give them. */
        struct buf b = BUF_INIT;
        admit_describe_refusal(a->key, &a->refused[0], &b);
        CHECK_STREQ(b.data, "Service shop/evil: not programming its externalIP 192.168.0.10: an address of the API "
                            "server (default/kubernetes), which --external-ip-cidrs admits only when it lists it "
                            "alone (/32)");
        buf_clear(&b);
        admit_describe_refusal(a->key, &a->refused[2], &b);
        CHECK_STREQ(b.data, "Service shop/evil: not programming its load-balancer IP 198.51.100.1: not in "
                            "--load-balancer-ip-cidrs");
        buf_done(&b);
        CHECK_STREQ(admit_reason_name(ADMIT_NODE), "node-address");
        CHECK_STREQ(admit_list_label(ADMIT_LB_IPS), "loadBalancerIPs");

        /* The lists widened: the refused come back at their places. */
        admit_policy_done(&p);
        policy(&p, "0.0.0.0/0,192.168.0.10/32", "0.0.0.0/0");
        struct svc *b2 = admit_service(&p, m, a);
        CHECK(b2 != NULL);
        if (b2) {
                addrs(got, sizeof got, b2->external_ips, b2->n_external_ips);
                CHECK_STREQ(got, "203.0.113.1,192.168.0.10,203.0.113.2,10.9.9.9,203.0.113.3");
                addrs(got, sizeof got, b2->lb_ips, b2->n_lb_ips);
                CHECK_STREQ(got, "198.51.100.1,198.51.100.2");
                CHECK(b2->n_refused == 0 && b2->refused == NULL);
        }
        svc_free(b2);
        svc_free(a);
out:
        admit_policy_done(&p);
        svc_free(raw);
        model_free(m);
}

static int n_came, n_went;

static void on_came(const struct svc_refusal *r, void *ctx) {
        (void) r, (void) ctx;
        n_came++;
}

static void on_went(const struct svc_refusal *r, void *ctx) {
        (void) r, (void) ctx;
        n_went++;
}

static void test_diff(void) {
        struct model *m = cluster();
        struct admit_policy p1, p2;
        struct svc *raw = decode(EVIL);

        policy(&p1, "203.0.113.0/24", NULL);            /* refuses 192.168.0.10, 10.9.9.9 */
        policy(&p2, "203.0.113.0/24,10.0.0.0/8", NULL); /* refuses 192.168.0.10 */
        struct svc *a = admit_service(&p1, m, raw), *b = admit_service(&p2, m, raw);
        CHECK(a && b);
        if (a && b) {
                admit_diff(NULL, a, on_came, on_went, NULL);
                CHECK(n_came == 2 && n_went == 0);
                n_came = 0;
                admit_diff(a, b, on_came, on_went, NULL);
                CHECK(n_came == 0 && n_went == 1);
                n_went = 0;
                admit_diff(b, NULL, on_came, on_went, NULL);
                CHECK(n_came == 0 && n_went == 1);
        }
        svc_free(a);
        svc_free(b);
        svc_free(raw);
        admit_policy_done(&p1);
        admit_policy_done(&p2);
        model_free(m);
}

int main(void) {
        TEST_RUN(test_reasons);
        TEST_RUN(test_service);
        TEST_RUN(test_diff);
        TEST_DONE();
}
