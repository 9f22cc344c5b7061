/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The field readers every decoder of an API object builds on
 * (decode-field.c): typed access to optional JSON fields, metadata, the
 * well-known labels, protocols. Each reader that can fail writes
 * "PATHKEY: problem" into err (KUBE_ERRLEN bytes) and returns -EINVAL, so
 * a decoder only adds where it is; PATH is the dotted prefix with its
 * final dot ("spec.", "spec.ports[0]."), KEY the field. Private to
 * src/kube/'s decoders.
 */
#include <stdbool.h>
#include <stddef.h>

typedef struct json_t json_t;
enum l4_proto;

#define KUBE_LABEL_SERVICE_NAME "kubernetes.io/service-name"
#define KUBE_LABEL_HEADLESS "service.kubernetes.io/headless"
#define KUBE_LABEL_PROXY_NAME "service.kubernetes.io/service-proxy-name"
#define KUBE_LABEL_ZONE "topology.kubernetes.io/zone"

/* Formats the problem into err and returns -EINVAL. */
/* src into dst (size bytes, NUL included), control characters written as
 * Go's %q would (\\n, \\t, \\r, \\xNN): one line, cut at a whole escape. */
void kube_field_escape(char *dst, size_t size, const char *src);
int kube_field_fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Optional fields of o: absent and null both leave *ret NULL (the bool's
 * dflt) and return 0; another JSON type is an error. An integer must lie
 * in lo..hi; *present says whether it was given. */
int kube_field_str(const json_t *o, const char *key, const char **ret, char *err, const char *path);
int kube_field_int(const json_t *o, const char *key, long long lo, long long hi, long long *ret, bool *present,
                   char *err, const char *path);
int kube_field_bool(const json_t *o, const char *key, bool dflt, bool *ret, char *err, const char *path);
int kube_field_array(const json_t *o, const char *key, const json_t **ret, char *err, const char *path);
int kube_field_object(const json_t *o, const char *key, const json_t **ret, char *err, const char *path);

/* metadata.name (a DNS subdomain) and, when namespaced, metadata.namespace
 * (a DNS label, or missing or ""): the object's key (kube_object_key()'s
 * rule: "namespace/name", "name" without a namespace) in *ret_key (owned),
 * and the labels object (borrowed, NULL when none) in *ret_labels. */
int kube_field_meta(const json_t *obj, bool namespaced, char **ret_key, const json_t **ret_labels, char *err);
/* The label's value, or NULL when absent or not a string. */
const char *kube_field_label(const json_t *labels, const char *key);
/* o's "protocol" as an enum; missing is TCP, the API's default. */
int kube_field_protocol(const json_t *o, enum l4_proto *ret, char *err, const char *path);
/* 0 when s is "" (unnamed) or a valid port name, -EINVAL otherwise. */
int kube_field_port_name(const char *s);

