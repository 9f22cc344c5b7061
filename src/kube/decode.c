/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of decoding: one bad field rejects one object, never more, and
 * says which field. The caller keeps every other object (and, in the daemon,
 * the last good version of this one).
 */
#include "kube/decode.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
#include "util/cleanup.h"
#include "util/inet.h"
#include "util/intern.h"

#define LABEL_SERVICE_NAME "kubernetes.io/service-name"
#define LABEL_HEADLESS "service.kubernetes.io/headless"
#define LABEL_PROXY_NAME "service.kubernetes.io/service-proxy-name"
#define LABEL_ZONE "topology.kubernetes.io/zone"
#define DEFAULT_AFFINITY_TIMEOUT 10800
#define MAX_AFFINITY_TIMEOUT 86400

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

static int fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(char *err, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, KUBE_ERRLEN, fmt, ap);
        va_end(ap);
        return -EINVAL;
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

/* Port names are DNS labels (Service) or IANA service names (slices); both
 * fit the label grammar, and "" means unnamed. */
static int valid_port_name(const char *s) {
        return *s == '\0' ? 0 : kube_valid_dns_label(s);
}

const char *kube_object_ref(const json_t *obj, char *out, size_t outlen) {
        const json_t *md = json_object_get(obj, "metadata");
        const char *ns = json_string_value(json_object_get(md, "namespace"));
        const char *name = json_string_value(json_object_get(md, "name"));
        if (ns)
                snprintf(out, outlen, "%.253s/%.253s", ns, name ? name : "<unnamed>");
        else
                snprintf(out, outlen, "%.253s", name ? name : "<unnamed>");
        return out;
}

/* Optional string field: NULL when absent or null; -EINVAL when another type. */
static int get_str(const json_t *o, const char *key, const char **ret, char *err, const char *path) {
        const json_t *v = json_object_get(o, key);
        *ret = NULL;
        if (!v || json_is_null(v)) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_string(v))
                return fail(err, "%s%s: must be a string", path, key);
        *ret = json_string_value(v);
        return 0;
}

/* Optional integer field in [lo, hi]; *present says whether it was set. */
static int get_int(const json_t *o, const char *key, long long lo, long long hi, long long *ret,
                   bool *present, char *err, const char *path) {
        const json_t *v = json_object_get(o, key);
        *present = false;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_integer(v))
                return fail(err, "%s%s: must be an integer", path, key);
        long long x = json_integer_value(v);
        if (x < lo || x > hi)
                return fail(err, "%s%s: %lld is out of range %lld..%lld", path, key, x, lo, hi);
        *ret = x;
        *present = true;
        return 0;
}

static int get_bool(const json_t *o, const char *key, bool dflt, bool *ret, char *err, const char *path) {
        const json_t *v = json_object_get(o, key);
        *ret = dflt;
        if (!v || json_is_null(v)) {
                *ret = dflt;
                return 0;
        }
        if (!json_is_boolean(v))
                return fail(err, "%s%s: must be a boolean", path, key);
        *ret = json_is_true(v);
        return 0;
}

/* Optional array field: NULL when absent or null. */
static int get_array(const json_t *o, const char *key, const json_t **ret, char *err, const char *path) {
        const json_t *v = json_object_get(o, key);
        *ret = NULL;
        if (!v || json_is_null(v)) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_array(v))
                return fail(err, "%s%s: must be a list", path, key);
        *ret = v;
        return 0;
}

static int get_object(const json_t *o, const char *key, const json_t **ret, char *err, const char *path) {
        const json_t *v = json_object_get(o, key);
        *ret = NULL;
        if (!v || json_is_null(v)) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_object(v))
                return fail(err, "%s%s: must be an object", path, key);
        *ret = v;
        return 0;
}

static char *xstrdup(const char *s) {
        char *p = strdup(s);
        if (!p)
                abort();
        return p;
}

static void *xcalloc(size_t n, size_t size) {
        void *p = calloc(n ? n : 1, size);
        if (!p)
                abort();
        return p;
}

