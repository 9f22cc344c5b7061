/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The API server writes a JSON watch as one event per line; a chunk of the
 * body can end anywhere, within a line or a UTF-8 sequence, so only
 * complete lines are parsed and the rest waits for the next chunk.
 *
 * Principle of the framer: cost in proportion to the bytes that arrive.
 * Only the new chunk is searched for a newline; a line that ends in the
 * chunk it began in is passed on in place; and a line longer than the cap
 * is counted, not kept, so one huge event costs a scan of its bytes rather
 * than a copy, a parse and a stalled loop.
 */
#include "kube/watch-stream.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A resourceVersion longer than this is no version a server made (etcd's
 * are at most 20 digits); kept, it would go into every later URL. */
#define RV_MAX 1024

static void head_keep(struct kube_watch_stream *s, const char *data, size_t n) {
        size_t room = sizeof s->head - s->head_len;
        if (n > room)
                n = room;
        memcpy(s->head + s->head_len, data, n);
        s->head_len += n;
}

/* The line so far plus n more bytes is over the cap: from now on it is only
 * counted, until its newline. */
static void start_dropping(struct kube_watch_stream *s, const char *data, size_t n) {
        s->head_len = 0;
        head_keep(s, s->line.data ? s->line.data : "", s->line.len);
        head_keep(s, data, n);
        s->dropping = s->line.len + n;
        buf_done(&s->line);
}

/* Frames: the length first, then the frame passed on in place when it is
 * whole in the chunk, copied when it spans chunks, skipped over (its head
 * kept) when it is longer than max. */
static bool feed_frames(struct kube_watch_stream *s, const char *data, size_t n,
                        const struct kube_watch_stream_ops *ops, void *userdata, size_t max) {
        while (n > 0) {
                size_t k;

                if (s->skip_left) {
                        k = n < s->skip_left ? n : s->skip_left;
                        head_keep(s, data, k);
                        s->skip_left -= k;
                        if (!s->skip_left) {
                                ops->oversize(userdata, s->dropping, s->head, s->head_len);
                                s->dropping = 0;
                                s->head_len = 0;
                        }
                } else if (s->len_have < 4) {
                        k = 4 - s->len_have < n ? 4 - s->len_have : n;
                        memcpy(s->len_bytes + s->len_have, data, k);
                        s->len_have += (unsigned) k;
                        if (s->len_have == 4) {
                                const unsigned char *b = s->len_bytes;
                                s->frame_len = (size_t) b[0] << 24 | (size_t) b[1] << 16 | (size_t) b[2] << 8 | b[3];
                                if (s->frame_len > max) {
                                        s->dropping = s->skip_left = s->frame_len;
                                        s->head_len = 0;
                                        s->len_have = 0;
                                } else if (s->frame_len == 0) {
                                        s->len_have = 0;        /* nothing to read: as an empty line */
                                }
                        }
                } else if (s->line.len == 0 && n >= s->frame_len) {
                        k = s->frame_len;       /* whole within the chunk: no copy */
                        s->len_have = 0;
                        if (!ops->line(userdata, data, k))
                                return false;
                } else {
                        k = s->frame_len - s->line.len < n ? s->frame_len - s->line.len : n;
                        buf_put(&s->line, data, k);
                        if (s->line.len == s->frame_len) {
                                s->len_have = 0;
                                bool go_on = ops->line(userdata, s->line.data, s->line.len);
                                buf_clear(&s->line);
                                if (!go_on)
                                        return false;
                        }
                }
                data += k;
                n -= k;
        }
        return true;
}

bool kube_watch_stream_feed(struct kube_watch_stream *s, const char *data, size_t n,
                            const struct kube_watch_stream_ops *ops, void *userdata) {
        size_t max = s->max ? s->max : KUBE_WATCH_MAX_EVENT;

        if (s->framed)
                return feed_frames(s, data, n, ops, userdata, max);
        while (n > 0) {
                const char *nl = memchr(data, '\n', n);
                size_t k = nl ? (size_t) (nl - data) : n;

                if (s->dropping) {
                        head_keep(s, data, k);
                        s->dropping += k;
                } else if (s->line.len + k > max) {
                        start_dropping(s, data, k);
                } else if (nl && s->line.len == 0) {
                        /* A whole line within the chunk: no copy. */
                        if (k > 0 && !ops->line(userdata, data, k))
                                return false;
                } else {
                        buf_put(&s->line, data, k);
                        if (nl) {
                                bool go_on = ops->line(userdata, s->line.data, s->line.len);
                                buf_clear(&s->line);
                                if (!go_on)
                                        return false;
                        }
                }
                if (!nl)
                        return true;
                if (s->dropping) {
                        ops->oversize(userdata, s->dropping, s->head, s->head_len);
                        s->dropping = 0;
                        s->head_len = 0;
                }
                data += k + 1;
                n -= k + 1;
        }
        return true;
}

