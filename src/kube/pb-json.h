/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A protobuf message as the JSON object Go's encoding/json would write of
 * it (pb-json.c), after the API's Go types have read it off the wire: the
 * tree kproxy's decoders (kube/decode.h) already read, so an object means
 * the same, and fails the same way, whichever format it came in. A schema
 * (struct pb_message) names the fields kproxy reads; every other field is
 * skipped. The two ways a zero value differs between the formats are in
 * the schema's flags: a field of a value type with omitempty is left out
 * of the JSON when zero, as Go leaves it out, while a pointer field (*bool,
 * *string: "ready", "ipFamilyPolicy") keeps its zero, which is a value
 * there. Pure.
 */
#include <stddef.h>
#include <stdint.h>

typedef struct json_t json_t;

enum pb_type {
        PB_STRING,
        PB_BOOL,
        PB_INT32,
        PB_INT64,
        PB_MESSAGE,
        PB_MAP,                 /* map<string, string>: entries {key = 1, value = 2} -> an object */
        PB_INT_OR_STRING,       /* intstr.IntOrString {type = 1, intVal = 2, strVal = 3} -> 80 or "http" */
        PB_TIME,                /* metav1.Time {seconds = 1, nanos = 2} -> RFC 3339 in UTC, or null */
};

#define PB_REPEATED 1u          /* an array of them */
#define PB_KEEP_ZERO 2u         /* a pointer in Go, or no omitempty: "", 0 and false are written */

struct pb_message;

struct pb_field_def {
        uint32_t number;
        const char *name;       /* the JSON name */
        enum pb_type type;
        unsigned flags;
        const struct pb_message *message;       /* PB_MESSAGE's */
};

struct pb_message {
        const char *name;
        const struct pb_field_def *fields;
        size_t n_fields;
};

/* Nested messages deeper than this are refused (the API's are far less
 * deep; the schema bounds it anyway). */
#define PB_JSON_MAX_DEPTH 32

/* data[0..len) read as m, into a new object *ret. Returns 0, or -EINVAL
 * with "path: problem" in err (errlen bytes; path as the JSON decoders
 * write it, "spec.ports[1].targetPort"), *ret untouched. Strings that are
 * not UTF-8, or hold a NUL, have those bytes replaced by U+FFFD, as Go's
 * JSON encoder writes them. */
int pb_json_message(const struct pb_message *m, const uint8_t *data, size_t len, json_t **ret, char *err,
                    size_t errlen);
