/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The envelope, lists and watch events around the objects pb-json.c
 * translates. What is checked here is the frame of things: the magic, a
 * kind kproxy reads, no content encoding it does not; the objects' fields
 * are the decoders' to judge, as in JSON.
 */
#include "kube/proto.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kube/pb-json.h"
#include "kube/pb-wire.h"
#include "kube/proto-schema.h"
#include "kube/watch-stream.h"

#define ERRLEN 256

/* The fields of runtime.Unknown and of its TypeMeta. */
struct envelope {
        const uint8_t *api_version, *kind, *raw, *encoding;
        size_t api_version_len, kind_len, raw_len, encoding_len;
};

bool kube_proto_media(const char *content_type) {
        static const char t[] = "application/vnd.kubernetes.protobuf";

        if (!content_type || strncasecmp(content_type, t, sizeof t - 1) != 0)
                return false;
        content_type += sizeof t - 1;
        content_type += strspn(content_type, " \t");
        return *content_type == '\0' || *content_type == ';';
}

bool kube_proto_is(const void *body, size_t len) {
        return len >= KUBE_PROTO_MAGIC_LEN && memcmp(body, KUBE_PROTO_MAGIC, KUBE_PROTO_MAGIC_LEN) == 0;
}

static int type_meta(const uint8_t *p, size_t n, struct envelope *e, const char **why) {
        struct pb_reader r = pb_reader_of(p, n);
        struct pb_field f;
        int k;

        while ((k = pb_next(&r, &f, why)) > 0) {
                if (f.wire != PB_WIRE_LEN)
                        continue;
                if (f.number == 1)
                        e->api_version = f.data, e->api_version_len = f.len;
                else if (f.number == 2)
                        e->kind = f.data, e->kind_len = f.len;
        }
        return k;
}

/* Partial: a cut-off envelope gives what it holds (for describe). */
static int envelope(const uint8_t *p, size_t n, struct envelope *e, const char **why) {
        struct pb_reader r;
        struct pb_field f;
        int k;

        *e = (struct envelope) {};
        if (!kube_proto_is(p, n)) {
                *why = "not in the protobuf envelope (no k8s magic)";
                return -EINVAL;
        }
        r = pb_reader_of(p + KUBE_PROTO_MAGIC_LEN, n - KUBE_PROTO_MAGIC_LEN);
        while ((k = pb_next(&r, &f, why)) > 0) {
                if (f.wire != PB_WIRE_LEN)
                        continue;
                if (f.number == 1 && type_meta(f.data, f.len, e, why) < 0)
                        return -EINVAL;
                if (f.number == 2)
                        e->raw = f.data, e->raw_len = f.len;
                else if (f.number == 3)
                        e->encoding = f.data, e->encoding_len = f.len;
        }
        return k;
}

/* The envelope, and the schema of its kind. */
static int open_envelope(const void *body, size_t len, struct envelope *e, const struct pb_message **ret_schema,
                         bool *ret_list, char *why, size_t whylen) {
        const char *problem = NULL;

        if (envelope(body, len, e, &problem) < 0) {
                snprintf(why, whylen, "%s", problem);
                return -EINVAL;
        }
        if (e->encoding_len) {
                snprintf(why, whylen, "content encoding \"%.*s\" is not one kproxy reads",
                         (int) (e->encoding_len < 32 ? e->encoding_len : 32), (const char *) e->encoding);
                return -EINVAL;
        }
        *ret_schema = e->kind ? kube_proto_schema((const char *) e->kind, e->kind_len, ret_list) : NULL;
        if (!*ret_schema) {
                char kind[80];
                size_t n = e->kind_len < sizeof kind - 1 ? e->kind_len : sizeof kind - 1, i;
                for (i = 0; i < n && e->kind[i] >= 0x20 && e->kind[i] < 0x7f; i++)
                        kind[i] = (char) e->kind[i];
                kind[i] = '\0';
                snprintf(why, whylen, "kind \"%s\" is not one kproxy reads", kind);
                return -EINVAL;
        }
        return 0;
}

/* The object's JSON with its kind and apiVersion, as a JSON watch event
 * carries them. */
static void set_type(json_t *obj, const struct envelope *e) {
        if (e->kind)
                json_object_set_new_nocheck(obj, "kind", json_stringn((const char *) e->kind, e->kind_len));
        if (e->api_version)
                json_object_set_new_nocheck(obj, "apiVersion",
                                            json_stringn((const char *) e->api_version, e->api_version_len));
        /* json_stringn() refuses what is not UTF-8: then the field is absent. */
}

