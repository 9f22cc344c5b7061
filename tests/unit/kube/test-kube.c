/* SPDX-License-Identifier: Apache-2.0 */
/* Loading state files (JSON, YAML, Lists, multi-document) and decoding
 * objects, including the error messages that name the bad field. */
#include <errno.h>
#include <jansson.h>

#include "kube/client.h"
#include "kube/decode.h"
#include "kube/intake.h"
#include "kube/load.h"
#include "kube/rate.h"
#include "model/model.h"
#include "util/buf.h"
#include "util/inet.h"
#include "test.h"

struct collect {
        json_t *objs;
};

static int collect_fn(void *u, const json_t *obj) {
        struct collect *c = u;
        json_array_append(c->objs, (json_t *) obj);
        return 0;
}

static json_t *load(const char *text, int *ret_r, char *err) {
        struct collect c = {json_array()};
        *ret_r = kube_load_buffer("t", text, strlen(text), collect_fn, &c, err);
        return c.objs;
}

static void test_yaml_scalars(void) {
        char err[KUBE_LOAD_ERRLEN];
        int r;
        json_t *o = load("a: 80\nb: \"80\"\nc: true\nd: yes\ne: ~\nf: 1.5\ng: 0x10\nh: http\ni: ''\nj: 10.0.0.1\n",
                         &r, err);
        CHECK(r == 0);
        json_t *d = json_array_get(o, 0);
        CHECK(json_is_integer(json_object_get(d, "a")) && json_integer_value(json_object_get(d, "a")) == 80);
        CHECK(json_is_string(json_object_get(d, "b")));
        CHECK(json_is_true(json_object_get(d, "c")));
        CHECK(json_is_true(json_object_get(d, "d")));
        CHECK(json_is_null(json_object_get(d, "e")));
        CHECK(json_is_real(json_object_get(d, "f")));
        CHECK(json_integer_value(json_object_get(d, "g")) == 16);
        CHECK_STREQ(json_string_value(json_object_get(d, "h")), "http");
        CHECK_STREQ(json_string_value(json_object_get(d, "i")), "");
        CHECK_STREQ(json_string_value(json_object_get(d, "j")), "10.0.0.1");
        json_decref(o);
}

static void test_lists_and_documents(void) {
        char err[KUBE_LOAD_ERRLEN];
        int r;
        json_t *o = load("{\"kind\":\"List\",\"items\":[{\"kind\":\"Service\"},{\"kind\":\"Node\"}]}", &r, err);
        CHECK(r == 0 && json_array_size(o) == 2);
        json_decref(o);
        o = load("---\nkind: Service\n---\n---\nkind: ServiceList\nitems:\n- kind: Service\n- kind: Service\n", &r, err);
        CHECK(r == 0 && json_array_size(o) == 3);
        json_decref(o);
        o = load("a: &x {p: 1}\nb: *x\n", &r, err);
        CHECK(r == 0 && json_integer_value(json_object_get(json_object_get(json_array_get(o, 0), "b"), "p")) == 1);
        json_decref(o);
}

static void test_syntax_errors(void) {
        char err[KUBE_LOAD_ERRLEN];
        int r;
        json_t *o = load("{\"kind\": \"List\",\n \"items\": [,]}", &r, err);
        CHECK(r == -EINVAL);
        CHECK(strncmp(err, "t:2:", 4) == 0);
        json_decref(o);
        o = load("kind: Service\n  bad: : indent\n", &r, err);
        CHECK(r == -EINVAL);
        CHECK(strncmp(err, "t:2:", 4) == 0);
        json_decref(o);
        o = load("a: 1\na: 2\n", &r, err);
        CHECK(r == -EINVAL && strstr(err, "duplicate"));
        json_decref(o);
        o = load("- 1\n- 2\n", &r, err);
        CHECK(r == -EINVAL && strstr(err, "not an object"));
        json_decref(o);
}

/* The caps of util/yamlcap.h as the state loader reports them, and text
 * that is not text. */
