/* SPDX-License-Identifier: Apache-2.0 */
/* Every field of kproxy's protobuf schema against upstream's facts
 * (docs/k8s-wire-fields.txt, read out of kubectl's descriptors): its number
 * under its name, and its type. A field newer than that kubectl is allowed
 * only by name, below. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kube/pb-json.h"
#include "kube/proto-schema.h"
#include "test.h"

#define FACTS "docs/k8s-wire-fields.txt"

/* Not in kubectl 1.32's descriptors (discovery/v1 ForNode came in 1.33). */
static const char *const newer[] = {"EndpointHints.forNodes", "ForNode.name"};

static char facts[64 * 1024];

static bool load_facts(void) {
        FILE *f = fopen(FACTS, "r");   /* make check runs the tests from the tree's top */
        size_t n;

        if (!f)
                return false;
        n = fread(facts, 1, sizeof facts - 1, f);
        fclose(f);
        facts[n] = '\0';
        return n > 0;
}

/* The facts' line for message name's field (".Name\n" then indented
 * lines), the first message of that name that has fields; NULL if none. */
static const char *fact(const char *message, const char *field) {
        char head[128];
        snprintf(head, sizeof head, ".%s\n", message);
        for (const char *p = facts; (p = strstr(p, head)); p += strlen(head)) {
                const char *body = p + strlen(head);
                while (*body == ' ') {
                        const char *eol = strchr(body, '\n');
                        char num[16], name[64];
                        if (sscanf(body, "%15s %63s", num, name) == 2 && strcmp(name, field) == 0)
                                return body;
                        if (!eol)
                                break;
                        body = eol + 1;
                }
        }
        return NULL;
}

static bool is_newer(const char *message, const char *field) {
        char key[128];
        snprintf(key, sizeof key, "%s.%s", message, field);
        for (size_t i = 0; i < sizeof newer / sizeof newer[0]; i++)
                if (strcmp(newer[i], key) == 0)
                        return true;
        return false;
}

static const char *const type_words[] = {
        [PB_STRING] = "string",    [PB_BOOL] = "bool",      [PB_INT32] = "int32",         [PB_INT64] = "int64",
        [PB_MESSAGE] = "message", [PB_MAP] = "message",    [PB_INT_OR_STRING] = "message", [PB_TIME] = "message",
};

static unsigned checked;

static void check_message(const struct pb_message *m, unsigned depth) {
        CHECK(depth < 10);
        for (size_t i = 0; i < m->n_fields && depth < 10; i++) {
                const struct pb_field_def *d = &m->fields[i];
                const char *line = fact(m->name, d->name);
                if (i > 0)
                        CHECK(d->number > m->fields[i - 1].number);     /* in number order */
                if (!line) {
                        if (!is_newer(m->name, d->name)) {
                                fprintf(stderr, "  %s.%s: not in " FACTS "\n", m->name, d->name);
                                CHECK(!"field in the facts");
                        }
                } else {
                        unsigned num = 0;
                        char name[64], label[16], type[16];
                        CHECK(sscanf(line, "%u %63s %15s %15s", &num, name, label, type) == 4);
                        if (num != d->number || strcmp(type, type_words[d->type]) != 0 ||
                            (strcmp(label, "repeated") == 0) != ((d->flags & PB_REPEATED) || d->type == PB_MAP)) {
                                fprintf(stderr, "  %s.%s: schema %u %s%s, facts %u %s %s\n", m->name, d->name,
                                        d->number, d->flags & PB_REPEATED ? "repeated " : "", type_words[d->type],
                                        num, label, type);
                                CHECK(!"field as the facts have it");
                        }
                        /* The special messages are the ones named so. */
                        if (d->type == PB_TIME)
                                CHECK(strstr(line, "meta.v1.Time\n") != NULL);
                        if (d->type == PB_INT_OR_STRING)
                                CHECK(strstr(line, "intstr.IntOrString\n") != NULL);
                        if (d->type == PB_MAP)
                                CHECK(strstr(line, "Entry\n") != NULL);
                }
                checked++;
                if (d->type == PB_MESSAGE)
                        check_message(d->message, depth + 1);
        }
}

static void test_against_facts(void) {
        bool list;

        if (!load_facts()) {
                CHECK(!"facts readable: " FACTS " from the tree's top");
                return;
        }
        check_message(&kube_proto_service, 0);
        check_message(&kube_proto_endpoint_slice, 0);
        check_message(&kube_proto_node, 0);
        check_message(&kube_proto_service_cidr, 0);
        check_message(&kube_proto_status, 0);
        check_message(&kube_proto_list_meta, 0);
        CHECK(checked > 80);
        /* The lists hold their items as field 2, the metadata as 1. */
        CHECK(fact("ServiceList", "items") && strncmp(fact("ServiceList", "items"), "    2 ", 6) == 0);
        CHECK(fact("EndpointSliceList", "metadata") &&
              strncmp(fact("EndpointSliceList", "metadata"), "    1 ", 6) == 0);
        CHECK(kube_proto_schema("ServiceList", 11, &list) == &kube_proto_service && list);
        CHECK(kube_proto_schema("Node", 4, &list) == &kube_proto_node && !list);
        CHECK(kube_proto_schema("StatusList", 10, &list) == NULL);
        CHECK(kube_proto_schema("List", 4, &list) == NULL);
        CHECK(kube_proto_schema("Pod", 3, &list) == NULL);
}

int main(void) {
        TEST_RUN(test_against_facts);
        TEST_DONE();
}