/* metadata.name and metadata.namespace, validated; "ns/name" in *ret_key. */
static int decode_meta(const json_t *obj, bool namespaced, char **ret_key, const json_t **ret_labels,
                       char *err) {
        const json_t *md;
        const char *name, *ns = NULL;
        int r;

        if (!json_is_object(obj))
                return fail(err, "object: must be a mapping");
        if ((r = get_object(obj, "metadata", &md, err, "")) < 0)
                return r;
        if (!md)
                return fail(err, "metadata: missing");
        if ((r = get_str(md, "name", &name, err, "metadata.")) < 0)
                return r;
        if (!name)
                return fail(err, "metadata.name: missing");
        if (kube_valid_dns_subdomain(name) < 0)
                return fail(err, "metadata.name: \"%.64s\" is not a valid name", name);
        if (namespaced) {
                if ((r = get_str(md, "namespace", &ns, err, "metadata.")) < 0)
                        return r;
                if (!ns || !*ns)
                        ns = "default";     /* what kubectl applies to a manifest */
                if (kube_valid_dns_label(ns) < 0)
                        return fail(err, "metadata.namespace: \"%.64s\" is not a valid namespace", ns);
        }
        if ((r = get_object(md, "labels", ret_labels, err, "metadata.")) < 0)
                return r;
        if (ns) {
                size_t len = strlen(ns) + strlen(name) + 2;
                *ret_key = xcalloc(len, 1);
                snprintf(*ret_key, len, "%s/%s", ns, name);
        } else {
                *ret_key = xstrdup(name);
        }
        return 0;
}