void kube_watch_stream_reset(struct kube_watch_stream *s) {
        buf_done(&s->line);
        s->framed = false;
        s->dropping = 0;
        s->head_len = 0;
        s->len_have = 0;
        s->frame_len = 0;
        s->skip_left = 0;
}

bool kube_watch_stream_lines(struct buf *b, bool (*fn)(void *userdata, const char *line, size_t len),
                             void *userdata) {
        size_t start = 0;
        bool go_on = true;

        while (go_on && start < b->len) {
                const char *nl = memchr(b->data + start, '\n', b->len - start);
                if (!nl)
                        break;
                size_t end = (size_t) (nl - b->data);
                if (end > start)
                        go_on = fn(userdata, b->data + start, end - start);
                start = end + 1;
        }
        if (start > 0) {
                memmove(b->data, b->data + start, b->len - start);
                buf_truncate(b, b->len - start);
        }
        return go_on;
}

/* The string value of the first "key":"..." in text, if it is made of name
 * characters (a-z, 0-9, '-', '.', and for kinds A-Z); "" otherwise. */
static void scan_string(const char *text, size_t len, const char *key, char *out, size_t outlen) {
        char pat[32];
        int plen = snprintf(pat, sizeof pat, "\"%s\":\"", key);
        const char *p = memmem(text, len, pat, (size_t) plen);
        size_t i = 0;

        out[0] = '\0';
        if (!p)
                return;
        p += plen;
        for (const char *end = text + len; p < end && *p != '"' && i + 1 < outlen; p++, i++) {
                if (!kube_name_char(*p)) {
                        out[0] = '\0';
                        return;
                }
                out[i] = *p;
        }
        out[i] = '\0';
}

const char *kube_watch_event_describe(const char *head, size_t len, char *out, size_t outlen) {
        char kind[64], ns[64], name[254];
        const char *md = memmem(head, len, "\"metadata\":{", 12);

        scan_string(head, len, "kind", kind, sizeof kind);
        ns[0] = name[0] = '\0';
        /* The API server writes metadata's name and namespace first. */
        if (md) {
                size_t off = (size_t) (md - head);
                scan_string(md, len - off, "name", name, sizeof name);
                scan_string(md, len - off, "namespace", ns, sizeof ns);
        }
        snprintf(out, outlen, "%s%s%s%s%s", kind, *kind && (*ns || *name) ? " " : "", ns, *ns ? "/" : "", name);
        return out;
}

static const char *const type_names[] = {
        [KUBE_WATCH_ADDED] = "ADDED",
        [KUBE_WATCH_MODIFIED] = "MODIFIED",
        [KUBE_WATCH_DELETED] = "DELETED",
        [KUBE_WATCH_BOOKMARK] = "BOOKMARK",
        [KUBE_WATCH_ERROR] = "ERROR",
};

int kube_watch_event_parse(const char *line, size_t len, struct kube_watch_event *ret, char *why, size_t whylen) {
        json_error_t err;
        json_t *root = json_loadb(line, len, 0, &err);

        if (!root || !json_is_object(root)) {
                snprintf(why, whylen, "%s", root ? "not an object" : err.text);
                json_decref(root);
                return -EINVAL;
        }
        kube_watch_event_from(root, ret);
        return 0;
}

void kube_watch_event_from(json_t *root, struct kube_watch_event *ret) {
        struct kube_watch_event e = {.root = root, .type = KUBE_WATCH_UNKNOWN};

        e.type_name = json_string_value(json_object_get(e.root, "type"));
        e.object = json_object_get(e.root, "object");
        if (!json_is_object(e.object))
                e.object = NULL;
        /* Opaque text: whatever the server sent, unless it is no usable
         * version at all (empty, not a string, absurdly long). jansson
         * refuses a NUL in a string, so the length is the text's. */
        const json_t *rv = json_object_get(json_object_get(e.object, "metadata"), "resourceVersion");
        if (json_string_length(rv) > 0 && json_string_length(rv) <= RV_MAX)
                e.rv = json_string_value(rv);
        if (!e.type_name || !e.object)
                e.type = KUBE_WATCH_INCOMPLETE;
        else
                for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
                        if (strcmp(e.type_name, type_names[i]) == 0)
                                e.type = (enum kube_watch_event_type) i;
        if (e.type == KUBE_WATCH_ERROR) {
                e.code = json_integer_value(json_object_get(e.object, "code"));
                e.message = json_string_value(json_object_get(e.object, "message"));
                e.reason = json_string_value(json_object_get(e.object, "reason"));
        }
        *ret = e;
}

void kube_watch_event_done(struct kube_watch_event *e) {
        json_decref(e->root);
        *e = (struct kube_watch_event) {};
}
