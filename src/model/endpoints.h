/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The proxy's view of one service port in one IP family: its endpoints
 * merged from every slice of the service, and upstream kube-proxy's
 * categorisation of them into the lists the renderers use (cluster, local,
 * all-reachable), with the traffic-policy booleans that decide which lists
 * are used. Pure: no I/O, no logging.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/inet.h"

struct svc;
struct svc_port;
struct slice;
struct slice_endpoint;

#define ENDPOINT_STRLEN (INET_ADDR_STRLEN + 8)

struct endpoint {
        struct inet_addr addr;
        uint16_t port;
        bool ready, serving, terminating, local;
        char str[ENDPOINT_STRLEN];      /* "10.0.0.1:80", "[fd00::1]:80" */
        uint8_t ip_off, ip_len;         /* the address text inside str */
        const struct endpoint_hints *hints;     /* borrowed from the slice; NULL: none */
        uint32_t seq;                   /* arrival order, for the stable merge */
};

struct endpoint_filter {
        const char *node_name;          /* this node */
        const char *zone;               /* this node's zone label, or NULL */
        bool prefer_same_node;          /* feature gate PreferSameTrafficDistribution */
};

struct svc_port_endpoints {
        struct endpoint *all;           /* every endpoint of the family, sorted by str */
        size_t n_all;
        struct endpoint **cluster;      /* used with Cluster policy */
        size_t n_cluster;
        struct endpoint **local;        /* used with Local policy */
        size_t n_local;
        struct endpoint **reachable;    /* cluster ∪ local, sorted by str: these get SEP chains */
        size_t n_reachable;
        size_t n_local_ready;           /* for health-check node ports */
        bool has_any;                   /* some usable endpoint anywhere */

        /* Upstream's per-port policy booleans (docs/reference/iptables-mode.md §6.2). */
        bool externally_accessible;     /* NodePort, or an LB or external IP of the family */
        bool external_policy_local;
        bool internal_policy_local;
        bool uses_cluster, uses_local;
};

/* What a family's node configuration adds to a plan: whether every
 * service packet is masqueraded (--masquerade-all), and whether a local
 * traffic detector is implemented for the family (--detect-local-mode). */
struct endpoints_masq {
        bool all;
        bool detect_local;
};

/* How a service port's traffic is dispatched by this node, computed once:
 * upstream's decisions (docs/reference/iptables-mode.md §7, nftables-mode.md
 * §6) from the categorised endpoints, for both renderers. */
enum endpoints_block {
        ENDPOINTS_PASS,         /* the traffic has endpoints to go to */
        ENDPOINTS_DROP,         /* endpoints exist, but none on this node under a Local policy */
        ENDPOINTS_REJECT,       /* no usable endpoint at all */
};

struct endpoints_plan {
        bool internal_policy_local;     /* cluster-IP traffic goes to the local chain */
        bool external_policy_local;     /* external traffic's policy chain is the local one */
        bool has_any;                   /* hasEndpoints: some usable endpoint, anywhere */
        bool has_internal, has_external;        /* the traffic has endpoints to go to */
        enum endpoints_block internal_block, external_block;    /* PASS exactly when has_* */

        /* The service port's chains. */
        bool uses_cluster_chain;        /* KUBE-SVC- / service-: cluster endpoints, used */
        bool uses_local_chain;          /* KUBE-SVL- / local-: local endpoints, used */
        bool uses_external_chain;       /* KUBE-EXT- / external-: endpoints, and externally accessible */
        /* Source ranges on load-balancer IPs (both of the family): iptables
         * mode's KUBE-FW- chain exists only with endpoints, nftables mode's
         * firewall- chain and firewall-ips elements regardless. */
        bool uses_firewall_chain;       /* iptables mode */
        bool filters_sources;           /* nftables mode */

        /* Masquerading. */
        bool masq_internal;             /* the internal chain first marks traffic (not from local pods) */
        bool masq_external;             /* Cluster policy: the external chain marks all its traffic */
        bool short_circuit_pods;        /* Local policy, detector: pods' external traffic takes the cluster chain */

        /* The service's addresses of the family. */
        size_t n_external_ips, n_lb_ips, n_source_ranges;
};

/* The plan of svc's port in family 4 or 6 whose endpoints e holds. */
void endpoints_plan(const struct svc *svc, uint8_t family, const struct svc_port_endpoints *e,
                    const struct endpoints_masq *masq, struct endpoints_plan *ret);

/* Whether the firewall of svc's load-balancer IPs in family also admits
 * those IPs themselves as sources: upstream lets the node's own traffic to
 * them through (it comes from the load-balancer IP, a local address) when
 * node_ip is in one of the source ranges. Every mode's firewall asks. */
bool endpoints_lb_admits_node(const struct svc *svc, uint8_t family, const struct inet_addr *node_ip);

/* Merges the endpoints of svc's port from slices (in the given order) for
 * family 4 or 6 and categorises them. Returns 0, or -ENOMEM (ret is then
 * left empty). */
int endpoints_collect(const struct svc *svc, const struct svc_port *port, uint8_t family,
                      const struct slice *const *slices, size_t n_slices,
                      const struct endpoint_filter *filter, struct svc_port_endpoints *ret);
void endpoints_done(struct svc_port_endpoints *e);

/* "ip:port" as Go's net.JoinHostPort writes it. out holds ENDPOINT_STRLEN.
 * Returns the length of the address text in it (after '[' for IPv6). */
size_t endpoint_format(const struct inet_addr *a, uint16_t port, char *out);
