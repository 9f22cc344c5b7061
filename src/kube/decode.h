/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Decoding of Kubernetes API objects (already parsed into jansson trees) into
 * the model's typed objects. Every field kproxy uses is validated here, with
 * the API server's defaults applied where an object comes from a manifest
 * rather than from the API (a missing protocol is TCP, a missing type is
 * ClusterIP, ...). Nothing downstream sees an unvalidated string: names are
 * checked against the Kubernetes grammar, IPs and ports are parsed.
 *
 * Return values: 0 and *ret set; KUBE_IGNORED (> 0) for a well-formed object
 * that is not kproxy's to proxy (headless, ExternalName, another proxy's),
 * with the reason in err; -EINVAL with "field: problem" in err.
 */
#include <stddef.h>

typedef struct json_t json_t;
struct svc;
struct slice;
struct node;

#define KUBE_IGNORED 1
#define KUBE_ERRLEN 256

enum kube_kind {
        KUBE_KIND_SERVICE,
        KUBE_KIND_ENDPOINT_SLICE,
        KUBE_KIND_NODE,
        KUBE_KIND_SERVICE_CIDR,
        _KUBE_KIND_MAX,
        _KUBE_KIND_INVALID = -22,
};

const char *kube_kind_to_string(enum kube_kind k);
enum kube_kind kube_kind_from_string(const char *s);

int kube_decode_service(const json_t *obj, struct svc **ret, char err[KUBE_ERRLEN]);
int kube_decode_slice(const json_t *obj, struct slice **ret, char err[KUBE_ERRLEN]);
int kube_decode_node(const json_t *obj, struct node **ret, char err[KUBE_ERRLEN]);
/* A ServiceCIDR (networking.k8s.io/v1): its name (owned) and spec.cidrs
 * (owned; one or two, of different families). */
struct inet_cidr;
int kube_decode_service_cidr(const json_t *obj, char **ret_name, struct inet_cidr **ret_cidrs, size_t *ret_n,
                             char err[KUBE_ERRLEN]);

/* The key an object is known by, from add to delete, in the client and
 * the model alike: client-go's MetaNamespaceKeyFunc, "namespace/name", or
 * "name" when metadata.namespace is missing or "" (cluster-scoped kinds,
 * and a namespaced object sent without one). Owned; NULL when there is no
 * metadata.name string (or no memory). */
char *kube_object_key(const json_t *obj);
/* The same of a namespace (NULL or "": none) and a name. Owned; NULL when
 * out of memory. */
char *kube_key_make(const char *ns, const char *name);

/* "namespace/name" of an object, for messages, from whatever metadata it has
 * ("<unnamed>" parts where missing). out holds at least 512 bytes. */
const char *kube_object_ref(const json_t *obj, char *out, size_t outlen);

/* Kubernetes name grammars (apimachinery validation). */
int kube_valid_dns_label(const char *s);        /* RFC 1123 label, <= 63 */
int kube_valid_dns_subdomain(const char *s);    /* RFC 1123 subdomain, <= 253 */
int kube_valid_label_value(const char *s);      /* label value, <= 63, may be "" */
