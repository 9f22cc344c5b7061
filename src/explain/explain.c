/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One connection through this node's proxy: find the service port its
 * destination is (a cluster IP, an external or load-balancer IP, a node
 * port), take the port's plan as the renderers do, and follow the packet
 * through the plan's decisions in upstream's order (docs/reference/
 * iptables-mode.md §7, nftables-mode.md §6): source ranges, no endpoints,
 * traffic policy, the local traffic detector. The rule modes' walks
 * (explain-ipt.c, explain-nft.c) name the chains; userspace mode and
 * socket load balancing answer from their plan (userspace/plan.h), which
 * is what they serve.
 */
#include "explain/explain.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "explain/explain-ctx.h"
#include "explain/explain-endpoints.h"
#include "explain/explain-ipt.h"
#include "explain/explain-nft.h"
#include "explain/explain-plan.h"
#include "model/admit.h"
#include "model/model.h"
#include "render/render.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/hmap.h"

static bool host_has(const struct explain_node *n, const struct inet_addr *a) {
        for (size_t i = 0; i < n->n_host_addrs; i++)
                if (inet_addr_equal(&n->host_addrs[i].addr, a))
                        return true;
        return inet_addr_is_loopback(a);
}

/* Where the connection comes from, when the query does not say. */
static void resolve_origin(struct explain_ctx *c) {
        const struct explain_query *q = c->q;
        struct explain_result *r = c->r;
        const struct node *node = model_node(c->m);
        char cidr[INET_CIDR_STRLEN];

        r->from = q->from;
        if (q->from != EXPLAIN_FROM_AUTO) {
                snprintf(r->from_why, sizeof r->from_why, "as asked");
                return;
        }
        if (host_has(c->n, &q->src)) {
                r->from = EXPLAIN_FROM_NODE;
                snprintf(r->from_why, sizeof r->from_why, "the source is one of the node's addresses");
                return;
        }
        for (size_t i = 0; node && i < node->n_pod_cidrs; i++)
                if (inet_cidr_contains(&node->pod_cidrs[i], &q->src)) {
                        r->from = EXPLAIN_FROM_POD;
                        snprintf(r->from_why, sizeof r->from_why, "the source is in the node's pod CIDR %s",
                                 inet_cidr_format(&node->pod_cidrs[i], cidr));
                        return;
                }
        r->from = EXPLAIN_FROM_EXTERNAL;
        snprintf(r->from_why, sizeof r->from_why,
                 "the source is neither the node's nor in its pod CIDR");
}

/* The local traffic detector's answer for the source (upstream's "local"
 * match: -s CIDR, -i IFACE, -i PREFIX+), and why, into why. */
static bool detector_local(const struct explain_ctx *c, char *why, size_t len) {
        const struct render_params *p = c->n->p;
        const struct explain_query *q = c->q;
        switch (p->detector) {
        case DETECTOR_SOURCE_CIDR: {
                bool in = inet_cidr_contains(&p->detector_cidr, &q->src);
                snprintf(why, len, "the source is %s %s (the local traffic detector)", in ? "inside" : "outside",
                         p->detector_arg);
                return in;
        }
        case DETECTOR_INTERFACE: {
                size_t n = strlen(p->detector_arg);
                bool prefix = n > 0 && p->detector_arg[n - 1] == '+';
                bool in;
                if (!q->iface[0]) {
                        /* A pod's packets come in by its interface, which
                         * the detector is configured to name. */
                        in = c->r->from == EXPLAIN_FROM_POD;
                        snprintf(why, len, "%s (the local traffic detector matches interface %s)",
                                 in ? "a pod's packets come in by its interface"
                                    : "the packets do not come in by a pod's interface",
                                 p->detector_arg);
                        return in;
                }
                in = prefix ? strncmp(q->iface, p->detector_arg, n - 1) == 0 : strcmp(q->iface, p->detector_arg) == 0;
                snprintf(why, len, "interface %s %s %s (the local traffic detector)", q->iface,
                         in ? "matches" : "does not match", p->detector_arg);
                return in;
        }
        default:
                snprintf(why, len, "no local traffic detector for IPv%u", p->family);
                return false;
        }
}