/* A name's characters of p[0..n) into out, or "" when another is there. */
static void copy_name(const uint8_t *p, size_t n, char *out, size_t outlen) {
        size_t i;

        for (i = 0; i < n && i + 1 < outlen; i++) {
                if (!kube_name_char((char) p[i])) {
                        i = 0;
                        break;
                }
                out[i] = (char) p[i];
        }
        out[i] = '\0';
}

/* Reads as far as the head goes: a length that runs past its end is cut
 * to what is there, so the first fields of a huge object still show. */
static void head_fields(const uint8_t *p, size_t n, const uint8_t **f1, size_t *l1, uint32_t want1,
                        const uint8_t **f2, size_t *l2, uint32_t want2) {
        struct pb_reader r = pb_reader_of(p, n);
        const char *why;
        uint64_t tag, len;

        while (r.p < r.end && pb_varint(&r, &tag, &why) == 0 && (tag & 7) == PB_WIRE_LEN) {
                /* The describe reads length fields only: it stops at anything else. */
                if (pb_varint(&r, &len, &why) < 0)
                        return;
                size_t have = (size_t) (r.end - r.p) < len ? (size_t) (r.end - r.p) : (size_t) len;
                if (tag >> 3 == want1)
                        *f1 = r.p, *l1 = have;
                else if (tag >> 3 == want2 && f2)
                        *f2 = r.p, *l2 = have;
                r.p += have;
        }
}

/* "ns/name" of an item whose translation failed, from its first bytes. */
static void item_ref(const uint8_t *p, size_t n, char *out, size_t outlen) {
        const uint8_t *meta = NULL, *name = NULL, *ns = NULL;
        size_t meta_len = 0, name_len = 0, ns_len = 0;
        char a[254], b[64];

        head_fields(p, n, &meta, &meta_len, 1, NULL, NULL, 0);
        if (meta)
                head_fields(meta, meta_len, &name, &name_len, 1, &ns, &ns_len, 3);
        copy_name(name, name ? name_len : 0, a, sizeof a);
        copy_name(ns, ns ? ns_len : 0, b, sizeof b);
        snprintf(out, outlen, "%s%s%s", b, *b ? "/" : "", *a ? a : "<unnamed>");
}

int kube_proto_object(const void *body, size_t len, json_t **ret, char *why, size_t whylen) {
        const struct pb_message *schema;
        struct envelope e;
        bool list;
        json_t *obj;

        if (open_envelope(body, len, &e, &schema, &list, why, whylen) < 0)
                return -EINVAL;
        if (list) {
                snprintf(why, whylen, "a list where one object was expected");
                return -EINVAL;
        }
        if (pb_json_message(schema, e.raw, e.raw_len, &obj, why, whylen) < 0)
                return -EINVAL;
        set_type(obj, &e);
        *ret = obj;
        return 0;
}

int kube_proto_list(const void *body, size_t len, json_t **ret_md,
                    void (*fn)(void *userdata, const json_t *item), void *userdata, char *why, size_t whylen) {
        const struct pb_message *schema;
        const char *problem = NULL;
        struct envelope e;
        struct pb_field f;
        json_t *md = NULL;
        size_t index = 0;
        bool list;
        int k;

        if (open_envelope(body, len, &e, &schema, &list, why, whylen) < 0)
                return -EINVAL;
        if (!list) {
                snprintf(why, whylen, "one object where a list was expected");
                return -EINVAL;
        }
        struct pb_reader r = pb_reader_of(e.raw, e.raw_len);
        while ((k = pb_next(&r, &f, &problem)) > 0) {
                char err[ERRLEN];
                json_t *v;
                if (f.wire != PB_WIRE_LEN || (f.number != 1 && f.number != 2))
                        continue;
                if (f.number == 1) {
                        if (pb_json_message(&kube_proto_list_meta, f.data, f.len, &v, err, sizeof err) < 0) {
                                snprintf(why, whylen, "list metadata: %s", err);
                                goto fail;
                        }
                        json_decref(md);
                        md = v;
                        continue;
                }
                if (pb_json_message(schema, f.data, f.len, &v, err, sizeof err) < 0) {
                        char ref[320];
                        item_ref(f.data, f.len, ref, sizeof ref);
                        snprintf(why, whylen, "list item %zu (%s): %s", index, ref, err);
                        goto fail;
                }
                fn(userdata, v);
                json_decref(v);
                index++;
        }
        if (k < 0) {
                snprintf(why, whylen, "list after item %zu: %s", index, problem);
                goto fail;
        }
        *ret_md = md ? md : json_object();
        return 0;
fail:
        json_decref(md);
        return -EINVAL;
}

