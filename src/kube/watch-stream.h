/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A watch response's body (watch-stream.c), arriving in chunks that split
 * events anywhere: in JSON one event per line, {"type": ..., "object":
 * ...}; in protobuf (framed) one WatchEvent per frame, a 4-byte big-endian
 * length and that many bytes (kube/proto.h reads them). Pure: the
 * reflector (client.c) decides what each event means for its consumer.
 */
#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

typedef struct json_t json_t;

/* The longest event line read: the API server stores no object over 1.5 MiB
 * by default (etcd's request limit; its own is 3 MB), so a longer line is
 * not an object kproxy can use, and parsing it would hold up the loop
 * (jansson takes about 20 ms a megabyte). */
#define KUBE_WATCH_MAX_EVENT ((size_t) 8 << 20)
/* How much of an over-long line is kept to say what it was. */
#define KUBE_WATCH_HEAD 512

/* A watch body being cut into lines or frames. Each byte is looked at
 * once, however the chunks fall (a 16 MB line in 16 KB chunks is not
 * rescanned a thousand times), and an event is copied only when it spans
 * chunks. */
struct kube_watch_stream {
        bool framed;                    /* protobuf frames, not lines: set after a reset */
        struct buf line;                /* the incomplete line (frame) so far */
        size_t max;                     /* longest event passed on; 0: KUBE_WATCH_MAX_EVENT */
        size_t dropping;                /* length so far of an over-long event being skipped; 0: none */
        char head[KUBE_WATCH_HEAD];     /* ... its first bytes */
        size_t head_len;
        unsigned char len_bytes[4];     /* framed: the next frame's length, as far as it came */
        unsigned len_have;
        size_t frame_len;               /* framed: the length of the frame being read */
        size_t skip_left;               /* framed: bytes of an over-long frame still to skip */
};

struct kube_watch_stream_ops {
        /* A complete, non-empty event: a line without its newline, or a
         * frame without its length. false stops the stream: the rest of
         * the chunk is not read. */
        bool (*line)(void *userdata, const char *line, size_t len);
        /* An event longer than max ended: len bytes, the first head_len of
         * them in head. It was not kept. */
        void (*oversize)(void *userdata, size_t len, const char *head, size_t head_len);
};

/* Reads one chunk. Returns false when ops->line stopped the stream. */
bool kube_watch_stream_feed(struct kube_watch_stream *s, const char *data, size_t n,
                            const struct kube_watch_stream_ops *ops, void *userdata);
/* Forgets any partial event (a new watch), and frees its room; lines
 * again until framed is set. */
void kube_watch_stream_reset(struct kube_watch_stream *s);

/* Calls fn with each complete, non-empty line of b (without its newline),
 * in order, and keeps the incomplete last line in b. Stops at the first
 * line fn returns false for, and returns false; that line is consumed too.
 * For a buffer read whole; a stream read in chunks is kube_watch_stream_feed()'s. */
bool kube_watch_stream_lines(struct buf *b, bool (*fn)(void *userdata, const char *line, size_t len),
                             void *userdata);

/* The characters a describe copies of a kind, namespace or name: those of
 * DNS names (and kinds), so that untrusted bytes never reach a log line. */
static inline bool kube_name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

/* What the first bytes of an event say it is about, for a message: "Service
 * ns/name" or as much of it as they hold; "" when nothing. Only name
 * characters are copied (the bytes are untrusted). Returns out. */
const char *kube_watch_event_describe(const char *head, size_t len, char *out, size_t outlen);

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
        const char *rv;                 /* object.metadata.resourceVersion when it is a non-empty
                                         * string (opaque: never parsed), else NULL */
        long long code;                 /* ERROR: the Status's code (0 when missing) */
        const char *message;            /* ERROR: the Status's message, or NULL */
        const char *reason;             /* ERROR: the Status's reason, or NULL */
};

/* Parses line[0..len). Returns 0, or -EINVAL when the line is not a JSON
 * object, with why (whylen bytes) saying what is wrong with it and *ret
 * untouched. */
int kube_watch_event_parse(const char *line, size_t len, struct kube_watch_event *ret, char *why, size_t whylen);
/* The event root holds ({"type": ..., "object": ...}, an object), however
 * it was read; the event takes root over. */
void kube_watch_event_from(json_t *root, struct kube_watch_event *ret);
void kube_watch_event_done(struct kube_watch_event *e);
