/* SPDX-License-Identifier: Apache-2.0 */
/* kube/decode-field: the typed readers of optional JSON fields every
 * decoder uses, and the "path.key: problem" messages they leave in err. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

#include "kube/decode-field.h"
#include "kube/decode.h"
#include "model/model.h"
#include "test.h"

static json_t *parse(const char *text) {
        json_t *j = json_loads(text, 0, NULL);

        if (!j)
                abort();
        return j;
}

static void test_absent_null_and_types(void) {
        json_t *o = parse("{\"s\":\"x\",\"n\":null,\"i\":7,\"b\":false,\"a\":[1],\"o\":{}}");
        char err[KUBE_ERRLEN] = "";
        const json_t *v = (const json_t *) 1;
        const char *s = "stale";
        bool b = false;

        /* Absent and null are the same: nothing, and no error. */
        CHECK(kube_field_str(o, "missing", &s, err, "spec.") == 0 && s == NULL);
        s = "stale";
        CHECK(kube_field_str(o, "n", &s, err, "spec.") == 0 && s == NULL);
        CHECK(kube_field_str(o, "s", &s, err, "spec.") == 0 && s && strcmp(s, "x") == 0);
        CHECK(kube_field_array(o, "n", &v, err, "") == 0 && v == NULL);
        CHECK(kube_field_object(o, "missing", &v, err, "") == 0 && v == NULL);
        CHECK(kube_field_array(o, "a", &v, err, "") == 0 && json_is_array(v));
        CHECK(kube_field_object(o, "o", &v, err, "") == 0 && json_is_object(v));
        /* A boolean falls back to its default. */
        CHECK(kube_field_bool(o, "missing", true, &b, err, "c.") == 0 && b);
        CHECK(kube_field_bool(o, "n", true, &b, err, "c.") == 0 && b);
        CHECK(kube_field_bool(o, "b", true, &b, err, "c.") == 0 && !b);
        CHECK_STREQ(err, "");

        /* Another type names the path and the key. */
        CHECK(kube_field_str(o, "i", &s, err, "spec.ports[2].") == -EINVAL);
        CHECK_STREQ(err, "spec.ports[2].i: must be a string");
        CHECK(kube_field_bool(o, "s", true, &b, err, "c.") == -EINVAL);
        CHECK_STREQ(err, "c.s: must be a boolean");
        CHECK(kube_field_array(o, "o", &v, err, "spec.") == -EINVAL);
        CHECK_STREQ(err, "spec.o: must be a list");
        CHECK(kube_field_object(o, "a", &v, err, "") == -EINVAL);
        CHECK_STREQ(err, "a: must be an object");
        json_decref(o);
}

static void test_integers(void) {
        json_t *o = parse("{\"p\":80,\"big\":70000,\"f\":1.5,\"neg\":-1}");
        char err[KUBE_ERRLEN] = "";
        long long v = -5;
        bool set = true;

        CHECK(kube_field_int(o, "missing", 1, 65535, &v, &set, err, "spec.") == 0 && !set && v == -5);
        CHECK(kube_field_int(o, "p", 1, 65535, &v, &set, err, "spec.") == 0 && set && v == 80);
        CHECK(kube_field_int(o, "big", 1, 65535, &v, &set, err, "spec.ports[1].") == -EINVAL);
        CHECK_STREQ(err, "spec.ports[1].big: 70000 is out of range 1..65535");
        CHECK(kube_field_int(o, "neg", 0, 10, &v, &set, err, "") == -EINVAL);
        CHECK_STREQ(err, "neg: -1 is out of range 0..10");
        CHECK(kube_field_int(o, "f", 0, 10, &v, &set, err, "x.") == -EINVAL);
        CHECK_STREQ(err, "x.f: must be an integer");
        json_decref(o);
}