static void test_input_caps(void) {
        char err[KUBE_LOAD_ERRLEN];
        struct buf b = BUF_INIT;
        int r;

        buf_puts(&b, "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for (int i = 1; i < 10; i++)
                buf_printf(&b, "l%d: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d]\n", i, i,
                           i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
        json_t *o = load(b.data, &r, err);
        CHECK(r == -EINVAL && json_array_size(o) == 0);
        CHECK_STREQ(err, "t:5:45: aliases expand to more than 100000 nodes (the YAML alias expansion cap)");
        json_decref(o);

        buf_clear(&b);
        buf_puts(&b, "kind: Service\nspec: ");
        for (int i = 0; i < 100000; i++)
                buf_putc(&b, '[');
        o = load(b.data, &r, err);
        CHECK(r == -EINVAL && json_array_size(o) == 0);
        CHECK_STREQ(err, "t:2:70: collections nest deeper than 64 levels (the YAML depth cap)");
        json_decref(o);

        o = load("a: &a [1, *a]\n", &r, err);
        CHECK(r == -EINVAL && strstr(err, "alias *a is inside the value of its own anchor"));
        json_decref(o);

        /* Many anchors and aliases: found by name, each alias a copy of
         * the latest anchor of its name. */
        buf_clear(&b);
        buf_puts(&b, "a:\n");
        for (int i = 0; i < 20000; i++)
                buf_printf(&b, "- &a%d {v: %d}\n", i, i);
        buf_puts(&b, "- &a7 {v: -7}\nb:\n");
        for (int i = 0; i < 20000; i++)
                buf_printf(&b, "- *a%d\n", i);
        o = load(b.data, &r, err);
        CHECK(r == 0 && json_array_size(o) == 1);
        const json_t *copies = json_object_get(json_array_get(o, 0), "b");
        CHECK(json_array_size(copies) == 20000);
        CHECK(json_integer_value(json_object_get(json_array_get(copies, 19999), "v")) == 19999);
        CHECK(json_integer_value(json_object_get(json_array_get(copies, 7), "v")) == -7);
        json_decref(o);
        buf_done(&b);

        /* A NUL byte: neither JSON nor YAML. */
        struct collect c = {json_array()};
        CHECK(kube_load_buffer("t", "kind:\0x", 8, collect_fn, &c, err) == -EINVAL);
        CHECK_STREQ(err, "t: a NUL byte at offset 5: not JSON or YAML text");
        CHECK(kube_load_file("/dev/zero", collect_fn, &c, err) == -EINVAL);
        CHECK_STREQ(err, "/dev/zero: a NUL byte at offset 0: not JSON or YAML text");
        CHECK(json_array_size(c.objs) == 0);
        json_decref(c.objs);
}

static json_t *obj(const char *text) {
        json_error_t e;
        json_t *j = json_loads(text, 0, &e);
        if (!j)
                fprintf(stderr, "bad test JSON: %s\n", e.text);
        return j;
}

static void test_decode_service(void) {
        char err[KUBE_ERRLEN];
        struct svc *s = NULL;
        json_t *j = obj("{\"kind\":\"Service\",\"metadata\":{\"name\":\"web\",\"namespace\":\"ns\"},"
                        "\"spec\":{\"type\":\"LoadBalancer\",\"clusterIP\":\"10.96.0.10\",\"clusterIPs\":[\"10.96.0.10\",\"fd00::10\"],"
                        "\"ports\":[{\"name\":\"http\",\"port\":80,\"targetPort\":\"http\",\"nodePort\":30080},"
                        "{\"name\":\"dns\",\"protocol\":\"UDP\",\"port\":53}],"
                        "\"externalTrafficPolicy\":\"Local\",\"healthCheckNodePort\":32000,"
                        "\"loadBalancerSourceRanges\":[\" 203.0.113.7/25\"],"
                        "\"sessionAffinity\":\"ClientIP\",\"sessionAffinityConfig\":{\"clientIP\":{\"timeoutSeconds\":60}}},"
                        "\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"1.2.3.4\"},{\"ip\":\"5.6.7.8\",\"ipMode\":\"Proxy\"},{\"hostname\":\"lb.example\"}]}}}");
        CHECK(kube_decode_service(j, &s, err) == 0);
        if (s) {
                CHECK_STREQ(s->key, "ns/web");
                CHECK_STREQ(s->name, "web");
                CHECK(s->type == SVC_TYPE_LOAD_BALANCER);
                CHECK(s->n_cluster_ips == 2 && s->cluster_ips[1].family == 6);
                CHECK(s->n_ports == 2 && s->ports[0].node_port == 30080 && s->ports[1].proto == L4_UDP);
                CHECK(s->n_lb_ips == 1);
                CHECK(s->n_source_ranges == 1 && s->source_ranges[0].prefix == 25);
                CHECK(s->health_check_node_port == 32000);
                CHECK(s->affinity_client_ip && s->affinity_timeout == 60);
                CHECK(s->external_policy == TRAFFIC_POLICY_LOCAL);
                /* Decoded objects are packed into one allocation: every
                 * piece is still there, and inside it. */
                CHECK(s->packed);
                CHECK_STREQ(s->ports[0].name, "http");
                CHECK_STREQ(s->ports[1].name, "dns");
                char ip[INET_ADDR_STRLEN];
                CHECK_STREQ(inet_addr_format(&s->lb_ips[0], ip), "1.2.3.4");
                CHECK((char *) s->ports > (char *) s && s->ports[1].name > s->key && s->name > s->key);
        }
        svc_free(s);
        json_decref(j);
}

static void expect_service_error(const char *text, int want, const char *needle) {
        char err[KUBE_ERRLEN];
        struct svc *s = NULL;
        json_t *j = obj(text);
        int r = kube_decode_service(j, &s, err);
        CHECK(r == want);
        if (!strstr(err, needle)) {
                fprintf(stderr, "error \"%s\" does not contain \"%s\"\n", err, needle);
                CHECK(!"error text");
        }
        CHECK(s == NULL);
        json_decref(j);
}

static void test_decode_service_errors(void) {
        expect_service_error("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"},\"spec\":{\"clusterIP\":\"10.0.0.300\",\"ports\":[{\"port\":80}]}}",
                             -EINVAL, "spec.clusterIP: \"10.0.0.300\"");
        expect_service_error("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"},\"spec\":{\"clusterIP\":\"10.0.0.3\",\"ports\":[{\"port\":80},{\"port\":70000}]}}",
                             -EINVAL, "spec.ports[1].port: 70000 is out of range");
        expect_service_error("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"},\"spec\":{\"clusterIP\":\"10.0.0.3\",\"ports\":[{\"port\":80,\"protocol\":\"FOO\"}]}}",
                             -EINVAL, "spec.ports[0].protocol: unknown protocol \"FOO\"");
        expect_service_error("{\"metadata\":{\"name\":\"a\\\" -j ACCEPT\",\"namespace\":\"n\"},\"spec\":{\"clusterIP\":\"10.0.0.3\"}}",
                             -EINVAL, "metadata.name");
        expect_service_error("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"},\"spec\":{\"clusterIP\":\"10.0.0.3\",\"ports\":[{\"port\":80,\"name\":\"a b\"}]}}",
                             -EINVAL, "spec.ports[0].name");
        expect_service_error("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"},\"spec\":{\"clusterIP\":\"None\"}}",
                             KUBE_IGNORED, "headless");
        expect_service_error("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"labels\":{\"service.kubernetes.io/service-proxy-name\":\"x\"}},\"spec\":{\"clusterIP\":\"10.0.0.3\"}}",
                             KUBE_IGNORED, "another proxy");
        expect_service_error("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"},\"spec\":{\"type\":\"ExternalName\",\"externalName\":\"x.example\"}}",
                             KUBE_IGNORED, "ExternalName");
        expect_service_error("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"},\"spec\":{\"clusterIP\":\"10.0.0.3\",\"loadBalancerSourceRanges\":[\"1.2.3.4\"]}}",
                             -EINVAL, "spec.loadBalancerSourceRanges[0]");
        expect_service_error("[1,2]", -EINVAL, "object");
}

