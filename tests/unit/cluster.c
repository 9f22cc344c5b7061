/* SPDX-License-Identifier: Apache-2.0 */
/* Small clusters for unit tests (cluster.h). */
#include "cluster.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "kube/decode.h"
#include "model/model.h"

static void upsert(struct model *m, json_t *obj) {
        char err[KUBE_ERRLEN];
        const char *kind = json_string_value(json_object_get(obj, "kind"));
        if (strcmp(kind, "Service") == 0) {
                struct svc *s;
                if (kube_decode_service(obj, &s, err) == 0)
                        model_service_upsert(m, s);
                else
                        fprintf(stderr, "bad service: %s\n", err);
        } else {
                struct slice *s;
                if (kube_decode_slice(obj, &s, err) == 0)
                        model_slice_upsert(m, s);
                else
                        fprintf(stderr, "bad slice: %s\n", err);
        }
        json_decref(obj);
}

void cluster_service(struct model *m, const struct cluster_svc *s) {
        json_t *port = json_pack("{s:s, s:i, s:s, s:i}", "name", "http", "port", s->port, "protocol",
                                 s->udp ? "UDP" : "TCP", "targetPort", 8080);
        if (s->node_port)
                json_object_set_new(port, "nodePort", json_integer(s->node_port));
        json_t *spec = json_pack("{s:s, s:[s], s:s, s:[o]}", "clusterIP", s->ip, "clusterIPs", s->ip, "type",
                                 s->type ? s->type : "ClusterIP", "ports", port);
        if (s->local)
                json_object_set_new(spec, "externalTrafficPolicy", json_string("Local"));
        if (s->health_check_node_port)
                json_object_set_new(spec, "healthCheckNodePort", json_integer(s->health_check_node_port));
        if (s->affinity) {
                json_object_set_new(spec, "sessionAffinity", json_string("ClientIP"));
                json_object_set_new(spec, "sessionAffinityConfig",
                                    json_pack("{s:{s:i}}", "clientIP", "timeoutSeconds", 600));
        }
        if (s->ext)
                json_object_set_new(spec, "externalIPs", json_pack("[s]", s->ext));
        if (s->ranges[0]) {
                json_t *r = json_array();
                for (int i = 0; i < 2 && s->ranges[i]; i++)
                        json_array_append_new(r, json_string(s->ranges[i]));
                json_object_set_new(spec, "loadBalancerSourceRanges", r);
        }
        json_t *svc = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o}", "apiVersion", "v1", "kind", "Service", "metadata",
                                "name", s->name, "namespace", "ns", "spec", spec);
        if (s->lb)
                json_object_set_new(svc, "status",
                                    json_pack("{s:{s:[{s:s}]}}", "loadBalancer", "ingress", "ip", s->lb));
        upsert(m, svc);
}

static void endpoints(struct model *m, const char *svc, int net, int n, const char *protocol) {
        char name[80];
        snprintf(name, sizeof name, "%s-x", svc);
        json_t *eps = json_array();
        for (int i = 0; i < n; i++) {
                char ip[32];
                snprintf(ip, sizeof ip, "10.244.%d.%d", net, 10 + i);
                json_array_append_new(eps, json_pack("{s:[s], s:s, s:{s:b}}", "addresses", ip, "nodeName",
                                                     i % 2 ? "node-2" : "node-1", "conditions", "ready", 1));
        }
        upsert(m, json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:s, s:[{s:s, s:i, s:s}], s:o}", "apiVersion",
                            "discovery.k8s.io/v1", "kind", "EndpointSlice", "metadata", "name", name, "namespace",
                            "ns", "labels", "kubernetes.io/service-name", svc, "addressType", "IPv4", "ports",
                            "name", "http", "port", 8080, "protocol", protocol, "endpoints", eps));
}

void cluster_endpoints(struct model *m, const char *svc, int net, int n) {
        endpoints(m, svc, net, n, "TCP");
}

void cluster_udp_endpoints(struct model *m, const char *svc, int net, int n) {
        endpoints(m, svc, net, n, "UDP");
}

void cluster_small(struct model *m, bool with_anonymous_set) {
        const struct cluster_svc specs[] = {
                {.name = "svc-a", .ip = "10.96.0.10", .port = 80},
                {.name = "svc-b", .ip = "10.96.0.11", .type = "NodePort", .port = 443, .node_port = 30001},
                {.name = "svc-c", .ip = "10.96.0.12", .type = "LoadBalancer", .port = 80, .node_port = 30002,
                 .lb = "198.51.100.1", .local = true},
                {.name = "svc-d", .ip = "10.96.0.13", .port = 53, .affinity = true},
                {.name = "svc-e", .ip = "10.96.0.14", .port = 80, .ext = "192.0.2.10"},
                {.name = "svc-f", .ip = "10.96.0.15", .type = "LoadBalancer", .port = 80, .node_port = 30003,
                 .lb = "198.51.100.2", .ranges = {"203.0.113.0/25", "192.168.0.0/16"}},
        };
        for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
                if (!with_anonymous_set && specs[i].ranges[0])
                        continue;
                cluster_service(m, &specs[i]);
                if (strcmp(specs[i].name, "svc-e") != 0)        /* svc-e has none */
                        cluster_endpoints(m, specs[i].name, (int) i + 1, 2 + (int) i % 3);
        }
}