/* ---- Which service port the destination is. ---- */

static void describe_ports(const struct svc *s, char *out, size_t len) {
        size_t o = 0;
        out[0] = '\0';
        for (size_t i = 0; i < s->n_ports && o < len; i++)
                o += (size_t) snprintf(out + o, len - o, "%s%u/%s", i ? ", " : "", s->ports[i].port,
                                       l4_proto_to_string(s->ports[i].proto));
}

static bool port_matches(const struct svc_port *sp, const struct explain_query *q) {
        return sp->port == q->dst_port && (int) sp->proto == q->proto;
}

static void set_match(struct explain_ctx *c, const struct svc *s, const struct svc_port *sp, enum explain_entry e) {
        if (c->svc) {
                explain_note(c->r, "%s also claims %s port %u: the first service in the rules' order wins", s->key,
                             explain_entry_to_string(e), sp->port);
                return;
        }
        c->svc = s;
        c->port = sp;
        c->r->entry = e;
}

/* An address a service claims that the allow-lists refused: nothing
 * programs it, and the note says why (model/admit.h). */
static void note_refused(struct explain_ctx *c, const struct svc *s) {
        for (uint32_t k = 0; k < s->n_refused; k++) {
                const struct svc_refusal *r = &s->refused[k];
                if (!inet_addr_equal(&r->addr, &c->q->dst))
                        continue;
                struct buf why = BUF_INIT;
                admit_describe(r, &why);
                explain_note(c->r, "%s claims the destination as its %s, which this node does not program: %s",
                             s->key, admit_list_field((enum admit_list) r->list), why.data);
                buf_done(&why);
        }
}

/* The services' own addresses: cluster, external and load-balancer IPs. */
static void locate_address(struct explain_ctx *c, const struct svc *const *svcs, size_t n_svcs) {
        const struct explain_query *q = c->q;
        uint8_t fam = c->n->p->family;
        char ports[256];

        for (size_t i = 0; i < n_svcs; i++) {
                const struct svc *s = svcs[i];
                const struct inet_addr *cip = svc_cluster_ip(s, fam);
                bool is_cip = cip && inet_addr_equal(cip, &q->dst);
                bool is_ext = inet_addr_in(&q->dst, s->external_ips, s->n_external_ips);
                bool is_lb = inet_addr_in(&q->dst, s->lb_ips, s->n_lb_ips);
                bool any = false;
                if (s->n_refused)
                        note_refused(c, s);
                if (!cip || !(is_cip || is_ext || is_lb))
                        continue;
                for (size_t j = 0; j < s->n_ports; j++) {
                        if (!port_matches(&s->ports[j], q))
                                continue;
                        any = true;
                        if (is_cip)
                                set_match(c, s, &s->ports[j], EXPLAIN_ENTRY_CLUSTER_IP);
                        else
                                set_match(c, s, &s->ports[j],
                                          is_ext ? EXPLAIN_ENTRY_EXTERNAL_IP : EXPLAIN_ENTRY_LOAD_BALANCER_IP);
                        if (c->svc == s && c->port == &s->ports[j])
                                c->cip = cip;
                }
                if (!any) {
                        describe_ports(s, ports, sizeof ports);
                        explain_note(c->r, "the destination is %s's %s, which serves %s: not %u/%s", s->key,
                                     is_cip ? "cluster IP" : is_ext ? "external IP" : "load-balancer IP", ports,
                                     q->dst_port, l4_proto_to_string(q->proto));
                        if (is_cip && !c->svc && c->route == ROUTE_NONE)
                                c->route = ROUTE_INVALID_PORT;
                }
        }
}