static void test_decode_slice(void) {
        char err[KUBE_ERRLEN];
        struct slice *s = NULL;
        json_t *j = obj("{\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":\"web-abc\",\"namespace\":\"ns\","
                        "\"labels\":{\"kubernetes.io/service-name\":\"web\"}},\"addressType\":\"IPv4\","
                        "\"ports\":[{\"name\":\"http\",\"port\":8080,\"protocol\":\"TCP\"},{\"name\":\"x\"}],"
                        "\"endpoints\":[{\"addresses\":[\"10.0.0.1\"],\"conditions\":{\"ready\":false,\"terminating\":true},"
                        "\"nodeName\":\"n1\",\"zone\":\"za\",\"hints\":{\"forZones\":[{\"name\":\"z1\"}]}},"
                        "{\"addresses\":[]},{\"addresses\":[\"10.0.0.2\"]},"
                        "{\"addresses\":[\"10.0.0.3\"],\"zone\":\"zb\"},{\"addresses\":[\"10.0.0.4\"],\"zone\":\"za\"}]}");
        CHECK(kube_decode_slice(j, &s, err) == 0);
        if (s) {
                CHECK_STREQ(s->service_key, "ns/web");
                CHECK(s->family == 4 && s->n_ports == 2 && s->ports[1].port == 0);
                CHECK(s->n_endpoints == 4);
                /* Zones are kept once per slice. */
                CHECK(s->n_zones == 2 && !slice_endpoint_zone(s, &s->endpoints[1]));
                CHECK_STREQ(slice_endpoint_zone(s, &s->endpoints[0]), "za");
                CHECK_STREQ(slice_endpoint_zone(s, &s->endpoints[2]), "zb");
                CHECK(s->endpoints[3].zone == s->endpoints[0].zone);
                CHECK(!s->endpoints[0].ready && s->endpoints[0].serving && s->endpoints[0].terminating);
                /* Hints live in the slice: only endpoints that have some point there. */
                const struct endpoint_hints *h = slice_endpoint_hints(s, &s->endpoints[0]);
                CHECK(s->n_hints == 1 && h && h->n_zones == 1 && h->n_nodes == 0);
                CHECK_STREQ(h->zones[0], "z1");
                CHECK(s->endpoints[1].ready && !slice_endpoint_node(&s->endpoints[1]));
                CHECK(!slice_endpoint_hints(s, &s->endpoints[1]));
                CHECK(s->packed && strcmp(slice_endpoint_node(&s->endpoints[0]), "n1") == 0);
                CHECK_STREQ(s->ports[0].name, "http");
        }
        slice_free(s);
        json_decref(j);

        j = obj("{\"metadata\":{\"name\":\"web-abc\",\"namespace\":\"ns\",\"labels\":{\"kubernetes.io/service-name\":\"web\"}},"
                "\"addressType\":\"IPv4\",\"endpoints\":[{\"addresses\":[\"fd00::1\"]}]}");
        s = NULL;
        CHECK(kube_decode_slice(j, &s, err) == -EINVAL && strstr(err, "endpoints[0].addresses[0]"));
        json_decref(j);
        j = obj("{\"metadata\":{\"name\":\"web-abc\",\"namespace\":\"ns\"},\"addressType\":\"IPv4\"}");
        CHECK(kube_decode_slice(j, &s, err) == -EINVAL && strstr(err, "kubernetes.io/service-name"));
        json_decref(j);
        j = obj("{\"metadata\":{\"name\":\"web-abc\",\"namespace\":\"ns\",\"labels\":{\"kubernetes.io/service-name\":\"web\"}},"
                "\"addressType\":\"IPv4\",\"endpoints\":[{\"addresses\":[\"10.0.0.1\"],\"zone\":\"not a zone\"}]}");
        CHECK(kube_decode_slice(j, &s, err) == -EINVAL && strstr(err, "endpoints[0].zone"));
        json_decref(j);
        /* A slice of 300 zones: the first 255 kept, the rest unset, the slice whole. */
        json_t *eps = json_array();
        for (int i = 0; i < 300; i++) {
                char a[32], z[16];
                snprintf(a, sizeof a, "10.1.%d.%d", i / 250, i % 250 + 1);
                snprintf(z, sizeof z, "z%d", i);
                json_array_append_new(eps, json_pack("{s:[s], s:s}", "addresses", a, "zone", z));
        }
        j = obj("{\"metadata\":{\"name\":\"many\",\"namespace\":\"ns\",\"labels\":{\"kubernetes.io/service-name\":\"web\"}},"
                "\"addressType\":\"IPv4\"}");
        json_object_set_new(j, "endpoints", eps);
        s = NULL;
        CHECK(kube_decode_slice(j, &s, err) == 0 && s && s->n_endpoints == 300 && s->n_zones == 255);
        if (s) {
                CHECK_STREQ(slice_endpoint_zone(s, &s->endpoints[254]), "z254");
                CHECK(!slice_endpoint_zone(s, &s->endpoints[255]));
        }
        slice_free(s);
        json_decref(j);

        /* 64 zone hints fit the endpoint's 16-bit count; 65 are refused, by name. */
        for (int n = 64; n <= 65; n++) {
                json_t *zones = json_array();
                for (int i = 0; i < n; i++)
                        json_array_append_new(zones, json_pack("{s:s}", "name", "z"));
                j = json_pack("{s:s, s:{s:s, s:s, s:{s:s}}, s:s, s:[{s:[s], s:{s:o}}]}", "kind", "EndpointSlice",
                              "metadata", "name", "web-abc", "namespace", "ns", "labels", "kubernetes.io/service-name",
                              "web", "addressType", "IPv4", "endpoints", "addresses", "10.0.0.1", "hints", "forZones",
                              zones);
                s = NULL;
                int r = kube_decode_slice(j, &s, err);
                if (n == 64)
                        CHECK(r == 0 && s && slice_endpoint_hints(s, &s->endpoints[0])->n_zones == 64);
                else
                        CHECK(r == -EINVAL && strstr(err, "endpoints[0].hints.forZones: 65 hints"));
                slice_free(s);
                json_decref(j);
        }

        /* A slice's port count is 16 bits: 65536 ports are refused, not cut. */
        json_t *ports = json_array();
        for (int i = 0; i <= UINT16_MAX; i++)
                json_array_append_new(ports, json_pack("{s:i}", "port", 1 + i % 65535));
        j = json_pack("{s:s, s:{s:s, s:s, s:{s:s}}, s:s, s:o, s:[]}", "kind", "EndpointSlice", "metadata", "name",
                      "web-abc", "namespace", "ns", "labels", "kubernetes.io/service-name", "web", "addressType",
                      "IPv4", "ports", ports, "endpoints");
        s = NULL;
        CHECK(kube_decode_slice(j, &s, err) == -EINVAL && !s && strstr(err, "ports: 65536 ports"));
        json_decref(j);
}

