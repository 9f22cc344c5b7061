/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The readers of optional, typed JSON fields that every decoder shares, so
 * that each problem is reported the same way: the field's path and what is
 * wrong with it, never more than KUBE_ERRLEN bytes.
 */
#include "kube/decode-field.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/decode.h"
#include "model/model.h"

void kube_field_escape(char *dst, size_t size, const char *src) {
        size_t n = 0;

        for (const unsigned char *p = (const unsigned char *) src; *p; p++) {
                bool plain = *p >= 0x20 && *p != 0x7f, named = *p == '\n' || *p == '\t' || *p == '\r';
                size_t w = plain ? 1 : named ? 2 : 4;
                if (n + w >= size)
                        break;
                if (plain)
                        dst[n] = (char) *p;
                else if (named)
                        snprintf(dst + n, 3, "\\%c", *p == '\n' ? 'n' : *p == '\t' ? 't' : 'r');
                else
                        snprintf(dst + n, 5, "\\x%02x", *p);
                n += w;
        }
        dst[n] = '\0';
}

/* The message quotes values of the object: escaped (kube_field_escape()),
 * so it stays one line wherever it goes, not only in the log (which
 * escapes it too). */
int kube_field_fail(char *err, const char *fmt, ...) {
        char raw[KUBE_ERRLEN];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        kube_field_escape(err, KUBE_ERRLEN, raw);
        return -EINVAL;
}

/* Port names are DNS labels (Service) or IANA service names (slices); both
 * fit the label grammar, and "" means unnamed. */
int kube_field_port_name(const char *s) {
        return *s == '\0' ? 0 : kube_valid_dns_label(s);
}

/* Optional string field: NULL when absent or null; -EINVAL when another type. */
int kube_field_str(const json_t *o, const char *key, const char **ret, char *err, const char *path) {
        const json_t *v = json_object_get(o, key);
        *ret = NULL;
        if (!v || json_is_null(v)) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_string(v))
                return kube_field_fail(err, "%s%s: must be a string", path, key);
        *ret = json_string_value(v);
        return 0;
}

/* Optional integer field in [lo, hi]; *present says whether it was set. */
int kube_field_int(const json_t *o, const char *key, long long lo, long long hi, long long *ret,
                   bool *present, char *err, const char *path) {
        const json_t *v = json_object_get(o, key);
        *present = false;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_integer(v))
                return kube_field_fail(err, "%s%s: must be an integer", path, key);
        long long x = json_integer_value(v);
        if (x < lo || x > hi)
                return kube_field_fail(err, "%s%s: %lld is out of range %lld..%lld", path, key, x, lo, hi);
        *ret = x;
        *present = true;
        return 0;
}

int kube_field_bool(const json_t *o, const char *key, bool dflt, bool *ret, char *err, const char *path) {
        const json_t *v = json_object_get(o, key);
        *ret = dflt;
        if (!v || json_is_null(v)) {
                *ret = dflt;
                return 0;
        }
        if (!json_is_boolean(v))
                return kube_field_fail(err, "%s%s: must be a boolean", path, key);
        *ret = json_is_true(v);
        return 0;
}

/* Optional array field: NULL when absent or null. */
int kube_field_array(const json_t *o, const char *key, const json_t **ret, char *err, const char *path) {
        const json_t *v = json_object_get(o, key);
        *ret = NULL;
        if (!v || json_is_null(v)) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_array(v))
                return kube_field_fail(err, "%s%s: must be a list", path, key);
        *ret = v;
        return 0;
}

int kube_field_object(const json_t *o, const char *key, const json_t **ret, char *err, const char *path) {
        const json_t *v = json_object_get(o, key);
        *ret = NULL;
        if (!v || json_is_null(v)) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_object(v))
                return kube_field_fail(err, "%s%s: must be an object", path, key);
        *ret = v;
        return 0;
}


/* metadata.name and metadata.namespace, validated; "ns/name" in *ret_key. */
int kube_field_meta(const json_t *obj, bool namespaced, char **ret_key, const json_t **ret_labels,
                       char *err) {
        const json_t *md;
        const char *name, *ns = NULL;
        int r;

        if (!json_is_object(obj))
                return kube_field_fail(err, "object: must be a mapping");
        if ((r = kube_field_object(obj, "metadata", &md, err, "")) < 0)
                return r;
        if (!md)
                return kube_field_fail(err, "metadata: missing");
        if ((r = kube_field_str(md, "name", &name, err, "metadata.")) < 0)
                return r;
        if (!name)
                return kube_field_fail(err, "metadata.name: missing");
        if (kube_valid_dns_subdomain(name) < 0)
                return kube_field_fail(err, "metadata.name: \"%.64s\" is not a valid name", name);
        /* A namespaced object without a namespace keeps none: its key is
         * then its name, the one the watch reports its deletion by (a
         * manifest gets kubectl's "default" before it comes here). */
        if (namespaced) {
                if ((r = kube_field_str(md, "namespace", &ns, err, "metadata.")) < 0)
                        return r;
                if (ns && *ns && kube_valid_dns_label(ns) < 0)
                        return kube_field_fail(err, "metadata.namespace: \"%.64s\" is not a valid namespace", ns);
        }
        if ((r = kube_field_object(md, "labels", ret_labels, err, "metadata.")) < 0)
                return r;
        *ret_key = kube_key_make(ns, name);
        if (!*ret_key)
                abort();
        return 0;
}

const char *kube_field_label(const json_t *labels, const char *key) {
        const json_t *v = json_object_get(labels, key);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

int kube_field_protocol(const json_t *o, enum l4_proto *ret, char *err, const char *path) {
        const char *p;
        int r = kube_field_str(o, "protocol", &p, err, path);
        if (r < 0)
                return r;
        if (!p) {
                *ret = L4_TCP;
                return 0;
        }
        enum l4_proto proto = l4_proto_from_string(p);
        if (proto < 0)
                return kube_field_fail(err, "%sprotocol: unknown protocol \"%.32s\" (want TCP, UDP or SCTP)", path, p);
        *ret = proto;
        return 0;
}
