/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One walk over the wire bytes, each field the schema names turned into its
 * JSON value as it is met; nothing else is kept. What Go's types and its
 * JSON encoder would do in between is written where it happens: omitempty,
 * IntOrString, Time, and the replacement of bytes that are not UTF-8.
 */
#include "kube/pb-json.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kube/pb-wire.h"
#include "util/buf.h"

struct walk {
        char path[256];         /* "spec.ports[1]." while inside that port */
        size_t path_len;
        unsigned depth;
        char *err;
        size_t errlen;
};

/* "path.name: why"; without a name, the message's own path ("spec: why"). */
static int fail(struct walk *w, const char *name, const char *why) {
        int n = (int) w->path_len - (!name && w->path_len);     /* no trailing '.' */

        snprintf(w->err, w->errlen, "%.*s%s%s%s", n, w->path, name ? name : "", n || name ? ": " : "", why);
        return -EINVAL;
}

/* The length of the valid UTF-8 sequence at p (n bytes left), or 0 when
 * it is none: an overlong form, a surrogate, past U+10FFFF, or cut. */
static size_t utf8_seq(const uint8_t *p, size_t n) {
        uint8_t c = p[0];
        size_t len;
        uint32_t min, cp;

        if (c < 0x80)
                return c ? 1 : 0;               /* NUL: not kept either */
        if (c >= 0xc2 && c <= 0xdf)
                len = 2, min = 0x80, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
                len = 3, min = 0x800, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
                len = 4, min = 0x10000, cp = c & 0x07;
        else
                return 0;
        if (n < len)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (p[i] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return len;
}

/* A string field's bytes as JSON text: Go's encoder writes U+FFFD for each
 * byte that is not part of valid UTF-8, so the decoders see what a JSON
 * client would; a NUL too (it would end the decoders' C strings). */
static json_t *text(const uint8_t *p, size_t n) {
        size_t i = 0;

        while (i < n && p[i] && p[i] < 0x80)
                i++;
        for (size_t k; i < n; i += k)
                if (!(k = utf8_seq(p + i, n - i)))
                        break;
        if (i == n)
                return json_stringn_nocheck((const char *) p, n);

        struct buf b = BUF_INIT;
        buf_put(&b, (const char *) p, i);
        for (size_t k; i < n; i += k ? k : 1) {
                k = utf8_seq(p + i, n - i);
                if (k)
                        buf_put(&b, (const char *) p + i, k);
                else
                        buf_put(&b, "\xef\xbf\xbd", 3);
        }
        json_t *s = json_stringn_nocheck(b.data, b.len);
        buf_done(&b);
        return s;
}

static const struct pb_field_def *field_def(const struct pb_message *m, uint32_t number) {
        for (size_t i = 0; i < m->n_fields; i++)
                if (m->fields[i].number == number)
                        return &m->fields[i];
        return NULL;
}

static int message(struct walk *w, const struct pb_message *m, const uint8_t *data, size_t len, json_t *obj);

/* A nested message, its path extended by name (and [index]) meanwhile. */
static int nested(struct walk *w, const struct pb_message *m, const char *name, long index, const uint8_t *data,
                  size_t len, json_t *obj) {
        size_t saved = w->path_len;
        int n;

        if (w->depth >= PB_JSON_MAX_DEPTH)
                return fail(w, name, "nested too deep");
        n = index >= 0 ? snprintf(w->path + saved, sizeof w->path - saved, "%s[%ld].", name, index)
                       : snprintf(w->path + saved, sizeof w->path - saved, "%s.", name);
        if (n > 0)
                w->path_len = saved + (size_t) n < sizeof w->path ? saved + (size_t) n : sizeof w->path - 1;
        w->depth++;
        int r = message(w, m, data, len, obj);
        w->depth--;
        w->path_len = saved;
        return r;
}

/* Sub-fields of a small message (IntOrString, Time, a map entry): its
 * varints and its byte strings by number, 1..3; later ones win, as
 * protobuf reads them. */
struct parts {
        uint64_t v[4];
        const uint8_t *s[4];
        size_t s_len[4];
};

static int parts(struct walk *w, const char *name, const uint8_t *data, size_t len, struct parts *ret) {
        struct pb_reader r = pb_reader_of(data, len);
        struct pb_field f;
        const char *why = NULL;
        int k;

        *ret = (struct parts) {};
        while ((k = pb_next(&r, &f, &why)) > 0) {
                if (f.number > 3)
                        continue;
                if (f.wire == PB_WIRE_LEN) {
                        ret->s[f.number] = f.data;
                        ret->s_len[f.number] = f.len;
                } else if (f.wire == PB_WIRE_VARINT) {
                        ret->v[f.number] = f.value;
                }
        }
        return k < 0 ? fail(w, name, why) : 0;
}

static int int_or_string(struct walk *w, const char *name, const uint8_t *data, size_t len, json_t **ret) {
        struct parts p;

        if (parts(w, name, data, len, &p) < 0)
                return -EINVAL;
        switch (p.v[1]) {
        case 0:
                *ret = json_integer((int32_t) p.v[2]);
                return 0;
        case 1:
                *ret = text(p.s[3] ? p.s[3] : (const uint8_t *) "", p.s_len[3]);
                return 0;
        default:
                return fail(w, name, "IntOrString of neither type");    /* Go's encoder refuses it too */
        }
}

/* metav1.Time: a zero time comes as no bytes, and is null in JSON; else
 * whole seconds, RFC 3339 in UTC (Go's JSON drops the nanoseconds). */
static int time_value(struct walk *w, const char *name, const uint8_t *data, size_t len, json_t **ret) {
        struct parts p;
        struct tm tm;
        char s[32];

        if (len == 0) {
                *ret = json_null();
                return 0;
        }
        if (parts(w, name, data, len, &p) < 0)
                return -EINVAL;
        time_t t = (time_t) (int64_t) p.v[1];
        if ((int64_t) t != (int64_t) p.v[1] || !gmtime_r(&t, &tm) || tm.tm_year + 1900 < 0 ||
            tm.tm_year + 1900 > 9999)
                return fail(w, name, "a time outside years 0-9999");     /* which Go's JSON refuses */
        strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%SZ", &tm);
        *ret = json_string(s);
        return 0;
}

static int map_entry(struct walk *w, const struct pb_field_def *d, const uint8_t *data, size_t len, json_t *obj) {
        struct parts p;

        if (parts(w, d->name, data, len, &p) < 0)
                return -EINVAL;
        json_t *map = json_object_get(obj, d->name);
        if (!map) {
                map = json_object();
                json_object_set_new_nocheck(obj, d->name, map);
        }
        json_t *key = text(p.s[1] ? p.s[1] : (const uint8_t *) "", p.s_len[1]);
        json_t *value = text(p.s[2] ? p.s[2] : (const uint8_t *) "", p.s_len[2]);
        json_object_set_new_nocheck(map, json_string_value(key), value);
        json_decref(key);
        return 0;
}

static bool wire_fits(const struct pb_field_def *d, enum pb_wire wire) {
        switch (d->type) {
        case PB_BOOL:
        case PB_INT32:
        case PB_INT64:
                return wire == PB_WIRE_VARINT;
        default:
                return wire == PB_WIRE_LEN;
        }
}

/* One field of the schema's: its value set in obj, or appended to its
 * array. */
static int field(struct walk *w, const struct pb_field_def *d, const struct pb_field *f, json_t *obj) {
        bool repeated = d->flags & PB_REPEATED, keep = repeated || (d->flags & PB_KEEP_ZERO);
        json_t *v = NULL, *arr = NULL;
        long index = -1;

        if (!wire_fits(d, f->wire))
                return fail(w, d->name, "wrong wire type");
        if (d->type == PB_MAP)
                return map_entry(w, d, f->data, f->len, obj);
        if (repeated) {
                arr = json_object_get(obj, d->name);
                if (!json_is_array(arr)) {
                        arr = json_array();
                        json_object_set_new_nocheck(obj, d->name, arr);
                }
                index = (long) json_array_size(arr);
        }
        switch (d->type) {
        case PB_STRING:
                if (!keep && f->len == 0)
                        return 0;
                v = text(f->data, f->len);
                break;
        case PB_BOOL:
                if (!keep && !f->value)
                        return 0;
                v = json_boolean(f->value != 0);
                break;
        case PB_INT32:
        case PB_INT64: {
                int64_t n = d->type == PB_INT32 ? (int32_t) f->value : (int64_t) f->value;
                if (!keep && !n)
                        return 0;
                v = json_integer(n);
                break;
        }
        case PB_MESSAGE:
                v = json_object();
                if (nested(w, d->message, d->name, index, f->data, f->len, v) < 0) {
                        json_decref(v);
                        return -EINVAL;
                }
                break;
        case PB_INT_OR_STRING:
                if (int_or_string(w, d->name, f->data, f->len, &v) < 0)
                        return -EINVAL;
                break;
        case PB_TIME:
                if (time_value(w, d->name, f->data, f->len, &v) < 0)
                        return -EINVAL;
                break;
        case PB_MAP:
                break;
        }
        if (arr)
                json_array_append_new(arr, v);
        else
                json_object_set_new_nocheck(obj, d->name, v);   /* a field sent twice: the last wins */
        return 0;
}

static int message(struct walk *w, const struct pb_message *m, const uint8_t *data, size_t len, json_t *obj) {
        struct pb_reader r = pb_reader_of(data, len);
        struct pb_field f;
        const char *why = NULL;
        int k;

        while ((k = pb_next(&r, &f, &why)) > 0) {
                const struct pb_field_def *d = field_def(m, f.number);
                if (d && field(w, d, &f, obj) < 0)
                        return -EINVAL;
        }
        return k < 0 ? fail(w, NULL, why) : 0;
}

int pb_json_message(const struct pb_message *m, const uint8_t *data, size_t len, json_t **ret, char *err,
                    size_t errlen) {
        struct walk w = {.err = err, .errlen = errlen};
        json_t *obj = json_object();

        if (message(&w, m, data, len, obj) < 0) {
                json_decref(obj);
                return -EINVAL;
        }
        *ret = obj;
        return 0;
}
