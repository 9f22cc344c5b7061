/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of decoding: one bad field rejects one object, never more, and
 * says which field. The caller keeps every other object (and, in the daemon,
 * the last good version of this one).
 *
 * One file per kind (decode-service.c, decode-slice.c, decode-node.c,
 * decode-servicecidr.c), all on the field readers of decode-field.c, which
 * report a problem as "field.path: what is wrong". This file holds what
 * they and their callers share: the kinds' names, object references for
 * messages, and the Kubernetes name grammars.
 */
#include "kube/decode.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kube_kind_table[_KUBE_KIND_MAX] = {
        [KUBE_KIND_SERVICE] = "Service",
        [KUBE_KIND_ENDPOINT_SLICE] = "EndpointSlice",
        [KUBE_KIND_NODE] = "Node",
        [KUBE_KIND_SERVICE_CIDR] = "ServiceCIDR",
};

const char *kube_kind_to_string(enum kube_kind k) {
        return k >= 0 && k < _KUBE_KIND_MAX ? kube_kind_table[k] : NULL;
}

enum kube_kind kube_kind_from_string(const char *s) {
        for (size_t i = 0; s && i < _KUBE_KIND_MAX; i++)
                if (strcmp(kube_kind_table[i], s) == 0)
                        return (enum kube_kind) i;
        return _KUBE_KIND_INVALID;
}

static bool is_alnum_lower(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

int kube_valid_dns_label(const char *s) {
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > 63 || !is_alnum_lower(s[0]) || !is_alnum_lower(s[n - 1]))
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!is_alnum_lower(s[i]) && s[i] != '-')
                        return -EINVAL;
        return 0;
}

int kube_valid_dns_subdomain(const char *s) {
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > 253)
                return -EINVAL;
        /* Each dot-separated part is a label (length bounded by the whole). */
        const char *p = s;
        while (*p) {
                const char *dot = strchr(p, '.');
                size_t len = dot ? (size_t) (dot - p) : strlen(p);
                if (len == 0 || !is_alnum_lower(p[0]) || !is_alnum_lower(p[len - 1]))
                        return -EINVAL;
                for (size_t i = 0; i < len; i++)
                        if (!is_alnum_lower(p[i]) && p[i] != '-')
                                return -EINVAL;
                p += len + (dot ? 1 : 0);
                if (dot && !*p)
                        return -EINVAL;
        }
        return 0;
}

int kube_valid_label_value(const char *s) {
        size_t n = s ? strlen(s) : 0;
        if (n == 0)
                return 0;
        if (n > 63)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                bool alnum = is_alnum_lower(c) || (c >= 'A' && c <= 'Z');
                if (!alnum && c != '-' && c != '_' && c != '.')
                        return -EINVAL;
                if ((i == 0 || i == n - 1) && !alnum)
                        return -EINVAL;
        }
        return 0;
}

char *kube_key_make(const char *ns, const char *name) {
        char *k;

        if (!ns || !*ns)
                return strdup(name);
        return asprintf(&k, "%s/%s", ns, name) < 0 ? NULL : k;
}

char *kube_object_key(const json_t *obj) {
        const json_t *md = json_object_get(obj, "metadata");
        const char *name = json_string_value(json_object_get(md, "name"));

        return name ? kube_key_make(json_string_value(json_object_get(md, "namespace")), name) : NULL;
}

const char *kube_object_ref(const json_t *obj, char *out, size_t outlen) {
        const json_t *md = json_object_get(obj, "metadata");
        const char *ns = json_string_value(json_object_get(md, "namespace"));
        const char *name = json_string_value(json_object_get(md, "name"));
        if (ns && *ns)
                snprintf(out, outlen, "%.253s/%.253s", ns, name ? name : "<unnamed>");
        else
                snprintf(out, outlen, "%.253s", name ? name : "<unnamed>");
        return out;
}
