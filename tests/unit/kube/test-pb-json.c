/* SPDX-License-Identifier: Apache-2.0 */
/* Protobuf objects as the JSON Go would write of them: omitempty and
 * pointer zeros, IntOrString, Time, maps, the U+FFFD of bad text; fields
 * the schema lacks skipped, whatever their wire type; each problem named by
 * its path. The schemas are the real ones (kube/proto-schema.h). */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "kube/pb-json.h"
#include "kube/proto-schema.h"
#include "pb-build.h"
#include "test.h"

static json_t *decode(const struct pb_message *m, const struct pbb *p, char *err) {
        json_t *obj = NULL;
        err[0] = '\0';
        return pb_json_message(m, p->b, p->n, &obj, err, 256) == 0 ? obj : NULL;
}

/* obj's JSON text, sorted, compact, for comparing whole trees. */
static bool json_is(const json_t *obj, const char *want) {
        char *got = json_dumps(obj, JSON_SORT_KEYS | JSON_COMPACT);
        json_t *w = json_loads(want, 0, NULL);
        char *want_sorted = json_dumps(w, JSON_SORT_KEYS | JSON_COMPACT);
        bool ok = got && want_sorted && strcmp(got, want_sorted) == 0;
        if (!ok)
                fprintf(stderr, "  got:  %s\n  want: %s\n", got ? got : "(null)", want_sorted ? want_sorted : want);
        free(got);
        free(want_sorted);
        json_decref(w);
        return ok;
}

static void test_service(void) {
        struct pbb svc = {.n = 0}, md = {.n = 0}, spec = {.n = 0}, port = {.n = 0}, tp = {.n = 0}, e = {.n = 0},
                   port2 = {.n = 0}, tp2 = {.n = 0};
        char err[256];

        pbb_str(&md, 1, "web");
        pbb_str(&md, 2, "");                    /* generateName: not in the schema */
        pbb_str(&md, 3, "default");
        pbb_str(&md, 6, "42");
        pbb_str(&e, 1, "app");
        pbb_str(&e, 2, "web");
        pbb_msg(&md, 11, &e);
        pbb_int(&md, 7, 3);                     /* generation: skipped */
        pbb_str(&port, 1, "");
        pbb_str(&port, 2, "TCP");
        pbb_int(&port, 3, 80);
        pbb_int(&tp, 1, 0);
        pbb_int(&tp, 2, 8080);
        pbb_msg(&port, 4, &tp);
        pbb_int(&port, 5, 0);                   /* nodePort 0: omitempty */
        pbb_str(&port2, 1, "dns");
        pbb_str(&port2, 2, "UDP");
        pbb_int(&port2, 3, 53);
        pbb_int(&tp2, 1, 1);
        pbb_str(&tp2, 3, "dns-port");
        pbb_msg(&port2, 4, &tp2);
        pbb_msg(&spec, 1, &port);
        pbb_msg(&spec, 1, &port2);
        pbb_str(&spec, 3, "10.0.0.1");
        pbb_str(&spec, 4, "ClusterIP");
        pbb_str(&spec, 5, "");                  /* a repeated element keeps its "" */
        pbb_str(&spec, 10, "");                 /* externalName "": left out */
        pbb_str(&spec, 11, "");                 /* externalTrafficPolicy "": left out */
        pbb_int(&spec, 12, 0);
        pbb_int(&spec, 13, 0);
        pbb_str(&spec, 17, "");                 /* ipFamilyPolicy: a pointer, "" kept */
        pbb_str(&spec, 18, "10.0.0.1");
        pbb_tag(&spec, 99, 5);                  /* unknown fields of every wire type */
        pbb_byte(&spec, 1), pbb_byte(&spec, 2), pbb_byte(&spec, 3), pbb_byte(&spec, 4);
        pbb_tag(&spec, 98, 1);
        for (int i = 0; i < 8; i++)
                pbb_byte(&spec, 0);
        pbb_tag(&spec, 97, 3);
        pbb_int(&spec, 1, 1);
        pbb_tag(&spec, 97, 4);
        pbb_str(&spec, 96, "?");
        pbb_msg(&svc, 1, &md);
        pbb_msg(&svc, 2, &spec);

        json_t *obj = decode(&kube_proto_service, &svc, err);
        CHECK(obj != NULL);
        CHECK(json_is(obj, "{\"metadata\":{\"name\":\"web\",\"namespace\":\"default\",\"resourceVersion\":\"42\","
                           "\"labels\":{\"app\":\"web\"}},\"spec\":{\"ports\":[{\"protocol\":\"TCP\",\"port\":80,"
                           "\"targetPort\":8080},{\"name\":\"dns\",\"protocol\":\"UDP\",\"port\":53,"
                           "\"targetPort\":\"dns-port\"}],\"clusterIP\":\"10.0.0.1\",\"type\":\"ClusterIP\","
                           "\"externalIPs\":[\"\"],\"ipFamilyPolicy\":\"\",\"clusterIPs\":[\"10.0.0.1\"]}}"));
        json_decref(obj);
}

