/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Which addresses a Service may claim on this node: kproxy's allow-lists
 * for spec.externalIPs (--external-ip-cidrs) and load-balancer ingress IPs
 * (--load-balancer-ip-cidrs), against CVE-2020-8554 (docs/security.md).
 * A list that is not set admits everything, as upstream. A list in use
 * admits an address inside one of its CIDRs, except addresses that are
 * never a service's to take unless the list names them one by one (a /32
 * or /128): the API server's (the default/kubernetes Service's cluster IP
 * and endpoints), this node's own (its Node object's addresses: not the
 * interfaces', which hold what userspace mode, kube-vip or keepalived put
 * there for services), loopback, link-local, multicast and unspecified
 * ones.
 *
 * The decision is made once, in the model: a service's external_ips and
 * lb_ips hold what is admitted, its refused list the rest, so every mode
 * programs only what is admitted without knowing the lists. Pure: no I/O,
 * no logging.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/inet.h"

struct buf;
struct model;
struct svc;
struct svc_refusal;

/* The Service whose cluster IP and EndpointSlices are the API server's. */
#define ADMIT_API_SERVER_SERVICE "default/kubernetes"

enum admit_list {
        ADMIT_EXTERNAL_IPS,     /* spec.externalIPs */
        ADMIT_LB_IPS,           /* status.loadBalancer.ingress[].ip */
        _ADMIT_LIST_MAX,
};

enum admit_reason {
        ADMIT_OK,
        ADMIT_NOT_LISTED,       /* in none of the list's CIDRs */
        ADMIT_API_SERVER,       /* default/kubernetes' cluster IP or an endpoint of it */
        ADMIT_NODE,             /* an address of this node's Node object */
        ADMIT_LOOPBACK,
        ADMIT_LINK_LOCAL,       /* 169.254.0.0/16, fe80::/10 */
        ADMIT_MULTICAST,        /* 224.0.0.0/4, ff00::/8 */
        ADMIT_UNSPECIFIED,      /* 0.0.0.0, :: */
        _ADMIT_REASON_MAX,
};

struct admit_cidrs {
        bool on;                /* the list is in use (it may be empty: "none") */
        struct inet_cidr *cidrs;        /* owned */
        size_t n;
};

struct admit_policy {
        struct admit_cidrs lists[_ADMIT_LIST_MAX];
};

/* Sets list l from the flag's values: CIDRs, or just "none" (in use,
 * admitting nothing); no values leave it off. The values were checked when
 * the flag was read. Returns 0 or -EINVAL. */
int admit_policy_set(struct admit_policy *p, enum admit_list l, char *const *values, size_t n);
bool admit_policy_on(const struct admit_policy *p);
void admit_policy_done(struct admit_policy *p);

/* Whether addr, claimed in list l, is admitted (ADMIT_OK) or why not; m
 * tells the API server's addresses and the Node's. */
enum admit_reason admit_check(const struct admit_policy *p, const struct model *m, enum admit_list l,
                              const struct inet_addr *addr);

/* What p admits of the addresses s claims: NULL when s holds exactly that
 * already, else a packed copy of s whose external_ips and lb_ips hold the
 * admitted addresses and whose refused list the others, each list in the
 * order the service gave. p may be NULL (nothing filtered). */
struct svc *admit_service(const struct admit_policy *p, const struct model *m, const struct svc *s);

/* Whether s claims an address that a change in m's API server endpoints
 * or Node addresses could admit or refuse. */
bool admit_claims(const struct svc *s);

/* Calls each(refusal, ctx) for every refusal of now that was not one of
 * before (NULL: none), and gone(refusal, ctx) for every one of before that
 * now lacks (now NULL: deleted); each may be NULL. */
void admit_diff(const struct svc *before, const struct svc *now,
                void (*each)(const struct svc_refusal *r, void *ctx),
                void (*gone)(const struct svc_refusal *r, void *ctx), void *ctx);

const char *admit_list_flag(enum admit_list l);         /* "--external-ip-cidrs" */
const char *admit_list_field(enum admit_list l);        /* "externalIP", "load-balancer IP" */
const char *admit_list_label(enum admit_list l);        /* the metric's label: "externalIPs", "loadBalancerIPs" */
const char *admit_reason_name(enum admit_reason r);     /* the metric's label: "not-allowed", "api-server", ... */
/* Why r, in words: "not in --external-ip-cidrs", "an address of the API
 * server (default/kubernetes), which --external-ip-cidrs admits only when
 * it lists it alone (/32)", ... */
void admit_describe(const struct svc_refusal *r, struct buf *out);
/* The log's line for service key's refusal r: "Service NS/NAME: not
 * programming its externalIP ADDR: WHY". */
void admit_describe_refusal(const char *key, const struct svc_refusal *r, struct buf *out);
