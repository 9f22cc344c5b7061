/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The cluster-state model: the Services, EndpointSlices and Node that kproxy
 * has been told about, already validated and typed (kube/ decodes and checks
 * them; nothing here is a raw API string except names, which the decoder
 * has checked against the Kubernetes grammar). The model owns every object;
 * it does no I/O and never logs.
 *
 * Objects are keyed by "namespace/name". Slices are also indexed by their
 * service ("namespace/<kubernetes.io/service-name>"), so a service's
 * endpoints are found without scanning.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/hmap.h"
#include "util/inet.h"
#include "util/intern.h"

enum l4_proto {
        L4_TCP,
        L4_UDP,
        L4_SCTP,
        _L4_MAX,
        _L4_INVALID = -22,
};

enum svc_type {
        SVC_TYPE_CLUSTER_IP,
        SVC_TYPE_NODE_PORT,
        SVC_TYPE_LOAD_BALANCER,
        SVC_TYPE_EXTERNAL_NAME,
        _SVC_TYPE_MAX,
        _SVC_TYPE_INVALID = -22,
};

enum traffic_policy {
        TRAFFIC_POLICY_CLUSTER,
        TRAFFIC_POLICY_LOCAL,
        _TRAFFIC_POLICY_MAX,
        _TRAFFIC_POLICY_INVALID = -22,
};

struct svc_port {
        char *name;             /* "" when unnamed */
        enum l4_proto proto;
        uint16_t port;
        uint16_t node_port;     /* 0: none */
};

/* An address the service claims (spec.externalIPs, a VIP-mode
 * load-balancer ingress IP) that this node does not program: kproxy's
 * allow-lists refused it (model/admit.h). */
struct svc_refusal {
        struct inet_addr addr;
        uint8_t list;           /* enum admit_list */
        uint8_t reason;         /* enum admit_reason */
        uint32_t index;         /* its place in the list the service gave */
};

/* Fields ordered so that a service is 136 bytes, 120 before the refusals (50k of them). */
struct svc {
        char *key;              /* "namespace/name" ("name" when sent without a namespace) */
        const char *name;       /* points into key, past the slash (all of it without one) */
        struct svc_port *ports;
        struct inet_addr *external_ips;
        struct inet_addr *lb_ips;               /* VIP-mode ingress IPs only */
        struct inet_cidr *source_ranges;
        /* Claimed but refused, in list then index order; external_ips and
         * lb_ips hold only what is programmed. NULL without allow-lists. */
        struct svc_refusal *refused;
        struct inet_addr cluster_ips[2];        /* at most one per family */
        uint8_t n_cluster_ips;
        bool affinity_client_ip;
        bool packed;                            /* one allocation: svc_pack() */
        uint16_t health_check_node_port;        /* only for LoadBalancer + ETP Local */
        uint32_t n_ports, n_external_ips, n_lb_ips, n_source_ranges;
        uint32_t affinity_timeout;              /* seconds */
        uint32_t n_refused;
        enum svc_type type;
        enum traffic_policy external_policy;
        enum traffic_policy internal_policy;
};

struct slice_port {
        char *name;             /* "" when unnamed */
        enum l4_proto proto;
        uint16_t port;
};

/* An endpoint's topology hints. Few endpoints have any: they are kept in
 * their slice, not in every endpoint. */
struct endpoint_hints {
        uint16_t n_zones, n_nodes;      /* the API allows 8 of each */
        char **zones;                   /* NULL when none */
        char **nodes;
};

/* 8 bytes: half a million of them at 50k services × 10 endpoints. The
 * address is the slice's (slice_endpoint_addr()): 4 bytes for IPv4. */
struct slice_endpoint {
        uint32_t node;          /* its node name's number (util/intern.h); 0: unset */
        uint16_t hints;         /* 1 + its index in the slice's hints; 0: none, as nearly always */
        uint8_t zone;           /* 1 + its index in the slice's zones; 0: unset */
        bool ready : 1, serving : 1, terminating : 1;
};

struct slice {
        char *key;              /* "namespace/name" ("name" when sent without a namespace) */
        char *service_key;      /* "namespace/service-name" (likewise) */
        struct slice_port *ports;
        struct slice_endpoint *endpoints;
        uint8_t *addrs;         /* the endpoints' addresses[0], slice_addr_len() bytes each */
        struct endpoint_hints *hints;   /* of the endpoints that have any */
        uint32_t *zones;        /* its endpoints' zones (interned), each once; at most 255 */
        double trigger_time;    /* annotation endpoints.kubernetes.io/last-change-trigger-time (Unix s), or 0 */
        uint32_t n_endpoints;
        uint16_t n_ports;       /* the API allows 100 */
        uint16_t n_hints;       /* decode.c refuses more than fit */
        uint8_t n_zones;
        uint8_t family;         /* 4 or 6 (FQDN slices are not decoded) */
        bool packed;            /* one allocation (but hints): slice_pack() */
};

