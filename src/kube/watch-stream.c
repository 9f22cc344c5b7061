/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The API server writes a JSON watch as one event per line; a chunk of the
 * body can end anywhere, within a line or a UTF-8 sequence, so only
 * complete lines are parsed and the rest waits for the next chunk.
 */
#include "kube/watch-stream.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "util/buf.h"

bool kube_watch_stream_lines(struct buf *b, bool (*fn)(void *userdata, const char *line, size_t len),
                             void *userdata) {
        size_t start = 0;
        bool go_on = true;

        for (size_t i = 0; i < b->len && go_on; i++) {
                if (b->data[i] != '\n')
                        continue;
                if (i > start)
                        go_on = fn(userdata, b->data + start, i - start);
                start = i + 1;
        }
        if (start > 0) {
                memmove(b->data, b->data + start, b->len - start);
                buf_truncate(b, b->len - start);
        }
        return go_on;
}

static const char *const type_names[] = {
        [KUBE_WATCH_ADDED] = "ADDED",
        [KUBE_WATCH_MODIFIED] = "MODIFIED",
        [KUBE_WATCH_DELETED] = "DELETED",
        [KUBE_WATCH_BOOKMARK] = "BOOKMARK",
        [KUBE_WATCH_ERROR] = "ERROR",
};

int kube_watch_event_parse(const char *line, size_t len, struct kube_watch_event *ret, char *why, size_t whylen) {
        struct kube_watch_event e = {.type = KUBE_WATCH_UNKNOWN};
        json_error_t err;

        e.root = json_loadb(line, len, 0, &err);
        if (!e.root || !json_is_object(e.root)) {
                snprintf(why, whylen, "%s", e.root ? "not an object" : err.text);
                json_decref(e.root);
                return -EINVAL;
        }
        e.type_name = json_string_value(json_object_get(e.root, "type"));
        e.object = json_object_get(e.root, "object");
        if (!json_is_object(e.object))
                e.object = NULL;
        e.rv = json_string_value(json_object_get(json_object_get(e.object, "metadata"), "resourceVersion"));
        if (!e.type_name || !e.object)
                e.type = KUBE_WATCH_INCOMPLETE;
        else
                for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
                        if (strcmp(e.type_name, type_names[i]) == 0)
                                e.type = (enum kube_watch_event_type) i;
        if (e.type == KUBE_WATCH_ERROR) {
                e.code = json_integer_value(json_object_get(e.object, "code"));
                e.message = json_string_value(json_object_get(e.object, "message"));
        }
        *ret = e;
        return 0;
}

void kube_watch_event_done(struct kube_watch_event *e) {
        json_decref(e->root);
        *e = (struct kube_watch_event) {};
}