static void expect_cidr(const char *text, int want, const char *needle, size_t want_n) {
        char err[KUBE_ERRLEN], *name = NULL;
        struct inet_cidr *cidrs = NULL;
        size_t n = 0;
        json_t *j = obj(text);
        int r = kube_decode_service_cidr(j, &name, &cidrs, &n, err);
        CHECK(r == want);
        if (r == 0) {
                CHECK_STREQ(name, needle);
                CHECK(n == want_n);
        } else if (!strstr(err, needle)) {
                fprintf(stderr, "error \"%s\" does not contain \"%s\"\n", err, needle);
                CHECK(!"error text");
        }
        CHECK(r == 0 || (!name && !cidrs));
        free(name);
        free(cidrs);
        json_decref(j);
}

static void test_decode_service_cidr(void) {
        expect_cidr("{\"metadata\":{\"name\":\"kubernetes\"},\"spec\":{\"cidrs\":[\"10.96.0.0/12\",\"fd00::/108\"]}}", 0,
                    "kubernetes", 2);
        expect_cidr("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"cidrs\":[\"10.96.0.0/33\"]}}", -EINVAL,
                    "spec.cidrs[0]: \"10.96.0.0/33\" is not a CIDR", 0);
        expect_cidr("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"cidrs\":[\"10.96.0.0/16\",\"10.97.0.0/16\"]}}", -EINVAL,
                    "spec.cidrs: two CIDRs of one IP family", 0);
        expect_cidr("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"cidrs\":[]}}", -EINVAL, "spec.cidrs: missing", 0);
        expect_cidr("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"cidrs\":\"10.0.0.0/8\"}}", -EINVAL,
                    "spec.cidrs: must be a list", 0);
        expect_cidr("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"cidrs\":[1]}}", -EINVAL, "spec.cidrs[0]", 0);
        expect_cidr("{\"metadata\":{\"name\":\"Bad Name\"},\"spec\":{\"cidrs\":[\"10.0.0.0/8\"]}}", -EINVAL,
                    "metadata.name", 0);
}