/* A WatchEvent's type and the raw bytes of its object. */
static int watch_event(const uint8_t *p, size_t n, const uint8_t **type, size_t *type_len, const uint8_t **raw,
                       size_t *raw_len, const char **why) {
        struct pb_reader r = pb_reader_of(p, n);
        struct pb_field f;
        int k;

        *type = *raw = NULL;
        while ((k = pb_next(&r, &f, why)) > 0) {
                if (f.wire != PB_WIRE_LEN)
                        continue;
                if (f.number == 1) {
                        *type = f.data, *type_len = f.len;
                } else if (f.number == 2) {
                        struct pb_reader x = pb_reader_of(f.data, f.len);
                        struct pb_field g;
                        while ((k = pb_next(&x, &g, why)) > 0)
                                if (g.number == 1 && g.wire == PB_WIRE_LEN)
                                        *raw = g.data, *raw_len = g.len;
                        if (k < 0)
                                return k;
                }
        }
        return k;
}

int kube_proto_watch_event(const void *frame, size_t len, struct kube_watch_event *ret, char *why, size_t whylen) {
        const uint8_t *type, *raw;
        size_t type_len = 0, raw_len = 0;
        const char *problem = NULL;
        json_t *root, *obj = NULL;

        if (watch_event(frame, len, &type, &type_len, &raw, &raw_len, &problem) < 0) {
                snprintf(why, whylen, "%s", problem);
                return -EINVAL;
        }
        if (raw && raw_len && raw[0] == '{') {
                /* A RawExtension may hold JSON: read it as JSON. */
                json_error_t e;
                obj = json_loadb((const char *) raw, raw_len, 0, &e);
                if (!obj) {
                        snprintf(why, whylen, "object: %s", e.text);
                        return -EINVAL;
                }
        } else if (raw) {
                char err[ERRLEN];
                if (kube_proto_object(raw, raw_len, &obj, err, sizeof err) < 0) {
                        snprintf(why, whylen, "object: %s", err);
                        return -EINVAL;
                }
        }
        root = json_object();
        if (type)
                json_object_set_new_nocheck(root, "type", json_stringn((const char *) type, type_len));
        if (obj)
                json_object_set_new_nocheck(root, "object", obj);
        kube_watch_event_from(root, ret);
        return 0;
}

const char *kube_proto_event_describe(const void *head, size_t len, char *out, size_t outlen) {
        const uint8_t *object = NULL, *raw = NULL, *typemeta = NULL, *body = NULL, *meta = NULL, *kind = NULL,
                      *name = NULL, *ns = NULL;
        size_t object_len = 0, raw_len = 0, typemeta_len = 0, body_len = 0, meta_len = 0, kind_len = 0,
               name_len = 0, ns_len = 0;
        char k[64], n[254], s[64];

        head_fields(head, len, &object, &object_len, 2, NULL, NULL, 0);
        if (object)
                head_fields(object, object_len, &raw, &raw_len, 1, NULL, NULL, 0);
        if (raw && kube_proto_is(raw, raw_len))
                head_fields(raw + 4, raw_len - 4, &typemeta, &typemeta_len, 1, &body, &body_len, 2);
        if (typemeta)
                head_fields(typemeta, typemeta_len, &kind, &kind_len, 2, NULL, NULL, 0);
        if (body)
                head_fields(body, body_len, &meta, &meta_len, 1, NULL, NULL, 0);
        if (meta)
                head_fields(meta, meta_len, &name, &name_len, 1, &ns, &ns_len, 3);
        copy_name(kind, kind ? kind_len : 0, k, sizeof k);
        copy_name(name, name ? name_len : 0, n, sizeof n);
        copy_name(ns, ns ? ns_len : 0, s, sizeof s);
        snprintf(out, outlen, "%s%s%s%s%s", k, *k && (*s || *n) ? " " : "", s, *s ? "/" : "", n);
        return out;
}