static void test_pointer_zeros(void) {
        struct pbb slice = {.n = 0}, ep = {.n = 0}, cond = {.n = 0}, hints = {.n = 0}, fz = {.n = 0}, port = {.n = 0};
        char err[256];

        pbb_int(&cond, 1, 0);                   /* ready: false, which is not "missing" */
        pbb_int(&cond, 3, 1);
        pbb_str(&ep, 1, "10.1.0.1");
        pbb_msg(&ep, 2, &cond);
        pbb_str(&ep, 6, "");                    /* nodeName "" is a value */
        pbb_str(&fz, 1, "zone-a");
        pbb_msg(&hints, 1, &fz);
        pbb_msg(&ep, 8, &hints);
        pbb_msg(&slice, 2, &ep);
        pbb_str(&port, 1, "");
        pbb_int(&port, 3, 0);
        pbb_msg(&slice, 3, &port);
        pbb_str(&slice, 4, "IPv4");
        json_t *obj = decode(&kube_proto_endpoint_slice, &slice, err);
        CHECK(json_is(obj, "{\"endpoints\":[{\"addresses\":[\"10.1.0.1\"],\"conditions\":{\"ready\":false,"
                           "\"terminating\":true},\"nodeName\":\"\",\"hints\":{\"forZones\":[{\"name\":\"zone-a\"}]}}],"
                           "\"ports\":[{\"name\":\"\",\"port\":0}],\"addressType\":\"IPv4\"}"));
        json_decref(obj);
}

static void test_time_and_text(void) {
        struct pbb node = {.n = 0}, md = {.n = 0}, ts = {.n = 0}, bad = {.n = 0};
        char err[256];

        pbb_int(&ts, 1, 1714979289);            /* 2024-05-06T07:08:09Z */
        pbb_int(&ts, 2, 5000);                  /* nanoseconds: not in Go's JSON */
        pbb_msg(&md, 9, &ts);
        pbb_bytes(&md, 1, "n\xff\x00x\xc3\xa9", 6);     /* invalid byte, NUL, then valid é */
        pbb_msg(&node, 1, &md);
        json_t *obj = decode(&kube_proto_node, &node, err);
        CHECK(json_is(obj, "{\"metadata\":{\"deletionTimestamp\":\"2024-05-06T07:08:09Z\","
                           "\"name\":\"n\xef\xbf\xbd\xef\xbf\xbdx\xc3\xa9\"}}"));
        json_decref(obj);

        /* A zero time is no bytes: null, as Go writes it. */
        node.n = md.n = 0;
        pbb_bytes(&md, 9, "", 0);
        pbb_msg(&node, 1, &md);
        obj = decode(&kube_proto_node, &node, err);
        CHECK(json_is(obj, "{\"metadata\":{\"deletionTimestamp\":null}}"));
        json_decref(obj);

        /* Past year 9999: refused, as Go's JSON refuses it. */
        node.n = md.n = 0;
        pbb_int(&bad, 1, 253402300800ull);
        pbb_msg(&md, 9, &bad);
        pbb_msg(&node, 1, &md);
        CHECK(decode(&kube_proto_node, &node, err) == NULL);
        CHECK_STREQ(err, "metadata.deletionTimestamp: a time outside years 0-9999");
}