static const char *label(const json_t *labels, const char *key) {
        const json_t *v = json_object_get(labels, key);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

static int decode_protocol(const json_t *o, enum l4_proto *ret, char *err, const char *path) {
        const char *p;
        int r = get_str(o, "protocol", &p, err, path);
        if (r < 0)
                return r;
        if (!p) {
                *ret = L4_TCP;
                return 0;
        }
        enum l4_proto proto = l4_proto_from_string(p);
        if (proto < 0)
                return fail(err, "%sprotocol: unknown protocol \"%.32s\" (want TCP, UDP or SCTP)", path, p);
        *ret = proto;
        return 0;
}

static int decode_ip_list(const json_t *arr, struct inet_addr **ret, size_t *ret_n, char *err,
                          const char *path) {
        size_t n = json_array_size(arr);
        struct inet_addr *a = xcalloc(n, sizeof *a);
        for (size_t i = 0; i < n; i++) {
                const char *s = json_string_value(json_array_get(arr, i));
                if (!s || inet_addr_parse(s, &a[i]) < 0) {
                        free(a);
                        return fail(err, "%s[%zu]: \"%.64s\" is not an IP address", path, i, s ? s : "");
                }
        }
        *ret = a;
        *ret_n = n;
        return 0;
}

static int decode_service_ports(const json_t *spec, struct svc *s, char *err) {
        const json_t *ports;
        char path[64];
        int r;

        if ((r = get_array(spec, "ports", &ports, err, "spec.")) < 0)
                return r;
        s->n_ports = json_array_size(ports);
        s->ports = xcalloc(s->n_ports, sizeof *s->ports);
        for (size_t i = 0; i < s->n_ports; i++) {
                const json_t *p = json_array_get(ports, i);
                struct svc_port *sp = &s->ports[i];
                const char *name;
                long long v = 0;
                bool set;

                snprintf(path, sizeof path, "spec.ports[%zu].", i);
                if (!json_is_object(p))
                        return fail(err, "spec.ports[%zu]: must be an object", i);
                if ((r = get_str(p, "name", &name, err, path)) < 0)
                        return r;
                if (valid_port_name(name ? name : "") < 0)
                        return fail(err, "%sname: \"%.64s\" is not a valid port name", path, name);
                sp->name = xstrdup(name ? name : "");
                if ((r = decode_protocol(p, &sp->proto, err, path)) < 0)
                        return r;
                if ((r = get_int(p, "port", 1, 65535, &v, &set, err, path)) < 0)
                        return r;
                if (!set)
                        return fail(err, "%sport: missing", path);
                sp->port = (uint16_t) v;
                v = 0;
                if ((r = get_int(p, "nodePort", 0, 65535, &v, &set, err, path)) < 0)
                        return r;
                sp->node_port = (uint16_t) v;
                /* targetPort only matters to the EndpointSlice controller, which
                 * resolved it into the slice's port numbers; check its type. */
                const json_t *tp = json_object_get(p, "targetPort");
                if (tp && !json_is_null(tp) && !json_is_integer(tp) && !json_is_string(tp))
                        return fail(err, "%stargetPort: must be a number or a port name", path);
                for (size_t j = 0; j < i; j++)
                        if (strcmp(s->ports[j].name, sp->name) == 0 && s->ports[j].proto == sp->proto)
                                return fail(err, "%sname: duplicate port \"%s\"", path, sp->name);
        }
        return 0;
}

static int decode_service_ips(const json_t *spec, struct svc *s, char *err) {
        const json_t *ips;
        const char *cip;
        int r;

        if ((r = get_str(spec, "clusterIP", &cip, err, "spec.")) < 0)
                return r;
        if ((r = get_array(spec, "clusterIPs", &ips, err, "spec.")) < 0)
                return r;
        if (cip && strcmp(cip, "None") == 0)
                return fail(err, "headless service (clusterIP None)"), KUBE_IGNORED;

        /* clusterIPs (dual-stack) holds clusterIP first; fall back to it. */
        size_t n = json_array_size(ips);
        for (size_t i = 0; i < n || (n == 0 && i == 0 && cip && *cip); i++) {
                const char *t = n ? json_string_value(json_array_get(ips, i)) : cip;
                struct inet_addr a;
                if (t && strcmp(t, "None") == 0)
                        return fail(err, "headless service (clusterIP None)"), KUBE_IGNORED;
                if (!t || inet_addr_parse(t, &a) < 0)
                        return fail(err, "spec.clusterIP%s: \"%.64s\" is not an IP address", n ? "s" : "",
                                    t ? t : "");
                for (size_t j = 0; j < s->n_cluster_ips; j++)
                        if (s->cluster_ips[j].family == a.family)
                                return fail(err, "spec.clusterIPs: two addresses of the IPv%u family",
                                            a.family);
                if (s->n_cluster_ips == 2)
                        return fail(err, "spec.clusterIPs: more than two addresses");
                s->cluster_ips[s->n_cluster_ips++] = a;
        }
        if (s->n_cluster_ips == 0)
                return fail(err, "no cluster IP allocated (spec.clusterIP is empty)"), KUBE_IGNORED;

        if ((r = get_array(spec, "externalIPs", &ips, err, "spec.")) < 0)
                return r;
        size_t n_external = 0;
        if ((r = decode_ip_list(ips, &s->external_ips, &n_external, err, "spec.externalIPs")) < 0)
                return r;
        s->n_external_ips = (uint32_t) n_external;     /* a JSON array in memory: far fewer than 2^32 */

        if ((r = get_array(spec, "loadBalancerSourceRanges", &ips, err, "spec.")) < 0)
                return r;
        s->n_source_ranges = json_array_size(ips);
        s->source_ranges = xcalloc(s->n_source_ranges, sizeof *s->source_ranges);
        for (size_t i = 0; i < s->n_source_ranges; i++) {
                const char *t = json_string_value(json_array_get(ips, i));
                if (!t || inet_cidr_parse(t, &s->source_ranges[i]) < 0)
                        return fail(err, "spec.loadBalancerSourceRanges[%zu]: \"%.64s\" is not a CIDR", i,
                                    t ? t : "");
        }
        return 0;
}

static int decode_lb_status(const json_t *obj, struct svc *s, char *err) {
        const json_t *status, *lb, *ingress;
        int r;

        if ((r = get_object(obj, "status", &status, err, "")) < 0)
                return r;
        if ((r = get_object(status, "loadBalancer", &lb, err, "status.")) < 0)
                return r;
        if ((r = get_array(lb, "ingress", &ingress, err, "status.loadBalancer.")) < 0)
                return r;
        size_t n = json_array_size(ingress);
        s->lb_ips = xcalloc(n, sizeof *s->lb_ips);
        for (size_t i = 0; i < n; i++) {
                const json_t *in = json_array_get(ingress, i);
                char path[64];
                const char *ip, *mode;
                snprintf(path, sizeof path, "status.loadBalancer.ingress[%zu].", i);
                if (!json_is_object(in))
                        return fail(err, "status.loadBalancer.ingress[%zu]: must be an object", i);
                if ((r = get_str(in, "ip", &ip, err, path)) < 0 || (r = get_str(in, "ipMode", &mode, err, path)) < 0)
                        return r;
                if (!ip || !*ip)
                        continue;       /* hostname-only ingress */
                if (mode && strcmp(mode, "VIP") != 0) {
                        if (strcmp(mode, "Proxy") == 0)
                                continue;       /* the load balancer proxies: not ours */
                        return fail(err, "%sipMode: unknown mode \"%.32s\"", path, mode);
                }
                if (inet_addr_parse(ip, &s->lb_ips[s->n_lb_ips]) < 0)
                        return fail(err, "%sip: \"%.64s\" is not an IP address", path, ip);
                s->n_lb_ips++;
        }
        return 0;
}

static int decode_policy(const json_t *spec, const char *key, enum traffic_policy *ret, char *err) {
        const char *p;
        int r = get_str(spec, key, &p, err, "spec.");
        if (r < 0)
                return r;
        if (!p || !*p) {
                *ret = TRAFFIC_POLICY_CLUSTER;
                return 0;
        }
        int v = traffic_policy_from_string(p);
        if (v < 0)
                return fail(err, "spec.%s: unknown policy \"%.32s\" (want Cluster or Local)", key, p);
        *ret = (enum traffic_policy) v;
        return 0;
}

static int decode_affinity(const json_t *spec, struct svc *s, char *err) {
        const json_t *cfg, *cip;
        const char *aff;
        long long t = DEFAULT_AFFINITY_TIMEOUT;
        bool set;
        int r;

        if ((r = get_str(spec, "sessionAffinity", &aff, err, "spec.")) < 0)
                return r;
        if (!aff || !*aff || strcmp(aff, "None") == 0)
                return 0;
        if (strcmp(aff, "ClientIP") != 0)
                return fail(err, "spec.sessionAffinity: unknown value \"%.32s\" (want None or ClientIP)", aff);
        if ((r = get_object(spec, "sessionAffinityConfig", &cfg, err, "spec.")) < 0 ||
            (r = get_object(cfg, "clientIP", &cip, err, "spec.sessionAffinityConfig.")) < 0 ||
            (r = get_int(cip, "timeoutSeconds", 1, MAX_AFFINITY_TIMEOUT, &t, &set, err,
                         "spec.sessionAffinityConfig.clientIP.")) < 0)
                return r;
        s->affinity_client_ip = true;
        s->affinity_timeout = (uint32_t) t;
        return 0;
}

int kube_decode_service(const json_t *obj, struct svc **ret, char err[KUBE_ERRLEN]) {
        _cleanup_(svc_freep) struct svc *s = xcalloc(1, sizeof *s);
        const json_t *labels, *spec;
        const char *type;
        long long v = 0;
        bool set;
        int r;

        err[0] = '\0';
        if ((r = decode_meta(obj, true, &s->key, &labels, err)) < 0)
                return r;
        s->name = strchr(s->key, '/') + 1;

        if (label(labels, LABEL_PROXY_NAME))
                return fail(err, "labelled " LABEL_PROXY_NAME " (served by another proxy)"), KUBE_IGNORED;
        if (json_object_get(labels, LABEL_HEADLESS))
                return fail(err, "labelled " LABEL_HEADLESS), KUBE_IGNORED;

        if ((r = get_object(obj, "spec", &spec, err, "")) < 0)
                return r;
        if (!spec)
                return fail(err, "spec: missing");
        if ((r = get_str(spec, "type", &type, err, "spec.")) < 0)
                return r;
        if (!type || !*type) {
                s->type = SVC_TYPE_CLUSTER_IP;
        } else {
                int t = svc_type_from_string(type);
                if (t < 0)
                        return fail(err, "spec.type: unknown type \"%.32s\"", type);
                s->type = (enum svc_type) t;
        }
        if (s->type == SVC_TYPE_EXTERNAL_NAME)
                return fail(err, "type ExternalName (DNS only)"), KUBE_IGNORED;

        r = decode_service_ips(spec, s, err);
        if (r != 0)
                return r;
        if ((r = decode_service_ports(spec, s, err)) < 0 || (r = decode_lb_status(obj, s, err)) < 0 ||
            (r = decode_policy(spec, "externalTrafficPolicy", &s->external_policy, err)) < 0 ||
            (r = decode_policy(spec, "internalTrafficPolicy", &s->internal_policy, err)) < 0 ||
            (r = decode_affinity(spec, s, err)) < 0)
                return r;
        if ((r = get_int(spec, "healthCheckNodePort", 0, 65535, &v, &set, err, "spec.")) < 0)
                return r;
        /* Upstream's NeedsHealthCheck(): only LoadBalancer with ETP Local. */
        if (s->type == SVC_TYPE_LOAD_BALANCER && s->external_policy == TRAFFIC_POLICY_LOCAL)
                s->health_check_node_port = (uint16_t) v;

        *ret = svc_pack(TAKE_PTR(s));
        return 0;
}

static int decode_strv_names(const json_t *arr, char ***ret, size_t *ret_n, bool label_value,
                             char *err, const char *path) {
        size_t n = json_array_size(arr);
        if (n == 0) {
                *ret = NULL;    /* most endpoints have no hints: no allocation */
                *ret_n = 0;
                return 0;
        }
        char **v = xcalloc(n, sizeof *v);
        for (size_t i = 0; i < n; i++) {
                const char *s = json_string_value(json_object_get(json_array_get(arr, i), "name"));
                if (!s || (label_value ? kube_valid_label_value(s) : kube_valid_dns_subdomain(s)) < 0) {
                        for (size_t j = 0; j < i; j++)
                                free(v[j]);
                        free(v);
                        return fail(err, "%s[%zu].name: \"%.64s\" is not valid", path, i, s ? s : "");
                }
                v[i] = xstrdup(s);
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* An endpoint's hints: at most 8 by the API's validation; kproxy takes up
 * to 64 and refuses more (its count is 16 bits). */
static int decode_hints(const json_t *arr, char ***ret, uint16_t *ret_n, bool label_value, char *err,
                        const char *path) {
        size_t n = 0;
        if (json_array_size(arr) > 64)
                return fail(err, "%s: %zu hints, more than 64", path, json_array_size(arr));
        int r = decode_strv_names(arr, ret, &n, label_value, err, path);
        *ret_n = (uint16_t) n;
        return r;
}

/* Decodes endpoint e into the slice's next one (s->n_endpoints); its
 * hints, if any, go to the slice's list. */
static int decode_slice_endpoint(const json_t *e, struct slice *s, bool *ret_skip, char *err, const char *path) {
        struct slice_endpoint *ep = &s->endpoints[s->n_endpoints];
        uint8_t family = s->family;
        struct endpoint_hints h = {0};
        const json_t *addrs, *cond, *hints, *arr;
        const char *node;
        char sub[96];
        int r;

        *ret_skip = false;
        if (!json_is_object(e))
                return fail(err, "%s: must be an object", path);
        snprintf(sub, sizeof sub, "%s.", path);
        if ((r = get_array(e, "addresses", &addrs, err, sub)) < 0)
                return r;
        if (json_array_size(addrs) == 0) {
                *ret_skip = true;       /* upstream ignores endpoints without addresses */
                return 0;
        }
        const char *a = json_string_value(json_array_get(addrs, 0));
        struct inet_addr addr;
        if (!a || inet_addr_parse(a, &addr) < 0 || addr.family != family)
                return fail(err, "%s.addresses[0]: \"%.64s\" is not an IPv%u address", path, a ? a : "",
                            family);
        slice_endpoint_set_addr(s, s->n_endpoints, &addr);

        bool ready, serving, terminating;
        if ((r = get_object(e, "conditions", &cond, err, sub)) < 0)
                return r;
        snprintf(sub, sizeof sub, "%s.conditions.", path);
        if ((r = get_bool(cond, "ready", true, &ready, err, sub)) < 0 ||
            (r = get_bool(cond, "serving", true, &serving, err, sub)) < 0 ||
            (r = get_bool(cond, "terminating", false, &terminating, err, sub)) < 0)
                return r;
        ep->ready = ready;
        ep->serving = serving;
        ep->terminating = terminating;

        snprintf(sub, sizeof sub, "%s.", path);
        if ((r = get_str(e, "nodeName", &node, err, sub)) < 0)
                return r;
        if (node) {
                if (kube_valid_dns_subdomain(node) < 0)
                        return fail(err, "%s.nodeName: \"%.64s\" is not a valid node name", path, node);
                ep->node = intern(node);
        }

        if ((r = get_object(e, "hints", &hints, err, sub)) < 0)
                return r;
        snprintf(sub, sizeof sub, "%s.hints.", path);
        if ((r = get_array(hints, "forZones", &arr, err, sub)) < 0)
                return r;
        snprintf(sub, sizeof sub, "%s.hints.forZones", path);
        if ((r = decode_hints(arr, &h.zones, &h.n_zones, true, err, sub)) < 0)
                goto out;
        snprintf(sub, sizeof sub, "%s.hints.", path);
        if ((r = get_array(hints, "forNodes", &arr, err, sub)) < 0)
                goto out;
        snprintf(sub, sizeof sub, "%s.hints.forNodes", path);
        if ((r = decode_hints(arr, &h.nodes, &h.n_nodes, false, err, sub)) < 0)
                goto out;
        if (h.n_zones == 0 && h.n_nodes == 0)
                goto out;
        if (s->n_hints >= UINT16_MAX) {
                r = fail(err, "%s.hints: more than %u endpoints of the slice have hints", path, UINT16_MAX - 1);
                goto out;
        }
        struct endpoint_hints *more = realloc(s->hints, (s->n_hints + 1) * sizeof *s->hints);
        if (!more)
                abort();
        s->hints = more;
        s->hints[s->n_hints++] = h;
        ep->hints = (uint16_t) s->n_hints;
        return 0;
out:
        endpoint_hints_done(&h);
        return r;
}

/* RFC 3339 in UTC ("2024-05-06T07:08:09Z", optional fraction) to Unix
 * seconds; 0 when absent or unreadable (the metric is then just not
 * observed: a bad annotation must not cost the slice). */
static double parse_trigger_time(const char *s) {
        struct tm tm = {0};
        const char *rest;
        double frac = 0;
        if (!s || !(rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)))
                return 0;
        if (*rest == '.') {
                char *end;
                frac = strtod(rest, &end);
                rest = end;
        }
        if (strcmp(rest, "Z") != 0)
                return 0;
        time_t t = timegm(&tm);
        return t < 0 ? 0 : (double) t + frac;
}

int kube_decode_slice(const json_t *obj, struct slice **ret, char err[KUBE_ERRLEN]) {
        _cleanup_(slice_freep) struct slice *s = xcalloc(1, sizeof *s);
        const json_t *labels, *ports, *eps;
        const char *svc, *at;
        int r;

        err[0] = '\0';
        if ((r = decode_meta(obj, true, &s->key, &labels, err)) < 0)
                return r;
        if (json_object_get(labels, LABEL_HEADLESS))
                return fail(err, "labelled " LABEL_HEADLESS), KUBE_IGNORED;
        svc = label(labels, LABEL_SERVICE_NAME);
        if (!svc)
                return fail(err, "metadata.labels: missing label " LABEL_SERVICE_NAME);
        if (kube_valid_dns_label(svc) < 0)
                return fail(err, "metadata.labels." LABEL_SERVICE_NAME ": \"%.64s\" is not a service name", svc);
        s->trigger_time = parse_trigger_time(json_string_value(json_object_get(
                json_object_get(json_object_get(obj, "metadata"), "annotations"),
                "endpoints.kubernetes.io/last-change-trigger-time")));
        size_t nslen = (size_t) (strchr(s->key, '/') - s->key);
        size_t len = nslen + strlen(svc) + 2;
        s->service_key = xcalloc(len, 1);
        snprintf(s->service_key, len, "%.*s/%s", (int) nslen, s->key, svc);

        if ((r = get_str(obj, "addressType", &at, err, "")) < 0)
                return r;
        if (!at)
                return fail(err, "addressType: missing");
        if (strcmp(at, "IPv4") == 0)
                s->family = 4;
        else if (strcmp(at, "IPv6") == 0)
                s->family = 6;
        else if (strcmp(at, "FQDN") == 0)
                return fail(err, "addressType FQDN"), KUBE_IGNORED;
        else
                return fail(err, "addressType: unknown type \"%.32s\"", at);

        if ((r = get_array(obj, "ports", &ports, err, "")) < 0)
                return r;
        if (json_array_size(ports) > UINT16_MAX)        /* the API allows 100 */
                return fail(err, "ports: %zu ports, more than %u", json_array_size(ports), UINT16_MAX);
        s->n_ports = (uint16_t) json_array_size(ports);
        s->ports = xcalloc(s->n_ports, sizeof *s->ports);
        for (size_t i = 0; i < s->n_ports; i++) {
                const json_t *p = json_array_get(ports, i);
                struct slice_port *sp = &s->ports[i];
                char path[48];
                const char *name;
                long long v = 0;
                bool set;

                snprintf(path, sizeof path, "ports[%zu].", i);
                if (!json_is_object(p))
                        return fail(err, "ports[%zu]: must be an object", i);
                if ((r = get_str(p, "name", &name, err, path)) < 0)
                        return r;
                if (valid_port_name(name ? name : "") < 0)
                        return fail(err, "%sname: \"%.64s\" is not a valid port name", path, name);
                /* The API defaults a missing name to "" (an unnamed port). */
                sp->name = xstrdup(name ? name : "");
                if ((r = decode_protocol(p, &sp->proto, err, path)) < 0)
                        return r;
                if ((r = get_int(p, "port", 1, 65535, &v, &set, err, path)) < 0)
                        return r;
                sp->port = set ? (uint16_t) v : 0;      /* nil port: unusable, ignored */
        }

        if ((r = get_array(obj, "endpoints", &eps, err, "")) < 0)
                return r;
        size_t n = json_array_size(eps);
        s->endpoints = xcalloc(n, sizeof *s->endpoints);
        s->addrs = xcalloc(n, slice_addr_len(s));
        for (size_t i = 0; i < n; i++) {
                char path[48];
                bool skip;
                snprintf(path, sizeof path, "endpoints[%zu]", i);
                r = decode_slice_endpoint(json_array_get(eps, i), s, &skip, err, path);
                s->n_endpoints++;       /* so that slice_free() frees a half-built one */
                if (r < 0)
                        return r;
                if (skip)
                        s->n_endpoints--;
        }
        *ret = slice_pack(TAKE_PTR(s));
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int kube_decode_node(const json_t *obj, struct node **ret, char err[KUBE_ERRLEN]) {
        _cleanup_(node_freep) struct node *n = xcalloc(1, sizeof *n);
        const json_t *labels, *status, *addrs, *spec, *cidrs;
        const char *k, *zone;
        const json_t *v;
        int r;

        err[0] = '\0';
        if ((r = decode_meta(obj, false, &n->name, &labels, err)) < 0)
                return r;

        n->labels = xcalloc(json_object_size(labels), sizeof *n->labels);
        json_object_foreach((json_t *) labels, k, v) {
                const char *val = json_string_value(v);
                if (!val)
                        return fail(err, "metadata.labels.%.64s: must be a string", k);
                size_t len = strlen(k) + strlen(val) + 2;
                n->labels[n->n_labels] = xcalloc(len, 1);
                snprintf(n->labels[n->n_labels++], len, "%s=%s", k, val);
        }
        qsort(n->labels, n->n_labels, sizeof *n->labels, cmp_str);
        zone = label(labels, LABEL_ZONE);
        if (zone) {
                if (kube_valid_label_value(zone) < 0)
                        return fail(err, "metadata.labels." LABEL_ZONE ": \"%.64s\" is not valid", zone);
                n->zone = xstrdup(zone);
        }

        if ((r = get_object(obj, "status", &status, err, "")) < 0 ||
            (r = get_array(status, "addresses", &addrs, err, "status.")) < 0)
                return r;
        n->addrs = xcalloc(json_array_size(addrs), sizeof *n->addrs);
        for (size_t i = 0; i < json_array_size(addrs); i++) {
                const json_t *a = json_array_get(addrs, i);
                const char *type = json_string_value(json_object_get(a, "type"));
                const char *addr = json_string_value(json_object_get(a, "address"));
                int t = type && strcmp(type, "InternalIP") == 0   ? NODE_ADDR_INTERNAL
                        : type && strcmp(type, "ExternalIP") == 0 ? NODE_ADDR_EXTERNAL
                                                                  : 0;
                if (t == 0)
                        continue;       /* Hostname, InternalDNS, ... */
                if (!addr || inet_addr_parse(addr, &n->addrs[n->n_addrs].addr) < 0)
                        return fail(err, "status.addresses[%zu].address: \"%.64s\" is not an IP address", i,
                                    addr ? addr : "");
                n->addrs[n->n_addrs++].type = t;
        }

        if ((r = get_object(obj, "spec", &spec, err, "")) < 0 ||
            (r = get_array(spec, "podCIDRs", &cidrs, err, "spec.")) < 0)
                return r;

        /* Upstream's node eligibility: a node on its way out (deleted, or
         * marked by the cluster autoscaler) fails /healthz so load
         * balancers drain it first. */
        const json_t *taints = json_object_get(spec, "taints");
        size_t ti;
        const json_t *taint;
        if (json_string_value(json_object_get(json_object_get(obj, "metadata"), "deletionTimestamp")))
                n->leaving = true;
        json_array_foreach((json_t *) taints, ti, taint) {
                const char *key = json_string_value(json_object_get(taint, "key"));
                if (key && strcmp(key, "ToBeDeletedByClusterAutoscaler") == 0)
                        n->leaving = true;
        }
        const char *one = NULL;
        if (!cidrs && (r = get_str(spec, "podCIDR", &one, err, "spec.")) < 0)
                return r;
        size_t nc = cidrs ? json_array_size(cidrs) : one ? 1 : 0;
        n->pod_cidrs = xcalloc(nc, sizeof *n->pod_cidrs);
        for (size_t i = 0; i < nc; i++) {
                const char *c = cidrs ? json_string_value(json_array_get(cidrs, i)) : one;
                if (!c || inet_cidr_parse(c, &n->pod_cidrs[i]) < 0)
                        return fail(err, "spec.podCIDRs[%zu]: \"%.64s\" is not a CIDR", i, c ? c : "");
        }
        n->n_pod_cidrs = nc;
        *ret = TAKE_PTR(n);
        return 0;
}

int kube_decode_service_cidr(const json_t *obj, char **ret_name, struct inet_cidr **ret_cidrs, size_t *ret_n,
                             char err[KUBE_ERRLEN]) {
        _cleanup_free_ char *name = NULL;
        _cleanup_free_ struct inet_cidr *cidrs = NULL;
        const json_t *labels, *spec, *list;
        int r;

        err[0] = '\0';
        if ((r = decode_meta(obj, false, &name, &labels, err)) < 0 ||
            (r = get_object(obj, "spec", &spec, err, "")) < 0 ||
            (r = get_array(spec, "cidrs", &list, err, "spec.")) < 0)
                return r;
        size_t n = json_array_size(list);
        if (n == 0)
                return fail(err, "spec.cidrs: missing");
        if (n > 2)
                return fail(err, "spec.cidrs: %zu CIDRs, at most one per IP family", n);
        cidrs = xcalloc(n, sizeof *cidrs);
        for (size_t i = 0; i < n; i++) {
                const char *c = json_string_value(json_array_get(list, i));
                if (!c || inet_cidr_parse(c, &cidrs[i]) < 0)
                        return fail(err, "spec.cidrs[%zu]: \"%.64s\" is not a CIDR", i, c ? c : "");
        }
        if (n == 2 && cidrs[0].addr.family == cidrs[1].addr.family)
                return fail(err, "spec.cidrs: two CIDRs of one IP family");
        *ret_name = TAKE_PTR(name);
        *ret_cidrs = TAKE_PTR(cidrs);
        *ret_n = n;
        return 0;
}