/* client-go's token bucket: a burst at once, then one request per 1/qps,
 * waiters in order; tokens come back with time; qps < 0 is no limit. */
static void test_rate(void) {
        struct kube_rate r;
        kube_rate_init(&r, 5, 10, 1000);
        for (int i = 0; i < 10; i++)
                CHECK(kube_rate_take(&r, 1000) == 0);
        CHECK(kube_rate_take(&r, 1000) == 200);
        CHECK(kube_rate_take(&r, 1000) == 400);
        CHECK(kube_rate_take(&r, 2000) == 0);           /* -2 + 5 tokens back */
        CHECK(kube_rate_take(&r, 2000) == 0);
        CHECK(kube_rate_take(&r, 2000) == 0);
        CHECK(kube_rate_take(&r, 2000) == 200);
        CHECK(kube_rate_take(&r, 100000) == 0);         /* no more than burst saved up */
        for (int i = 0; i < 9; i++)
                kube_rate_take(&r, 100000);
        CHECK(kube_rate_take(&r, 100000) == 200);
        kube_rate_init(&r, 0, 0, 0);                    /* client-go's defaults */
        CHECK(r.qps == 5 && r.burst == 10);
        kube_rate_init(&r, -1, 0, 0);
        for (int i = 0; i < 1000; i++)
                CHECK(kube_rate_take(&r, 0) == 0);
        kube_rate_init(&r, 0.5, 1, 0);
        CHECK(kube_rate_take(&r, 0) == 0);
        CHECK(kube_rate_take(&r, 0) == 2000);
}

