/* SPDX-License-Identifier: Apache-2.0 */
/* The envelope, lists, watch frames and Status of the API server's protobuf
 * serialization: read into the trees the JSON path gives, every refusal
 * with its reason. */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "kube/proto.h"
#include "kube/watch-stream.h"
#include "pb-build.h"
#include "test.h"

static void service(struct pbb *out, const char *ns, const char *name, const char *rv) {
        struct pbb md = {.n = 0}, spec = {.n = 0};

        pbb_str(&md, 1, name);
        pbb_str(&md, 3, ns);
        pbb_str(&md, 6, rv);
        pbb_str(&spec, 3, "10.0.0.1");
        out->n = 0;
        pbb_msg(out, 1, &md);
        pbb_msg(out, 2, &spec);
}

static void test_media(void) {
        CHECK(kube_proto_media("application/vnd.kubernetes.protobuf"));
        CHECK(kube_proto_media("application/vnd.kubernetes.protobuf;stream=watch"));
        CHECK(kube_proto_media("Application/Vnd.Kubernetes.Protobuf ; stream=watch"));
        CHECK(!kube_proto_media("application/vnd.kubernetes.protobufx"));
        CHECK(!kube_proto_media("application/json"));
        CHECK(!kube_proto_media(NULL));
        CHECK(kube_proto_is("k8s\0x", 5));
        CHECK(!kube_proto_is("k8s", 3));
        CHECK(!kube_proto_is("{\"kind\"", 7));
}

static void test_object(void) {
        struct pbb st = {.n = 0}, body = {.n = 0}, det = {.n = 0}, cause = {.n = 0};
        char why[256];
        json_t *obj = NULL;

        pbb_str(&st, 2, "Failure");
        pbb_str(&st, 3, "too old resource version: 5 (9)");
        pbb_str(&st, 4, "Expired");
        pbb_str(&cause, 1, "ResourceVersionTooLarge");
        pbb_msg(&det, 4, &cause);
        pbb_msg(&st, 5, &det);
        pbb_int(&st, 6, 410);
        pbb_envelope(&body, "v1", "Status", &st);
        CHECK(kube_proto_object(body.b, body.n, &obj, why, sizeof why) == 0);
        CHECK(json_integer_value(json_object_get(obj, "code")) == 410);
        CHECK_STREQ(json_string_value(json_object_get(obj, "reason")), "Expired");
        CHECK_STREQ(json_string_value(json_object_get(obj, "kind")), "Status");
        CHECK_STREQ(json_string_value(json_object_get(obj, "apiVersion")), "v1");
        CHECK_STREQ(json_string_value(json_object_get(
                            json_array_get(json_object_get(json_object_get(obj, "details"), "causes"), 0), "reason")),
                    "ResourceVersionTooLarge");
        json_decref(obj);

        /* What is refused, and why. */
        body.n = 0;
        pbb_envelope(&body, "v1", "Pod", &st);
        CHECK(kube_proto_object(body.b, body.n, &obj, why, sizeof why) == -EINVAL);
        CHECK_STREQ(why, "kind \"Pod\" is not one kproxy reads");
        body.n = 0;
        pbb_envelope(&body, "v1", "ServiceList", &st);
        CHECK(kube_proto_object(body.b, body.n, &obj, why, sizeof why) == -EINVAL);
        CHECK_STREQ(why, "a list where one object was expected");
        body.n = 0;
        pbb_envelope(&body, "v1", "Status", &st);
        body.n -= 4;                            /* without the two empty strings at the end */
        pbb_str(&body, 3, "gzip");
        CHECK(kube_proto_object(body.b, body.n, &obj, why, sizeof why) == -EINVAL);
        CHECK_STREQ(why, "content encoding \"gzip\" is not one kproxy reads");
        CHECK(kube_proto_object("{}", 2, &obj, why, sizeof why) == -EINVAL);
        CHECK_STREQ(why, "not in the protobuf envelope (no k8s magic)");
        CHECK(kube_proto_object("k8s\0\x0a\x09", 6, &obj, why, sizeof why) == -EINVAL);
        CHECK_STREQ(why, "length past the end");
}