static void test_meta(void) {
        char err[KUBE_ERRLEN] = "";
        const json_t *labels = NULL;
        char *key = NULL;
        json_t *o;

        /* An object without a namespace is keyed by its name, as
         * client-go's MetaNamespaceKeyFunc keys it (and so the watch
         * reports its deletion); the labels are handed back. */
        o = parse("{\"metadata\":{\"name\":\"web\",\"labels\":{\"app\":\"w\"}}}");
        CHECK(kube_field_meta(o, true, &key, &labels, err) == 0);
        CHECK_STREQ(key, "web");
        CHECK_STREQ(kube_field_label(labels, "app"), "w");
        CHECK(kube_field_label(labels, "other") == NULL);
        free(key);
        key = NULL;
        /* Cluster-scoped: the name alone; dots are allowed in it. */
        CHECK(kube_field_meta(o, false, &key, &labels, err) == 0);
        CHECK_STREQ(key, "web");
        free(key);
        key = NULL;
        json_decref(o);

        o = parse("{\"metadata\":{\"name\":\"node-1.example\",\"namespace\":\"shop\",\"labels\":{\"n\":1}}}");
        CHECK(kube_field_meta(o, true, &key, &labels, err) == 0);
        CHECK_STREQ(key, "shop/node-1.example");
        CHECK(kube_field_label(labels, "n") == NULL);   /* not a string */
        free(key);
        key = NULL;
        json_decref(o);
        /* An empty namespace is none. */
        o = parse("{\"metadata\":{\"name\":\"web\",\"namespace\":\"\"}}");
        CHECK(kube_field_meta(o, true, &key, &labels, err) == 0);
        CHECK_STREQ(key, "web");
        free(key);
        key = NULL;
        json_decref(o);

        o = parse("{\"metadata\":{\"name\":\"Web\"}}");
        CHECK(kube_field_meta(o, true, &key, &labels, err) == -EINVAL && key == NULL);
        CHECK_STREQ(err, "metadata.name: \"Web\" is not a valid name");
        json_decref(o);
        o = parse("{\"metadata\":{\"name\":\"web\",\"namespace\":\"a.b\"}}");
        CHECK(kube_field_meta(o, true, &key, &labels, err) == -EINVAL);
        CHECK_STREQ(err, "metadata.namespace: \"a.b\" is not a valid namespace");
        json_decref(o);
        o = parse("{\"metadata\":{\"namespace\":\"a\"}}");
        CHECK(kube_field_meta(o, true, &key, &labels, err) == -EINVAL);
        CHECK_STREQ(err, "metadata.name: missing");
        json_decref(o);
        o = parse("{\"spec\":{}}");
        CHECK(kube_field_meta(o, true, &key, &labels, err) == -EINVAL);
        CHECK_STREQ(err, "metadata: missing");
        json_decref(o);
        o = parse("[]");
        CHECK(kube_field_meta(o, true, &key, &labels, err) == -EINVAL);
        CHECK_STREQ(err, "object: must be a mapping");
        json_decref(o);
}

static void test_protocol_and_port_names(void) {
        json_t *o = parse("{\"a\":{},\"b\":{\"protocol\":\"UDP\"},\"c\":{\"protocol\":\"udp\"},\"d\":{\"protocol\":3}}");
        char err[KUBE_ERRLEN] = "";
        enum l4_proto p = L4_SCTP;

        CHECK(kube_field_protocol(json_object_get(o, "a"), &p, err, "ports[0].") == 0 && p == L4_TCP);
        CHECK(kube_field_protocol(json_object_get(o, "b"), &p, err, "ports[0].") == 0 && p == L4_UDP);
        CHECK(kube_field_protocol(json_object_get(o, "c"), &p, err, "ports[1].") == -EINVAL);
        CHECK_STREQ(err, "ports[1].protocol: unknown protocol \"udp\" (want TCP, UDP or SCTP)");
        CHECK(kube_field_protocol(json_object_get(o, "d"), &p, err, "ports[2].") == -EINVAL);
        CHECK_STREQ(err, "ports[2].protocol: must be a string");
        json_decref(o);

        CHECK(kube_field_port_name("") == 0);
        CHECK(kube_field_port_name("http") == 0);
        CHECK(kube_field_port_name("http-alt2") == 0);
        CHECK(kube_field_port_name("Http") < 0);
        CHECK(kube_field_port_name("a b") < 0);
        CHECK(kube_field_port_name("-http") < 0);
}

static void test_fail_is_bounded(void) {
        char err[KUBE_ERRLEN];
        char long_path[2 * KUBE_ERRLEN];

        memset(long_path, 'p', sizeof long_path - 1);
        long_path[sizeof long_path - 1] = '\0';
        CHECK(kube_field_fail(err, "%s: too long", long_path) == -EINVAL);
        CHECK(strlen(err) == KUBE_ERRLEN - 1);
}

/* A value quoted in the message keeps it one line: control characters
 * as Go's %q writes them, still bounded (found by tests/fuzz/fuzz-decode.c). */
static void test_fail_escapes_controls(void) {
        char err[KUBE_ERRLEN];
        char many[KUBE_ERRLEN];

        CHECK(kube_field_fail(err, "name: \"%s\" is not valid", "a\nE0101 b\t\r\x01\x7f") == -EINVAL);
        CHECK_STREQ(err, "name: \"a\\nE0101 b\\t\\r\\x01\\x7f\" is not valid");
        memset(many, '\n', sizeof many - 1);
        many[sizeof many - 1] = '\0';
        kube_field_fail(err, "%s", many);
        CHECK(strlen(err) == KUBE_ERRLEN - 2 && !strchr(err, '\n'));
}

int main(void) {
        TEST_RUN(test_absent_null_and_types);
        TEST_RUN(test_integers);
        TEST_RUN(test_meta);
        TEST_RUN(test_protocol_and_port_names);
        TEST_RUN(test_fail_is_bounded);
        TEST_RUN(test_fail_escapes_controls);
        TEST_DONE();
}