/* Whether the destination takes node ports in this mode (nodePortAddresses). */
static bool nodeport_address(const struct explain_ctx *c) {
        const struct render_params *p = c->n->p;
        const struct inet_addr *d = &c->q->dst;
        bool loop = inet_addr_is_loopback(d);

        if (c->n->mode != EXPLAIN_MODE_NFTABLES && loop && !(p->localhost_nodeports && c->src_node))
                return false;
        if (c->n->mode == EXPLAIN_MODE_NFTABLES && loop)
                return false;
        if (p->nodeports_match_all)
                return c->dst_local;
        return inet_addr_in(d, p->nodeport_ips, p->n_nodeport_ips);
}

static void locate_node_port(struct explain_ctx *c, const struct svc *const *svcs, size_t n_svcs) {
        const struct explain_query *q = c->q;
        bool np_addr = nodeport_address(c);
        uint8_t fam = c->n->p->family;

        for (size_t i = 0; i < n_svcs; i++) {
                const struct svc *s = svcs[i];
                const struct inet_addr *cip = svc_cluster_ip(s, fam);
                if (!cip)
                        continue;
                for (size_t j = 0; j < s->n_ports; j++) {
                        const struct svc_port *sp = &s->ports[j];
                        if (sp->node_port != q->dst_port || (int) sp->proto != q->proto)
                                continue;
                        if (!np_addr) {
                                explain_note(c->r,
                                             "%u/%s is %s's node port, but the destination is not an address that "
                                             "takes node ports here (nodePortAddresses%s)",
                                             sp->node_port, l4_proto_to_string(sp->proto), s->key,
                                             inet_addr_is_loopback(&q->dst) ? "; loopback: see localhost node ports"
                                                                            : "");
                                continue;
                        }
                        if (!c->svc)
                                c->cip = cip;
                        set_match(c, s, sp, EXPLAIN_ENTRY_NODE_PORT);
                }
                if (!c->svc && c->dst_local && s->health_check_node_port == q->dst_port && q->proto == L4_TCP) {
                        c->svc = s;
                        c->port = NULL;
                        c->r->entry = EXPLAIN_ENTRY_HEALTH_CHECK_NODE_PORT;
                        c->route = ROUTE_HEALTH_CHECK;
                }
        }
}

static void locate(struct explain_ctx *c) {
        size_t n_svcs;
        _cleanup_free_ const struct svc **svcs = model_services_sorted(c->m, &n_svcs);

        locate_address(c, svcs, n_svcs);
        if (!c->svc)
                locate_node_port(c, svcs, n_svcs);
        if (c->svc || c->route != ROUTE_NONE)
                return;
        for (size_t i = 0; i < c->n->n_service_cidrs; i++)
                if (inet_cidr_contains(&c->n->service_cidrs[i], &c->q->dst)) {
                        char cidr[INET_CIDR_STRLEN];
                        c->route = ROUTE_UNALLOCATED;
                        explain_note(c->r, "the destination is inside ServiceCIDR %s, but no service has it",
                                     inet_cidr_format(&c->n->service_cidrs[i], cidr));
                        return;
                }
}

static int fill_slices(struct explain_ctx *c) {
        size_t n;
        _cleanup_free_ const struct slice **slices = model_service_slices(c->m, c->svc->key, &n);
        if (!slices && n > 0)
                return -ENOMEM;
        c->r->slices = calloc(n ? n : 1, sizeof *c->r->slices);
        if (!c->r->slices)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (slices[i]->family != c->n->p->family)
                        continue;
                c->r->slices[c->r->n_slices] = strdup(slices[i]->key);
                if (!c->r->slices[c->r->n_slices])
                        return -ENOMEM;
                c->r->n_slices++;
        }
        return 0;
}

/* ---- The rule modes' decisions. ---- */

static bool lb_source_admitted(const struct explain_ctx *c) {
        const struct svc *s = c->svc;
        uint8_t fam = c->n->p->family;
        for (size_t i = 0; i < s->n_source_ranges; i++)
                if (s->source_ranges[i].addr.family == fam && inet_cidr_contains(&s->source_ranges[i], &c->q->src))
                        return true;
        return endpoints_lb_admits_node(s, fam, &c->n->p->node_ip) && inet_addr_in(&c->q->src, s->lb_ips, s->n_lb_ips);
}

