/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Services (v1): cluster IPs, ports, external IPs, source ranges, the load
 * balancer's ingress IPs, traffic policies and session affinity, each field
 * checked, with the API server's defaults for manifests. Headless and
 * ExternalName services, and those another proxy serves, are KUBE_IGNORED.
 */
#include "kube/decode.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/decode-field.h"
#include "model/model.h"
#include "util/cleanup.h"
#include "util/inet.h"
#include "util/alloc.h"

#define DEFAULT_AFFINITY_TIMEOUT 10800
#define MAX_AFFINITY_TIMEOUT 86400

static int decode_ip_list(const json_t *arr, struct inet_addr **ret, size_t *ret_n, char *err,
                          const char *path) {
        size_t n = json_array_size(arr);
        struct inet_addr *a = xcalloc(n, sizeof *a);
        for (size_t i = 0; i < n; i++) {
                const char *s = json_string_value(json_array_get(arr, i));
                if (!s || inet_addr_parse(s, &a[i]) < 0) {
                        free(a);
                        return kube_field_fail(err, "%s[%zu]: \"%.64s\" is not an IP address", path, i, s ? s : "");
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

        if ((r = kube_field_array(spec, "ports", &ports, err, "spec.")) < 0)
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
                        return kube_field_fail(err, "spec.ports[%zu]: must be an object", i);
                if ((r = kube_field_str(p, "name", &name, err, path)) < 0)
                        return r;
                if (kube_field_port_name(name ? name : "") < 0)
                        return kube_field_fail(err, "%sname: \"%.64s\" is not a valid port name", path, name);
                sp->name = xstrdup(name ? name : "");
                if ((r = kube_field_protocol(p, &sp->proto, err, path)) < 0)
                        return r;
                if ((r = kube_field_int(p, "port", 1, 65535, &v, &set, err, path)) < 0)
                        return r;
                if (!set)
                        return kube_field_fail(err, "%sport: missing", path);
                sp->port = (uint16_t) v;
                v = 0;
                if ((r = kube_field_int(p, "nodePort", 0, 65535, &v, &set, err, path)) < 0)
                        return r;
                sp->node_port = (uint16_t) v;
                /* targetPort only matters to the EndpointSlice controller, which
                 * resolved it into the slice's port numbers; check its type. */
                const json_t *tp = json_object_get(p, "targetPort");
                if (tp && !json_is_null(tp) && !json_is_integer(tp) && !json_is_string(tp))
                        return kube_field_fail(err, "%stargetPort: must be a number or a port name", path);
                for (size_t j = 0; j < i; j++)
                        if (strcmp(s->ports[j].name, sp->name) == 0 && s->ports[j].proto == sp->proto)
                                return kube_field_fail(err, "%sname: duplicate port \"%s\"", path, sp->name);
        }
        return 0;
}

static int decode_service_ips(const json_t *spec, struct svc *s, char *err) {
        const json_t *ips;
        const char *cip;
        int r;

        if ((r = kube_field_str(spec, "clusterIP", &cip, err, "spec.")) < 0)
                return r;
        if ((r = kube_field_array(spec, "clusterIPs", &ips, err, "spec.")) < 0)
                return r;
        if (cip && strcmp(cip, "None") == 0)
                return kube_field_fail(err, "headless service (clusterIP None)"), KUBE_IGNORED;

        /* clusterIPs (dual-stack) holds clusterIP first; fall back to it. */
        size_t n = json_array_size(ips);
        for (size_t i = 0; i < n || (n == 0 && i == 0 && cip && *cip); i++) {
                const char *t = n ? json_string_value(json_array_get(ips, i)) : cip;
                struct inet_addr a;
                if (t && strcmp(t, "None") == 0)
                        return kube_field_fail(err, "headless service (clusterIP None)"), KUBE_IGNORED;
                if (!t || inet_addr_parse(t, &a) < 0)
                        return kube_field_fail(err, "spec.clusterIP%s: \"%.64s\" is not an IP address", n ? "s" : "",
                                    t ? t : "");
                for (size_t j = 0; j < s->n_cluster_ips; j++)
                        if (s->cluster_ips[j].family == a.family)
                                return kube_field_fail(err, "spec.clusterIPs: two addresses of the IPv%u family",
                                            a.family);
                if (s->n_cluster_ips == 2)
                        return kube_field_fail(err, "spec.clusterIPs: more than two addresses");
                s->cluster_ips[s->n_cluster_ips++] = a;
        }
        if (s->n_cluster_ips == 0)
                return kube_field_fail(err, "no cluster IP allocated (spec.clusterIP is empty)"), KUBE_IGNORED;

        if ((r = kube_field_array(spec, "externalIPs", &ips, err, "spec.")) < 0)
                return r;
        size_t n_external = 0;
        if ((r = decode_ip_list(ips, &s->external_ips, &n_external, err, "spec.externalIPs")) < 0)
                return r;
        s->n_external_ips = (uint32_t) n_external;     /* a JSON array in memory: far fewer than 2^32 */

        if ((r = kube_field_array(spec, "loadBalancerSourceRanges", &ips, err, "spec.")) < 0)
                return r;
        s->n_source_ranges = json_array_size(ips);
        s->source_ranges = xcalloc(s->n_source_ranges, sizeof *s->source_ranges);
        for (size_t i = 0; i < s->n_source_ranges; i++) {
                const char *t = json_string_value(json_array_get(ips, i));
                if (!t || inet_cidr_parse(t, &s->source_ranges[i]) < 0)
                        return kube_field_fail(err, "spec.loadBalancerSourceRanges[%zu]: \"%.64s\" is not a CIDR", i,
                                    t ? t : "");
        }
        return 0;
}

static int decode_lb_status(const json_t *obj, struct svc *s, char *err) {
        const json_t *status, *lb, *ingress;
        int r;

        if ((r = kube_field_object(obj, "status", &status, err, "")) < 0)
                return r;
        if ((r = kube_field_object(status, "loadBalancer", &lb, err, "status.")) < 0)
                return r;
        if ((r = kube_field_array(lb, "ingress", &ingress, err, "status.loadBalancer.")) < 0)
                return r;
        size_t n = json_array_size(ingress);
        s->lb_ips = xcalloc(n, sizeof *s->lb_ips);
        for (size_t i = 0; i < n; i++) {
                const json_t *in = json_array_get(ingress, i);
                char path[64];
                const char *ip, *mode;
                snprintf(path, sizeof path, "status.loadBalancer.ingress[%zu].", i);
                if (!json_is_object(in))
                        return kube_field_fail(err, "status.loadBalancer.ingress[%zu]: must be an object", i);
                if ((r = kube_field_str(in, "ip", &ip, err, path)) < 0 ||
                    (r = kube_field_str(in, "ipMode", &mode, err, path)) < 0)
                        return r;
                if (!ip || !*ip)
                        continue;       /* hostname-only ingress */
                if (mode && strcmp(mode, "VIP") != 0) {
                        if (strcmp(mode, "Proxy") == 0)
                                continue;       /* the load balancer proxies: not ours */
                        return kube_field_fail(err, "%sipMode: unknown mode \"%.32s\"", path, mode);
                }
                if (inet_addr_parse(ip, &s->lb_ips[s->n_lb_ips]) < 0)
                        return kube_field_fail(err, "%sip: \"%.64s\" is not an IP address", path, ip);
                s->n_lb_ips++;
        }
        return 0;
}

static int decode_policy(const json_t *spec, const char *key, enum traffic_policy *ret, char *err) {
        const char *p;
        int r = kube_field_str(spec, key, &p, err, "spec.");
        if (r < 0)
                return r;
        if (!p || !*p) {
                *ret = TRAFFIC_POLICY_CLUSTER;
                return 0;
        }
        int v = traffic_policy_from_string(p);
        if (v < 0)
                return kube_field_fail(err, "spec.%s: unknown policy \"%.32s\" (want Cluster or Local)", key, p);
        *ret = (enum traffic_policy) v;
        return 0;
}

static int decode_affinity(const json_t *spec, struct svc *s, char *err) {
        const json_t *cfg, *cip;
        const char *aff;
        long long t = DEFAULT_AFFINITY_TIMEOUT;
        bool set;
        int r;

        if ((r = kube_field_str(spec, "sessionAffinity", &aff, err, "spec.")) < 0)
                return r;
        if (!aff || !*aff || strcmp(aff, "None") == 0)
                return 0;
        if (strcmp(aff, "ClientIP") != 0)
                return kube_field_fail(err, "spec.sessionAffinity: unknown value \"%.32s\" (want None or ClientIP)",
                                       aff);
        if ((r = kube_field_object(spec, "sessionAffinityConfig", &cfg, err, "spec.")) < 0 ||
            (r = kube_field_object(cfg, "clientIP", &cip, err, "spec.sessionAffinityConfig.")) < 0 ||
            (r = kube_field_int(cip, "timeoutSeconds", 1, MAX_AFFINITY_TIMEOUT, &t, &set, err,
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
        if ((r = kube_field_meta(obj, true, &s->key, &labels, err)) < 0)
                return r;
        const char *slash = strchr(s->key, '/');
        s->name = slash ? slash + 1 : s->key;

        if (kube_field_label(labels, KUBE_LABEL_PROXY_NAME))
                return kube_field_fail(err, "labelled " KUBE_LABEL_PROXY_NAME " (served by another proxy)"),
                       KUBE_IGNORED;
        if (json_object_get(labels, KUBE_LABEL_HEADLESS))
                return kube_field_fail(err, "labelled " KUBE_LABEL_HEADLESS), KUBE_IGNORED;

        if ((r = kube_field_object(obj, "spec", &spec, err, "")) < 0)
                return r;
        if (!spec)
                return kube_field_fail(err, "spec: missing");
        if ((r = kube_field_str(spec, "type", &type, err, "spec.")) < 0)
                return r;
        if (!type || !*type) {
                s->type = SVC_TYPE_CLUSTER_IP;
        } else {
                int t = svc_type_from_string(type);
                if (t < 0)
                        return kube_field_fail(err, "spec.type: unknown type \"%.32s\"", type);
                s->type = (enum svc_type) t;
        }
        if (s->type == SVC_TYPE_EXTERNAL_NAME)
                return kube_field_fail(err, "type ExternalName (DNS only)"), KUBE_IGNORED;

        r = decode_service_ips(spec, s, err);
        if (r != 0)
                return r;
        if ((r = decode_service_ports(spec, s, err)) < 0 || (r = decode_lb_status(obj, s, err)) < 0 ||
            (r = decode_policy(spec, "externalTrafficPolicy", &s->external_policy, err)) < 0 ||
            (r = decode_policy(spec, "internalTrafficPolicy", &s->internal_policy, err)) < 0 ||
            (r = decode_affinity(spec, s, err)) < 0)
                return r;
        if ((r = kube_field_int(spec, "healthCheckNodePort", 0, 65535, &v, &set, err, "spec.")) < 0)
                return r;
        /* Upstream's NeedsHealthCheck(): only LoadBalancer with ETP Local. */
        if (s->type == SVC_TYPE_LOAD_BALANCER && s->external_policy == TRAFFIC_POLICY_LOCAL)
                s->health_check_node_port = (uint16_t) v;

        *ret = svc_pack(TAKE_PTR(s));
        return 0;
}
