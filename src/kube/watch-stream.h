/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A watch response's body (watch-stream.c): one JSON event per line,
 * {"type": ..., "object": ...}, arriving in chunks that split lines
 * anywhere. Pure: the reflector (client.c) decides what each event means
 * for its consumer.
 */
#include <stdbool.h>
#include <stddef.h>

typedef struct json_t json_t;
struct buf;

/* Calls fn with each complete, non-empty line of b (without its newline),
 * in order, and keeps the incomplete last line in b for the next chunk.
 * Stops at the first line fn returns false for, and returns false; that
 * line is consumed too. */
bool kube_watch_stream_lines(struct buf *b, bool (*fn)(void *userdata, const char *line, size_t len),
                             void *userdata);

enum kube_watch_event_type {
        KUBE_WATCH_ADDED,
        KUBE_WATCH_MODIFIED,
        KUBE_WATCH_DELETED,
        KUBE_WATCH_BOOKMARK,            /* only the resourceVersion counts */
        KUBE_WATCH_ERROR,               /* object is a Status: code, message */
        KUBE_WATCH_UNKNOWN,             /* a type this reader does not know: type_name */
        KUBE_WATCH_INCOMPLETE,          /* no type, or no object */
};

/* One event. The pointers borrow from root, which the event owns. */
struct kube_watch_event {
        json_t *root;
        enum kube_watch_event_type type;
        const char *type_name;          /* as sent; NULL when missing */
        const json_t *object;           /* NULL unless an object was sent */
        const char *rv;                 /* object.metadata.resourceVersion, or NULL */
        long long code;                 /* ERROR: the Status's code (0 when missing) */
        const char *message;            /* ERROR: the Status's message, or NULL */
};

/* Parses line[0..len). Returns 0, or -EINVAL when the line is not a JSON
 * object, with why (whylen bytes) saying what is wrong with it and *ret
 * untouched. */
int kube_watch_event_parse(const char *line, size_t len, struct kube_watch_event *ret, char *why, size_t whylen);
void kube_watch_event_done(struct kube_watch_event *e);