/* One key rule everywhere (client-go's MetaNamespaceKeyFunc): the
 * reflector's key for an event and the decoded object's key are the same
 * whatever the object omits, so a Service sent without metadata.namespace,
 * ADDED then DELETED, is deleted (it used to be stored as default/NAME and
 * the delete, keyed NAME, missed it until a relist). */
static void test_keys(void) {
        static const char *const svc_text =
                "{\"kind\":\"Service\",\"metadata\":{\"name\":\"nons\"},"
                "\"spec\":{\"clusterIP\":\"10.96.0.9\",\"ports\":[{\"port\":80}]}}";
        static const char *const slice_text =
                "{\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":\"nons-1\",\"namespace\":\"\","
                "\"labels\":{\"kubernetes.io/service-name\":\"nons\"}},\"addressType\":\"IPv4\","
                "\"endpoints\":[{\"addresses\":[\"10.1.0.1\"]}],\"ports\":[{\"port\":80}]}";
        char err[KUBE_ERRLEN];
        struct intake *in = NULL;
        json_t *svc = obj(svc_text), *sl = obj(slice_text);
        char *key = kube_object_key(svc), *slkey = kube_object_key(sl);
        struct svc *s = NULL;
        struct slice *d = NULL;

        CHECK_STREQ(key, "nons");
        CHECK_STREQ(slkey, "nons-1");
        CHECK(kube_decode_service(svc, &s, err) == 0 && s);
        if (s) {
                CHECK_STREQ(s->key, key);
                CHECK_STREQ(s->name, "nons");
        }
        svc_free(s);
        CHECK(kube_decode_slice(sl, &d, err) == 0 && d);
        if (d) {
                CHECK_STREQ(d->key, slkey);
                CHECK_STREQ(d->service_key, key);       /* the slice finds its service */
        }
        slice_free(d);

        CHECK(intake_new("node-1", NULL, &in) == 0);
        CHECK(intake_object(in, INTAKE_SERVICES, key, svc) != 0);
        CHECK(intake_object(in, INTAKE_SLICES, slkey, sl) != 0);
        CHECK(model_n_services(intake_model(in)) == 1 && model_n_slices(intake_model(in)) == 1);
        CHECK(model_service_get(intake_model(in), key) != NULL);
        intake_object(in, INTAKE_SLICES, slkey, NULL);
        intake_object(in, INTAKE_SERVICES, key, NULL);
        CHECK(model_n_services(intake_model(in)) == 0 && model_n_slices(intake_model(in)) == 0);
        intake_free(in);

        /* With a namespace: "ns/name"; cluster-scoped: the name; no name: none. */
        json_t *j = obj("{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\"}}");
        char *k = kube_object_key(j);
        CHECK_STREQ(k, "b/a");
        free(k);
        json_decref(j);
        j = obj("{\"metadata\":{\"namespace\":\"b\"}}");
        CHECK(kube_object_key(j) == NULL);
        json_decref(j);
        char ref[512];
        j = obj("{\"metadata\":{\"name\":\"a\",\"namespace\":\"\"}}");
        CHECK_STREQ(kube_object_ref(j, ref, sizeof ref), "a");
        json_decref(j);

        free(key);
        free(slkey);
        json_decref(svc);
        json_decref(sl);
}