struct seen {
        char names[8][32];
        size_t n;
};

static void on_item(void *userdata, const json_t *item) {
        struct seen *s = userdata;
        if (s->n < 8)
                snprintf(s->names[s->n++], 32, "%s",
                         json_string_value(json_object_get(json_object_get(item, "metadata"), "name")));
}

static void test_list(void) {
        struct pbb lm = {.n = 0}, list = {.n = 0}, body = {.n = 0}, item = {.n = 0};
        struct seen s = {.n = 0};
        char why[256];
        json_t *md = NULL;

        pbb_str(&lm, 2, "77");
        pbb_str(&lm, 3, "next-page");
        pbb_msg(&list, 1, &lm);
        service(&item, "default", "a", "5");
        pbb_msg(&list, 2, &item);
        service(&item, "kube-system", "b", "6");
        pbb_msg(&list, 2, &item);
        pbb_envelope(&body, "v1", "ServiceList", &list);
        CHECK(kube_proto_list(body.b, body.n, &md, on_item, &s, why, sizeof why) == 0);
        CHECK(s.n == 2 && strcmp(s.names[0], "a") == 0 && strcmp(s.names[1], "b") == 0);
        CHECK_STREQ(json_string_value(json_object_get(md, "resourceVersion")), "77");
        CHECK_STREQ(json_string_value(json_object_get(md, "continue")), "next-page");
        json_decref(md);

        /* A bad item: the ones before it passed on, the bad one named. */
        struct pbb bad = {.n = 0}, bmd = {.n = 0}, spec = {.n = 0};
        pbb_str(&bmd, 1, "c");
        pbb_str(&bmd, 3, "default");
        pbb_int(&spec, 3, 9);
        pbb_msg(&bad, 1, &bmd);
        pbb_msg(&bad, 2, &spec);
        pbb_msg(&list, 2, &bad);
        service(&item, "default", "d", "8");
        pbb_msg(&list, 2, &item);
        body.n = 0;
        pbb_envelope(&body, "v1", "ServiceList", &list);
        s.n = 0;
        md = NULL;
        CHECK(kube_proto_list(body.b, body.n, &md, on_item, &s, why, sizeof why) == -EINVAL);
        CHECK_STREQ(why, "list item 2 (default/c): spec.clusterIP: wrong wire type");
        CHECK(s.n == 2 && md == NULL);

        /* No metadata at all: an empty object (the reflector then finds
         * no resourceVersion, as with JSON). One object is no list. */
        list.n = body.n = 0;
        pbb_envelope(&body, "discovery.k8s.io/v1", "EndpointSliceList", &list);
        CHECK(kube_proto_list(body.b, body.n, &md, on_item, &s, why, sizeof why) == 0);
        CHECK(json_is_object(md) && json_object_size(md) == 0);
        json_decref(md);
        body.n = 0;
        pbb_envelope(&body, "v1", "Service", &item);
        CHECK(kube_proto_list(body.b, body.n, &md, on_item, &s, why, sizeof why) == -EINVAL);
        CHECK_STREQ(why, "one object where a list was expected");
}

static void frame(struct pbb *out, const char *type, const struct pbb *object_body) {
        struct pbb raw = {.n = 0};

        out->n = 0;
        pbb_str(out, 1, type);
        if (object_body) {
                pbb_msg(&raw, 1, object_body);
                pbb_msg(out, 2, &raw);
        }
}

