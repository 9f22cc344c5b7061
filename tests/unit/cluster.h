/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Small clusters for unit tests: Services and EndpointSlices made from a
 * few fields, decoded as the API client decodes them, into a model.
 */
#include <stdbool.h>

struct model;

/* A Service of namespace "ns" with one TCP port named "http" (target
 * 8080); a UDP one with udp. */
struct cluster_svc {
        const char *name, *ip, *type;
        int port, node_port;
        bool udp;
        const char *lb, *ext;           /* a load balancer's IP, an external IP */
        const char *ranges[2];          /* load balancer source ranges */
        bool affinity, local;
        int health_check_node_port;     /* 0: none */
};

void cluster_service(struct model *m, const struct cluster_svc *s);
/* The service's endpoints (one EndpointSlice, port "http" 8080): n
 * addresses 10.244.<net>.<10 + i>, ready, on node-1 and node-2 by turns. */
void cluster_endpoints(struct model *m, const char *svc, int net, int n);
/* The same with a UDP port. */
void cluster_udp_endpoints(struct model *m, const char *svc, int net, int n);
/* Six services of every kind: svc-a (ClusterIP), svc-b (NodePort), svc-c
 * (LoadBalancer, ETP Local), svc-d (ClientIP affinity), svc-e (an
 * external IP, no endpoints) and, with anonymous_set, svc-f (a
 * LoadBalancer with two source ranges, which put an anonymous set in a
 * rule). */
void cluster_small(struct model *m, bool anonymous_set);
