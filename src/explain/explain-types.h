/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * explain's types (explain/explain.h): a query, the node, the answer. The
 * bottom of src/explain/: every part includes this.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model/endpoints.h"
#include "render/chain.h"
#include "util/inet.h"

typedef struct json_t json_t;
struct model;
struct render_params;

enum explain_origin {
        EXPLAIN_FROM_AUTO,      /* from the source address: the node's, its pod CIDR, or else outside */
        EXPLAIN_FROM_POD,       /* a pod on this node */
        EXPLAIN_FROM_NODE,      /* this node's own processes */
        EXPLAIN_FROM_EXTERNAL,  /* another node, or outside the cluster */
        _EXPLAIN_FROM_MAX,
};

struct explain_query {
        struct inet_addr src, dst;
        uint16_t src_port, dst_port;    /* src_port 0: any */
        int proto;                      /* enum l4_proto */
        enum explain_origin from;
        char iface[16];                 /* the interface it comes in by ("" none): the interface detectors' */
        bool ct_invalid;                /* conntrack calls it INVALID (a stray packet, not a new connection) */
        bool has_src, has_dst;
};

#define EXPLAIN_ERRLEN 256

enum explain_mode {
        EXPLAIN_MODE_IPTABLES,
        EXPLAIN_MODE_NFTABLES,
        EXPLAIN_MODE_USERSPACE,
};

/* The node as the proxy sees it. */
struct explain_node {
        const struct render_params *p;          /* the query's family's */
        enum explain_mode mode;
        bool socket_lb;
        const struct inet_cidr *host_addrs;     /* the node's interface addresses */
        size_t n_host_addrs;
        const struct inet_cidr *service_cidrs;  /* the cluster's ServiceCIDRs */
        size_t n_service_cidrs;
};

enum explain_verdict {
        EXPLAIN_FORWARD,        /* DNAT (or a frontend, or a socket translation) to an endpoint */
        EXPLAIN_REJECT,
        EXPLAIN_DROP,
        EXPLAIN_ACCEPT,         /* for the node itself (the health check node port) */
        EXPLAIN_NONE,           /* not a service's: the proxy leaves it alone */
        _EXPLAIN_VERDICT_MAX,
};

enum explain_entry {
        EXPLAIN_ENTRY_NONE,
        EXPLAIN_ENTRY_CLUSTER_IP,
        EXPLAIN_ENTRY_EXTERNAL_IP,
        EXPLAIN_ENTRY_LOAD_BALANCER_IP,
        EXPLAIN_ENTRY_NODE_PORT,
        EXPLAIN_ENTRY_HEALTH_CHECK_NODE_PORT,
        _EXPLAIN_ENTRY_MAX,
};

#define EXPLAIN_TEXT 512
#define EXPLAIN_MAX_STEPS 24
#define EXPLAIN_MAX_NOTES 8

struct explain_endpoint {
        char addr[ENDPOINT_STRLEN];
        const char *node;               /* borrowed from the model; NULL: none given */
        const char *zone;               /* its node's zone as its slice says; borrowed; NULL: none */
        bool ready, serving, terminating, local;
        bool selected;                  /* in the set the connection is sent to */
        double probability;             /* of being picked */
        char rule_probability[16];      /* iptables mode's statistic match; "" for the last */
        bool masquerade;                /* this connection, sent to it: the verdict's, or hairpin */
        char why[160];
        char chain[CHAIN_NFT_BODY_MAX + 16];    /* KUBE-SEP-…, endpoint-…; "" in the other modes */
};

struct explain_step {
        char table[24];                 /* "nat", "filter", "ip kube-proxy", "socket-lb", "userspace" */
        char chain[CHAIN_NFT_BODY_MAX + 16];
        char rule[EXPLAIN_TEXT];
};

struct explain_result {
        enum explain_verdict verdict;
        char reason[EXPLAIN_TEXT];
        enum explain_origin from;       /* resolved */
        char from_why[160];
        enum explain_mode mode;
        bool socket_lb;                 /* socket load balancing translated it */
        /* The service port (NULL: none). */
        const char *service;            /* "ns/name", borrowed from the model */
        const char *port_name;
        enum explain_entry entry;
        char policy[96];                /* the traffic policy that chose the endpoints */
        char **slices;                  /* owned: the service's EndpointSlices of the family */
        size_t n_slices;
        struct explain_endpoint *eps;   /* owned */
        size_t n_eps;
        bool masquerade;
        char masquerade_why[EXPLAIN_TEXT];
        uint32_t affinity_timeout;      /* seconds; 0: no ClientIP affinity */
        struct explain_step steps[EXPLAIN_MAX_STEPS];
        size_t n_steps;
        char notes[EXPLAIN_MAX_NOTES][EXPLAIN_TEXT];
        size_t n_notes;
};