static void test_watch_event(void) {
        struct pbb obj = {.n = 0}, env = {.n = 0}, fr = {.n = 0}, st = {.n = 0};
        struct kube_watch_event ev;
        char why[256];

        service(&obj, "default", "web", "31");
        pbb_envelope(&env, "v1", "Service", &obj);
        frame(&fr, "MODIFIED", &env);
        CHECK(kube_proto_watch_event(fr.b, fr.n, &ev, why, sizeof why) == 0);
        CHECK(ev.type == KUBE_WATCH_MODIFIED && ev.object && strcmp(ev.rv, "31") == 0);
        CHECK_STREQ(json_string_value(json_object_get(ev.object, "kind")), "Service");
        kube_watch_event_done(&ev);

        pbb_str(&st, 3, "too old resource version");
        pbb_str(&st, 4, "Expired");
        pbb_int(&st, 6, 410);
        env.n = 0;
        pbb_envelope(&env, "v1", "Status", &st);
        frame(&fr, "ERROR", &env);
        CHECK(kube_proto_watch_event(fr.b, fr.n, &ev, why, sizeof why) == 0);
        CHECK(ev.type == KUBE_WATCH_ERROR && ev.code == 410 && strcmp(ev.reason, "Expired") == 0 && !ev.rv);
        kube_watch_event_done(&ev);

        /* A RawExtension that holds JSON is read as JSON. */
        struct pbb js = {.n = 0};
        const char *text = "{\"kind\":\"Service\",\"metadata\":{\"name\":\"j\",\"resourceVersion\":\"40\"}}";
        memcpy(js.b, text, strlen(text));
        js.n = strlen(text);
        frame(&fr, "ADDED", &js);
        CHECK(kube_proto_watch_event(fr.b, fr.n, &ev, why, sizeof why) == 0);
        CHECK(ev.type == KUBE_WATCH_ADDED && strcmp(ev.rv, "40") == 0);
        kube_watch_event_done(&ev);

        /* No object: incomplete, as a JSON event without one. A bad one: refused. */
        frame(&fr, "ADDED", NULL);
        CHECK(kube_proto_watch_event(fr.b, fr.n, &ev, why, sizeof why) == 0 && ev.type == KUBE_WATCH_INCOMPLETE);
        kube_watch_event_done(&ev);
        env.n = 0;
        pbb_envelope(&env, "v1", "Secret", &st);
        frame(&fr, "ADDED", &env);
        CHECK(kube_proto_watch_event(fr.b, fr.n, &ev, why, sizeof why) == -EINVAL);
        CHECK_STREQ(why, "object: kind \"Secret\" is not one kproxy reads");
        fr.n -= 3;
        CHECK(kube_proto_watch_event(fr.b, fr.n, &ev, why, sizeof why) == -EINVAL);
        CHECK_STREQ(why, "length past the end");
}

static void test_describe(void) {
        struct pbb obj = {.n = 0}, env = {.n = 0}, fr = {.n = 0}, md = {.n = 0}, spec = {.n = 0};
        char out[400];

        /* A huge object: metadata first, then a long spec, cut at 512. */
        pbb_str(&md, 1, "huge");
        pbb_str(&md, 3, "default");
        pbb_msg(&obj, 1, &md);
        for (int i = 0; i < 600; i++)
                pbb_str(&spec, 5, "10.0.0.1");
        pbb_msg(&obj, 2, &spec);
        pbb_envelope(&env, "v1", "Service", &obj);
        frame(&fr, "MODIFIED", &env);
        CHECK_STREQ(kube_proto_event_describe(fr.b, 512, out, sizeof out), "Service default/huge");
        CHECK_STREQ(kube_proto_event_describe(fr.b, 35, out, sizeof out), "Service");   /* up to the kind */
        CHECK_STREQ(kube_proto_event_describe(fr.b, 5, out, sizeof out), "");
        CHECK_STREQ(kube_proto_event_describe("\x12\x05k8s\0\x0a", 9, out, sizeof out), "");
}

int main(void) {
        TEST_RUN(test_media);
        TEST_RUN(test_object);
        TEST_RUN(test_list);
        TEST_RUN(test_watch_event);
        TEST_RUN(test_describe);
        TEST_DONE();
}
