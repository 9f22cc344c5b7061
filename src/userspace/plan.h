/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What userspace mode wants of the node for one IP family, from the model:
 * the service addresses to hold on kube-proxy0, and the frontends (a
 * listening TCP socket or bound UDP socket per address, port and
 * protocol) with the endpoints each hands connections to. The same
 * decisions as the packet-filter modes (model/endpoints.h's plan):
 * cluster-IP traffic follows the internal policy, node ports, external
 * IPs and load-balancer IPs the external one; a frontend whose traffic
 * has no endpoint to go to is left out, so its port is closed (RST, ICMP
 * port unreachable) as the REJECT and DROP rules close it. Pure: no I/O.
 *
 * Its text form (userspace_plan_format()) is what `kproxy render
 * --proxy-mode userspace` prints and the daemon serves at /debug/backend:
 *
 *   address 10.96.0.10
 *   tcp 10.96.0.10:80 default/web:http internal -> 10.244.1.5:8080 10.244.2.7:8080
 *   tcp 10.96.0.11:80 default/api internal -> 10.244.1.6:8080          (an unnamed port)
 *   udp 0.0.0.0:30053 default/dns:dns external affinity=10800 -> 10.244.1.9:53
 *   tcp 203.0.113.10:443 shop/front:https external sources=198.51.100.0/24 -> 10.244.1.30:8443
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "userspace/fwd-addr.h"

struct buf;
struct hmap;
struct model;
struct render_params;

struct userspace_frontend {
        char key[FWD_ADDR_STRLEN + 4];  /* "tcp 10.96.0.10:80": unique in the node */
        const char *svc_key;            /* borrowed from the model */
        const char *port_name;          /* likewise */
        int proto;                      /* IPPROTO_TCP or IPPROTO_UDP */
        struct fwd_addr addr;           /* a wildcard address for node ports on every address */
        bool external;                  /* node port, external or load-balancer IP */
        uint32_t affinity_timeout;      /* seconds; 0: no ClientIP affinity */
        struct fwd_addr *eps;           /* owned, sorted */
        size_t n_eps;                   /* > 0 */
        /* A load-balancer IP's loadBalancerSourceRanges: the sources that
         * may connect (the ranges of the family, and the service's
         * load-balancer IPs when this node is in one of them, as the
         * rules allow); owned. None: every source. */
        struct inet_cidr *sources;
        size_t n_sources;
};

/* A service address, and the service that wants it (two services may
 * share an external IP). */
struct userspace_addr {
        struct inet_addr a;
        const char *svc_key;            /* borrowed from the model */
};

struct userspace_plan {
        struct userspace_addr *addrs;   /* sorted by address, then service; pairs unique */
        size_t n_addrs;
        struct userspace_frontend *fe;  /* sorted by key */
        size_t n_fe;
        size_t n_sctp;                  /* SCTP ports left out (userspace mode has no SCTP) */
};

/* Fills ret for p->family: for every service, or (only not NULL) for the
 * services whose keys only holds (those not in the model give nothing).
 * Returns 0 or -ENOMEM (ret empty). */
int userspace_plan_build(const struct model *m, const struct render_params *p, const struct hmap *only,
                         struct userspace_plan *ret);
/* The same as this node's own clients (pods, processes) see it, for
 * socket load balancing: node ports, external and load-balancer IPs go to
 * the cluster endpoints under either external policy, as the rules route
 * local traffic to them (upstream's short circuit); load-balancer IPs with
 * source ranges and loopback node-port addresses are left out. */
int userspace_plan_build_local(const struct model *m, const struct render_params *p, const struct hmap *only,
                               struct userspace_plan *ret);
void userspace_plan_done(struct userspace_plan *pl);
/* The frontend of key, or NULL. */
const struct userspace_frontend *userspace_plan_find(const struct userspace_plan *pl, const char *key);

/* One frontend as its text line (without the newline). */
void userspace_frontend_format(const struct userspace_frontend *fe, struct buf *out);
void userspace_plan_format(const struct userspace_plan *pl, struct buf *out);
