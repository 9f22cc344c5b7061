/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Inside explain: what explain.c decided about one connection, which the
 * parts below it (the endpoints, the walks of the rule modes in their own
 * chain names, the plan of userspace mode and socket load balancing) write
 * down in the answer. Only src/explain/ includes this.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "explain/explain-types.h"
#include "model/endpoints.h"

struct svc;
struct svc_port;

/* The way a packet takes through the rules, once its service port is known. */
enum explain_route {
        ROUTE_NONE,             /* not a service's */
        ROUTE_CT_INVALID,       /* dropped as conntrack INVALID (iptables mode's KUBE-FORWARD) */
        ROUTE_INVALID_PORT,     /* a cluster IP, on a port it does not serve */
        ROUTE_UNALLOCATED,      /* inside a ServiceCIDR, no service's */
        ROUTE_HEALTH_CHECK,     /* the health check node port */
        ROUTE_INTERNAL,         /* cluster IP to the internal policy's chain */
        ROUTE_INTERNAL_BLOCK,   /* cluster IP, nothing to go to: rejected or dropped */
        ROUTE_FIREWALL_DROP,    /* load-balancer IP, source outside its ranges */
        ROUTE_EXTERNAL_BLOCK,   /* external destination, nothing to go to */
        ROUTE_EXT_CLUSTER,      /* external, Cluster policy: masquerade, cluster chain */
        ROUTE_EXT_POD,          /* external, Local policy, a local pod: short circuit to the cluster chain */
        ROUTE_EXT_NODE,         /* external, Local policy, the node itself: masquerade, cluster chain */
        ROUTE_EXT_LOCAL,        /* external, Local policy: local chain, the client's address kept */
        ROUTE_EXT_NO_LOCAL,     /* external, Local policy, no local endpoint: falls out, dropped */
};

struct explain_ctx {
        const struct model *m;
        const struct explain_node *n;
        const struct explain_query *q;
        struct explain_result *r;

        bool detector_local;            /* the local traffic detector calls the source a local pod */
        bool src_node;                  /* the source is the node's (addrtype LOCAL) */
        bool dst_local;                 /* the destination is the node's */
        bool reaches_external_services; /* iptables: the filter path passes KUBE-EXTERNAL-SERVICES */

        const struct svc *svc;          /* the service port matched, or NULL */
        const struct svc_port *port;
        const struct inet_addr *cip;
        struct svc_port_endpoints eps;
        struct endpoints_plan plan;
        enum explain_route route;
        bool chain_local;               /* the endpoints are the local chain's */
        char spn[340];                  /* "ns/name:port" */
        const char *proto;              /* "tcp" */
};

void explain_step(struct explain_ctx *c, const char *table, const char *chain, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
void explain_note(struct explain_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Formats into out (EXPLAIN_TEXT bytes). */
void explain_say(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