static inline size_t slice_addr_len(const struct slice *s) {
        return s->family == 6 ? 16 : 4;
}

/* The address of endpoint i of s. */
static inline struct inet_addr slice_endpoint_addr(const struct slice *s, size_t i) {
        struct inet_addr a = {.family = s->family};
        memcpy(a.bytes, s->addrs + i * slice_addr_len(s), slice_addr_len(s));
        return a;
}

/* Sets it; a's family must be the slice's. */
static inline void slice_endpoint_set_addr(struct slice *s, size_t i, const struct inet_addr *a) {
        memcpy(s->addrs + i * slice_addr_len(s), a->bytes, slice_addr_len(s));
}

/* The name of the endpoint's node, or NULL. */
static inline const char *slice_endpoint_node(const struct slice_endpoint *e) {
        return interned(e->node);
}

/* The zone of the endpoint's node as the slice gives it, or NULL. */
static inline const char *slice_endpoint_zone(const struct slice *s, const struct slice_endpoint *e) {
        return e->zone ? interned(s->zones[e->zone - 1]) : NULL;
}

void endpoint_hints_done(struct endpoint_hints *h);

/* The hints of endpoint e of slice s, or NULL. */
static inline const struct endpoint_hints *slice_endpoint_hints(const struct slice *s,
                                                                const struct slice_endpoint *e) {
        return e->hints ? &s->hints[e->hints - 1] : NULL;
}

#define NODE_ADDR_INTERNAL 1
#define NODE_ADDR_EXTERNAL 2

struct node_addr {
        struct inet_addr addr;
        int type;               /* NODE_ADDR_* */
};

struct node {
        char *name;
        char *zone;             /* label topology.kubernetes.io/zone, or NULL */
        struct node_addr *addrs;
        size_t n_addrs;
        struct inet_cidr *pod_cidrs;
        size_t n_pod_cidrs;
        char **labels;          /* "key=value", sorted: a change forces a full sync */
        size_t n_labels;
        bool leaving;           /* being deleted, or tainted ToBeDeletedByClusterAutoscaler */
};

struct model;

struct model *model_new(void);
struct model *model_free(struct model *m);

/* Inserts or replaces an object; takes ownership of it in every case. */
void model_service_upsert(struct model *m, struct svc *svc);
void model_slice_upsert(struct model *m, struct slice *slice);
void model_node_set(struct model *m, struct node *node);
/* Removes and frees; returns 0, or -ENOENT if absent. */
int model_service_delete(struct model *m, const char *key);
int model_slice_delete(struct model *m, const char *key);

const struct svc *model_service_get(const struct model *m, const char *key);
const struct slice *model_slice_get(const struct model *m, const char *key);
const struct node *model_node(const struct model *m);
size_t model_n_services(const struct model *m);
size_t model_n_slices(const struct model *m);

/* Calls each(key, ctx) for every service's (slice's) key. each must not
 * change the model. */
void model_service_keys(const struct model *m, void (*each)(const char *key, void *ctx), void *ctx);
void model_slice_keys(const struct model *m, void (*each)(const char *key, void *ctx), void *ctx);

/* The services in key order: an owned array of borrowed pointers; *ret_n is
 * its length. Returns NULL only on an empty model or out of memory. */
const struct svc **model_services_sorted(const struct model *m, size_t *ret_n);
/* The slices of one service, in slice-key order (deterministic merges):
 * an owned array of borrowed pointers, NULL when there are none. */
const struct slice **model_service_slices(const struct model *m, const char *service_key,
                                          size_t *ret_n);

struct svc *svc_free(struct svc *s);
struct slice *slice_free(struct slice *s);
/* s's cluster IP of family 4 or 6, borrowed from s, or NULL: a service
 * without one is not proxied in that family. */
const struct inet_addr *svc_cluster_ip(const struct svc *s, uint8_t family);
/* A copy of s in one allocation with everything it owns (a slice's hints
 * excepted, rare), which saves malloc's overhead and rounding on each of
 * its pieces (100k objects at 50k services); s is freed. Aborts on OOM. */
struct svc *svc_pack(struct svc *s);
/* The same, of a service left as it is (it may be packed already). */
struct svc *svc_pack_copy(const struct svc *s);
struct slice *slice_pack(struct slice *s);
struct node *node_free(struct node *n);

const char *l4_proto_to_string(enum l4_proto p);       /* "TCP" */
const char *l4_proto_to_lower(enum l4_proto p);        /* "tcp" */
enum l4_proto l4_proto_from_string(const char *s);
const char *svc_type_to_string(enum svc_type t);
enum svc_type svc_type_from_string(const char *s);
const char *traffic_policy_to_string(enum traffic_policy p);
enum traffic_policy traffic_policy_from_string(const char *s);

DEFINE_CLEANUP(struct svc, svc_free)
DEFINE_CLEANUP(struct slice, slice_free)
DEFINE_CLEANUP(struct node, node_free)