static void block(struct explain_ctx *c, enum endpoints_block b, bool internal) {
        struct explain_result *r = c->r;
        r->verdict = b == ENDPOINTS_REJECT ? EXPLAIN_REJECT : EXPLAIN_DROP;
        if (b == ENDPOINTS_REJECT)
                explain_say(r->reason, "%s has no endpoints", c->spn);
        else
                explain_say(r->reason, "%s has no local endpoints, and its %s traffic policy is Local", c->spn,
                    internal ? "internal" : "external");
}

static void decide_internal(struct explain_ctx *c) {
        struct explain_result *r = c->r;
        const struct endpoints_plan *pl = &c->plan;
        char why[200];

        snprintf(r->policy, sizeof r->policy, "internalTrafficPolicy %s", pl->internal_policy_local ? "Local" : "Cluster");
        if (pl->internal_block != ENDPOINTS_PASS) {
                c->route = ROUTE_INTERNAL_BLOCK;
                block(c, pl->internal_block, true);
                return;
        }
        c->route = ROUTE_INTERNAL;
        c->chain_local = pl->internal_policy_local;
        bool local = detector_local(c, why, sizeof why);
        if (c->n->p->masquerade_all) {
                r->masquerade = true;
                explain_say(r->masquerade_why, "masqueradeAll is set: all cluster-IP traffic is masqueraded");
        } else if (c->n->p->detector == DETECTOR_NONE) {
                explain_say(r->masquerade_why, "%s: cluster-IP traffic is not masqueraded", why);
        } else {
                r->masquerade = !local;
                explain_say(r->masquerade_why, "%s%s", why,
                    local ? ": a local pod's traffic keeps its address" : ": traffic from off the pod network is masqueraded");
        }
}

static void decide_external(struct explain_ctx *c) {
        struct explain_result *r = c->r;
        const struct endpoints_plan *pl = &c->plan;
        bool iptables = c->n->mode == EXPLAIN_MODE_IPTABLES;
        char why[200];

        snprintf(r->policy, sizeof r->policy, "externalTrafficPolicy %s", pl->external_policy_local ? "Local" : "Cluster");
        if (r->entry == EXPLAIN_ENTRY_LOAD_BALANCER_IP && (iptables ? pl->uses_firewall_chain : pl->filters_sources) &&
            !lb_source_admitted(c)) {
                c->route = ROUTE_FIREWALL_DROP;
                r->verdict = EXPLAIN_DROP;
                explain_say(r->reason, "the source is outside %s's loadBalancerSourceRanges", c->svc->key);
                return;
        }
        if (!pl->has_any || (!pl->has_external && !(pl->short_circuit_pods || c->src_node))) {
                c->route = ROUTE_EXTERNAL_BLOCK;
                /* iptables mode blocks external destinations in
                 * KUBE-EXTERNAL-SERVICES, on INPUT and FORWARD only. */
                if (iptables && !c->reaches_external_services) {
                        r->verdict = EXPLAIN_NONE;
                        explain_say(r->reason,
                            "%s has no %sendpoints, and iptables mode rejects external destinations only on the "
                            "INPUT and FORWARD paths: the node's own connection leaves untranslated",
                            c->spn, pl->has_any ? "local " : "");
                        return;
                }
                block(c, pl->external_block, false);
                return;
        }
        if (!pl->external_policy_local) {
                c->route = ROUTE_EXT_CLUSTER;
                r->masquerade = true;
                explain_say(r->masquerade_why, "externalTrafficPolicy Cluster: external traffic is masqueraded");
                return;
        }
        bool local = detector_local(c, why, sizeof why);
        if (pl->short_circuit_pods && local) {
                c->route = ROUTE_EXT_POD;
                explain_say(r->masquerade_why, "%s: a local pod's traffic short-circuits to all endpoints, unmasqueraded", why);
                snprintf(r->policy, sizeof r->policy, "externalTrafficPolicy Local, short-circuited for pods");
        } else if (c->src_node) {
                c->route = ROUTE_EXT_NODE;
                r->masquerade = true;
                explain_say(r->masquerade_why, "the node's own traffic short-circuits to all endpoints, masqueraded");
                snprintf(r->policy, sizeof r->policy, "externalTrafficPolicy Local, short-circuited for the node");
        } else if (pl->has_external) {
                c->route = ROUTE_EXT_LOCAL;
                c->chain_local = true;
                explain_say(r->masquerade_why, "externalTrafficPolicy Local: the client's address is kept");
        } else {
                c->route = ROUTE_EXT_NO_LOCAL;
                block(c, ENDPOINTS_DROP, false);
        }
}

