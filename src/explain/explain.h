/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What this node's proxy does with one connection, and why: `kproxy
 * explain` and the daemon's /debug/explain. From the model and the node's
 * parameters, the same decisions the renderers take (model/endpoints.h's
 * plan; userspace/plan.h for userspace mode and socket load balancing):
 * the verdict, the endpoints with their chances, masquerading, session
 * affinity, and the walk through the mode's own chains. Pure: no I/O, no
 * logging.
 *
 *   explain_query_set()  a query from its fields as text (flags, URL query)
 *   explain_connection() the answer, as a struct
 *   explain_to_json()    the answer as JSON (docs/explain.md's schema)
 *   explain_print()      the JSON for people
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

/* Sets one field of q from text: "source" (IP or IP:port, [IPv6]:port),
 * "destination" (IP:port), "protocol" (tcp, udp, sctp), "from" (pod,
 * node, external, or an interface name), "ct-state" (new, invalid).
 * Returns 0, or -EINVAL with the problem in err. */
int explain_query_set(struct explain_query *q, const char *field, const char *value, char err[EXPLAIN_ERRLEN]);
/* 0 when q has a source and a destination of one family, else -EINVAL
 * with the problem in err. */
int explain_query_check(const struct explain_query *q, char err[EXPLAIN_ERRLEN]);

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

/* Explains q on node n with model m. Returns 0 or -ENOMEM (ret is then
 * empty). */
int explain_connection(const struct model *m, const struct explain_node *n, const struct explain_query *q,
                       struct explain_result *ret);
void explain_result_done(struct explain_result *r);

/* The answer as JSON (a new reference; NULL: out of memory). */
json_t *explain_to_json(const struct explain_query *q, const struct explain_result *r);
/* JSON as explain_to_json() makes it, for people. Returns 0 or -EINVAL
 * when it does not have that form. */
int explain_print(const json_t *j, FILE *out);

struct kproxy_config;
struct host_facts;
/* The mode explain follows for configuration c (iptables, nftables or
 * userspace). Returns 0, or -EINVAL for another mode or userspace with
 * --socket-lb, said on why (may be NULL). */
int explain_mode_of_config(const struct kproxy_config *c, enum explain_mode *ret, FILE *why);
/* The answer as JSON for q against model m, on the node that c, node_name
 * and host describe (socket_lb: socket load balancing runs beside the
 * rules; cidrs: the ServiceCIDRs). Returns 0 or -errno. */
int explain_answer(const struct model *m, const struct kproxy_config *c, bool socket_lb, const char *node_name,
                   const struct host_facts *host, const struct inet_cidr *cidrs, size_t n_cidrs,
                   const struct explain_query *q, json_t **ret);

const char *explain_verdict_to_string(enum explain_verdict v);
const char *explain_origin_to_string(enum explain_origin o);
const char *explain_entry_to_string(enum explain_entry e);
const char *explain_mode_to_string(enum explain_mode m);