static void test_errors(void) {
        struct pbb svc = {.n = 0}, spec = {.n = 0}, port = {.n = 0}, tp = {.n = 0};
        char err[256];

        /* A string sent as a varint. */
        pbb_int(&spec, 3, 1);
        pbb_msg(&svc, 2, &spec);
        CHECK(decode(&kube_proto_service, &svc, err) == NULL);
        CHECK_STREQ(err, "spec.clusterIP: wrong wire type");

        /* The second port's IntOrString of type 7. */
        svc.n = spec.n = 0;
        pbb_int(&port, 3, 80);
        pbb_msg(&spec, 1, &port);
        pbb_int(&tp, 1, 7);
        pbb_msg(&port, 4, &tp);
        pbb_msg(&spec, 1, &port);
        pbb_msg(&svc, 2, &spec);
        CHECK(decode(&kube_proto_service, &svc, err) == NULL);
        CHECK_STREQ(err, "spec.ports[1].targetPort: IntOrString of neither type");

        /* Cut inside spec: the message that holds the cut is named. */
        svc.n = spec.n = 0;
        pbb_str(&spec, 3, "10.0.0.1");
        spec.n -= 2;
        pbb_msg(&svc, 2, &spec);
        CHECK(decode(&kube_proto_service, &svc, err) == NULL);
        CHECK_STREQ(err, "spec: length past the end");

        /* At the top. */
        svc.n = 0;
        pbb_byte(&svc, 0x0a);
        CHECK(decode(&kube_proto_service, &svc, err) == NULL);
        CHECK_STREQ(err, "truncated varint");
}

static void test_repeated_and_last_wins(void) {
        struct pbb svc = {.n = 0}, md = {.n = 0}, e = {.n = 0};
        char err[256];

        pbb_str(&md, 1, "a");
        pbb_str(&md, 1, "b");                   /* a scalar sent twice: the last */
        pbb_str(&e, 1, "k");
        pbb_str(&e, 2, "1");
        pbb_msg(&md, 12, &e);
        e.n = 0;
        pbb_str(&e, 1, "k");
        pbb_str(&e, 2, "2");                    /* a map key sent twice: the last */
        pbb_msg(&md, 12, &e);
        e.n = 0;
        pbb_str(&e, 2, "v");                    /* an entry without a key: "" */
        pbb_msg(&md, 12, &e);
        pbb_msg(&svc, 1, &md);
        json_t *obj = decode(&kube_proto_service, &svc, err);
        CHECK(json_is(obj, "{\"metadata\":{\"name\":\"b\",\"annotations\":{\"k\":\"2\",\"\":\"v\"}}}"));
        json_decref(obj);

        /* Many elements: each one costs input, so the tree grows with it. */
        svc.n = 0;
        struct pbb spec = {.n = 0};
        for (int i = 0; i < 3000; i++)
                pbb_str(&spec, 5, "");
        pbb_msg(&svc, 2, &spec);
        obj = decode(&kube_proto_service, &svc, err);
        CHECK(json_array_size(json_object_get(json_object_get(obj, "spec"), "externalIPs")) == 3000);
        json_decref(obj);
}

int main(void) {
        TEST_RUN(test_service);
        TEST_RUN(test_pointer_zeros);
        TEST_RUN(test_time_and_text);
        TEST_RUN(test_errors);
        TEST_RUN(test_repeated_and_last_wins);
        TEST_DONE();
}