static void decide_rules(struct explain_ctx *c) {
        struct explain_result *r = c->r;
        if (r->entry == EXPLAIN_ENTRY_CLUSTER_IP)
                decide_internal(c);
        else
                decide_external(c);
        size_t n = c->chain_local ? c->eps.n_local : c->eps.n_cluster;
        if (r->verdict == EXPLAIN_FORWARD && n == 1)
                explain_say(r->reason, "to the one endpoint of %s", c->spn);
        else if (r->verdict == EXPLAIN_FORWARD && n > 1)
                explain_say(r->reason, "to one of %zu endpoints of %s, at random", n, c->spn);
}

/* The routes without a service port. */
static void decide_unmatched(struct explain_ctx *c) {
        struct explain_result *r = c->r;
        bool nft = c->n->mode == EXPLAIN_MODE_NFTABLES;
        switch (c->route) {
        case ROUTE_INVALID_PORT:
                r->verdict = nft ? EXPLAIN_REJECT : EXPLAIN_NONE;
                explain_say(r->reason, nft ? "a cluster IP, on a port it does not serve: rejected"
                                   : "a cluster IP, on a port it does not serve: iptables mode leaves it untranslated");
                break;
        case ROUTE_UNALLOCATED:
                r->verdict = nft ? EXPLAIN_DROP : EXPLAIN_NONE;
                explain_say(r->reason, nft ? "an unallocated cluster IP: dropped"
                                   : "an unallocated cluster IP: iptables mode leaves it untranslated");
                break;
        case ROUTE_HEALTH_CHECK:
                r->verdict = EXPLAIN_ACCEPT;
                explain_say(r->reason, "%s's health check node port: kproxy's health server answers it", c->svc->key);
                break;
        default:
                r->verdict = EXPLAIN_NONE;
                explain_say(r->reason, "not a service address: the proxy leaves it alone");
        }
}

/* ---- Putting it together. ---- */

static int explain_service_port(struct explain_ctx *c) {
        struct explain_result *r = c->r;
        const struct render_params *p = c->n->p;
        struct endpoint_filter f = {
                .node_name = p->node_name,
                .zone = p->node_zone,
                .prefer_same_node = p->prefer_same_node,
        };
        struct endpoints_masq masq = {.all = p->masquerade_all, .detect_local = p->detector != DETECTOR_NONE};
        size_t n_slices;
        int k;

        if (c->port->name[0])
                snprintf(c->spn, sizeof c->spn, "%s:%s", c->svc->key, c->port->name);
        else
                snprintf(c->spn, sizeof c->spn, "%s", c->svc->key);
        c->proto = l4_proto_to_lower(c->port->proto);
        r->port_name = c->port->name;
        r->affinity_timeout = c->svc->affinity_client_ip ? c->svc->affinity_timeout : 0;
        {
                _cleanup_free_ const struct slice **slices = model_service_slices(c->m, c->svc->key, &n_slices);
                if (!slices && n_slices > 0)
                        return -ENOMEM;
                k = endpoints_collect(c->svc, c->port, p->family, slices, n_slices, &f, &c->eps);
                if (k < 0)
                        return k;
        }
        endpoints_plan(c->svc, p->family, &c->eps, &masq, &c->plan);
        k = fill_slices(c);
        if (k < 0)
                return k;

        decide_rules(c);
        if (c->n->mode == EXPLAIN_MODE_USERSPACE || (c->n->socket_lb && r->from != EXPLAIN_FROM_EXTERNAL)) {
                bool found;
                bool local_plan = c->n->mode != EXPLAIN_MODE_USERSPACE;
                struct explain_result saved = *r;       /* the rules' answer, for socket-lb's fallback */
                r->n_steps = 0;
                k = explain_plan(c, local_plan, &found);
                if (k < 0)
                        return k;
                if (found)
                        return 0;
                if (!local_plan) {
                        r->verdict = EXPLAIN_REJECT;
                        explain_say(r->reason, "no frontend: the port is closed (%s); %s",
                            c->port->proto == L4_UDP ? "ICMP port unreachable" : "RST", saved.reason);
                        if (c->port->proto == L4_SCTP)
                                explain_say(r->reason, "userspace mode has no SCTP");
                        r->masquerade = false;
                        r->masquerade_why[0] = '\0';
                        return 0;
                }
                *r = saved;
                explain_note(r, "socket load balancing has no entry for it: the rules decide");
        }
        if (r->verdict == EXPLAIN_FORWARD) {
                k = explain_fill_endpoints(c);
                if (k < 0)
                        return k;
        }
        if (c->n->mode == EXPLAIN_MODE_IPTABLES)
                explain_walk_iptables(c);
        else
                explain_walk_nftables(c);
        return 0;
}