/* client-go's shape of backoff: doubling from 0.5 s to the 30 s cap, each
 * wait drawn from [d/2, d). */
static void test_backoff(void) {
        unsigned seed = 7;
        for (unsigned f = 0; f < 40; f++) {
                uint64_t d = f <= 1 ? 500 : f >= 8 ? 30000 : 500u << (f - 1);
                if (d > 30000)
                        d = 30000;
                for (int i = 0; i < 50; i++) {
                        uint64_t ms = kube_backoff_ms(f, &seed);
                        CHECK(ms >= d / 2 && ms < d);
                }
        }
}

static void test_names(void) {
        CHECK(kube_valid_dns_label("kube-system") == 0);
        CHECK(kube_valid_dns_label("-a") < 0);
        CHECK(kube_valid_dns_label("A") < 0);
        CHECK(kube_valid_dns_label("a.b") < 0);
        CHECK(kube_valid_dns_subdomain("a.b-c.d") == 0);
        CHECK(kube_valid_dns_subdomain("a..b") < 0);
        CHECK(kube_valid_dns_subdomain("a.") < 0);
        CHECK(kube_valid_label_value("us-east-1a") == 0);
        CHECK(kube_valid_label_value("a b") < 0);
}

int main(void) {
        TEST_RUN(test_yaml_scalars);
        TEST_RUN(test_lists_and_documents);
        TEST_RUN(test_syntax_errors);
        TEST_RUN(test_input_caps);
        TEST_RUN(test_decode_service);
        TEST_RUN(test_decode_service_errors);
        TEST_RUN(test_decode_slice);
        TEST_RUN(test_decode_service_cidr);
        TEST_RUN(test_rate);
        TEST_RUN(test_keys);
        TEST_RUN(test_backoff);
        TEST_RUN(test_names);
        TEST_DONE();
}