int explain_connection(const struct model *m, const struct explain_node *n, const struct explain_query *q,
                       struct explain_result *ret) {
        struct explain_result *r = calloc(1, sizeof *r);
        struct explain_ctx c = {.m = m, .n = n, .q = q, .r = r};
        int k = 0;

        if (!r)
                return -ENOMEM;
        r->mode = n->mode;
        r->verdict = EXPLAIN_FORWARD;
        resolve_origin(&c);
        c.src_node = r->from == EXPLAIN_FROM_NODE;
        c.dst_local = host_has(n, &q->dst);
        /* INPUT (for the node) or FORWARD (through it), not OUTPUT alone. */
        c.reaches_external_services = !c.src_node || c.dst_local;

        if (q->ct_invalid && n->mode == EXPLAIN_MODE_IPTABLES && !n->p->tcp_be_liberal && !c.dst_local &&
            !c.src_node) {
                c.route = ROUTE_CT_INVALID;
                r->verdict = EXPLAIN_DROP;
                explain_say(r->reason, "conntrack calls the packet INVALID, and nf_conntrack_tcp_be_liberal is not set: "
                               "KUBE-FORWARD drops it");
                explain_walk_iptables(&c);
                goto out;
        }
        if (q->ct_invalid)
                explain_note(r, "an INVALID packet is not dropped by this mode's rules%s",
                             n->mode == EXPLAIN_MODE_IPTABLES ? " (nf_conntrack_tcp_be_liberal is set, or it is not "
                                                               "forwarded)"
                                                             : "");

        locate(&c);
        r->service = c.svc ? c.svc->key : NULL;
        if (!c.svc || !c.port) {
                decide_unmatched(&c);
                if (n->mode == EXPLAIN_MODE_IPTABLES)
                        explain_walk_iptables(&c);
                else if (n->mode == EXPLAIN_MODE_NFTABLES)
                        explain_walk_nftables(&c);
                else if (r->verdict != EXPLAIN_ACCEPT) {
                        r->verdict = EXPLAIN_NONE;
                        if (c.route != ROUTE_NONE)
                                explain_say(r->reason, "userspace mode holds no frontend for it: the proxy leaves it alone");
                }
                goto out;
        }
        k = explain_service_port(&c);
out:
        endpoints_done(&c.eps);
        if (k < 0) {
                explain_result_done(r);
                free(r);
                return k;
        }
        *ret = *r;
        free(r);
        return 0;
}

void explain_result_done(struct explain_result *r) {
        for (size_t i = 0; i < r->n_slices; i++)
                free(r->slices[i]);
        free(r->slices);
        free(r->eps);
        memset(r, 0, sizeof *r);
}
