/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of categorisation: reproduce upstream's CategorizeEndpoints()
 * exactly, because which endpoints get rules decides where packets go:
 *
 *  - cluster list: ready endpoints, narrowed by topology hints when every
 *    ready endpoint carries hints and at least one names this node (node
 *    hints, feature-gated) or this node's zone; if none is ready, the
 *    serving-and-terminating ones (no topology on the fallback);
 *  - local list: this node's ready endpoints, or else its serving and
 *    terminating ones;
 *  - reachable: the union; each of them gets a KUBE-SEP chain.
 *
 * endpoints_plan() then takes upstream's per-port decisions from those
 * lists, once for both renderers: which chains exist, where internal and
 * external traffic goes, what is dropped or rejected, what is masqueraded.
 */
#include "model/endpoints.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

/* By hand: a full sync formats every endpoint of the cluster, and
 * snprintf() was half of collecting them (perf, 10k services × 10). */
size_t endpoint_format(const struct inet_addr *a, uint16_t port, char *out) {
        bool v6 = a->family == 6;
        char *p = out + v6;
        inet_addr_format(a, p);
        size_t ip_len = strlen(p);
        p += ip_len;
        if (v6) {
                out[0] = '[';
                *p++ = ']';
        }
        *p++ = ':';
        char digits[5];
        size_t n = 0;
        do
                digits[n++] = (char) ('0' + port % 10);
        while ((port /= 10) > 0);
        while (n > 0)
                *p++ = digits[--n];
        *p = '\0';
        return ip_len;
}

void endpoints_done(struct svc_port_endpoints *e) {
        free(e->all);
        free(e->cluster);
        free(e->local);
        free(e->reachable);
        *e = (struct svc_port_endpoints) {0};
}

static int cmp_endpoint_seq(const void *a, const void *b) {
        const struct endpoint *x = a, *y = b;
        int c = strcmp(x->str, y->str);
        return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static bool strv_contains(char *const *v, size_t n, const char *s) {
        if (!s)
                return false;
        for (size_t i = 0; i < n; i++)
                if (strcmp(v[i], s) == 0)
                        return true;
        return false;
}

static bool svc_externally_accessible_by_type(const struct svc *svc) {
        /* Upstream's ExternallyAccessible(service), on the API object. */
        return svc->type == SVC_TYPE_LOAD_BALANCER || svc->type == SVC_TYPE_NODE_PORT ||
               (svc->type == SVC_TYPE_CLUSTER_IP && svc->n_external_ips > 0);
}

static size_t count_family(const struct inet_addr *a, size_t n, uint8_t family) {
        size_t c = 0;
        for (size_t i = 0; i < n; i++)
                c += a[i].family == family;
        return c;
}

/* Merges slice endpoints; duplicates of one ip:port keep the first copy
 * unless a later one is not terminating. Sorted by the endpoint string. */
static int merge(const struct svc_port *port, uint8_t family, const struct slice *const *slices,
                 size_t n_slices, const char *node_name, struct svc_port_endpoints *r) {
        size_t cap = 0;
        /* A slice may list the same port twice (the API does not validate
         * what kproxy reads from a file); each match adds its endpoints. */
        for (size_t i = 0; i < n_slices; i++)
                for (size_t j = 0; j < slices[i]->n_ports; j++)
                        if (slices[i]->family == family && slices[i]->ports[j].proto == port->proto)
                                cap += slices[i]->n_endpoints;
        if (cap == 0)
                return 0;
        r->all = malloc(cap * sizeof *r->all);
        if (!r->all)
                return -ENOMEM;

        for (size_t i = 0; i < n_slices; i++) {
                const struct slice *s = slices[i];
                if (s->family != family)
                        continue;
                for (size_t j = 0; j < s->n_ports; j++) {
                        const struct slice_port *sp = &s->ports[j];
                        if (!sp->name || sp->port == 0 || sp->proto != port->proto ||
                            strcmp(sp->name, port->name) != 0)
                                continue;
                        for (size_t k = 0; k < s->n_endpoints; k++) {
                                const struct slice_endpoint *se = &s->endpoints[k];
                                struct endpoint ep = {
                                        .addr = slice_endpoint_addr(s, k),
                                        .port = sp->port,
                                        .ready = se->ready,
                                        .serving = se->serving,
                                        .terminating = se->terminating,
                                        .local = se->node && node_name &&
                                                 strcmp(slice_endpoint_node(se), node_name) == 0,
                                        .hints = slice_endpoint_hints(s, se),
                                };
                                ep.ip_len = (uint8_t) endpoint_format(&ep.addr, ep.port, ep.str);
                                ep.ip_off = family == 6;
                                r->all[r->n_all++] = ep;
                        }
                }
        }
        if (r->n_all == 0)
                return 0;

        /* Stable dedup: sort by (str, arrival), keep one copy per str. */
        for (size_t i = 0; i < r->n_all; i++)
                r->all[i].seq = (uint32_t) i;
        qsort(r->all, r->n_all, sizeof *r->all, cmp_endpoint_seq);
        size_t n = 0;
        for (size_t i = 0; i < r->n_all; i++) {
                const struct endpoint *e = &r->all[i];
                if (n > 0 && strcmp(r->all[n - 1].str, e->str) == 0) {
                        if (r->all[n - 1].terminating && !e->terminating)
                                r->all[n - 1] = *e;
                        continue;
                }
                r->all[n++] = *e;
        }
        r->n_all = n;
        return 0;
}

enum topology {
        TOPOLOGY_NONE,
        TOPOLOGY_SAME_ZONE,
        TOPOLOGY_SAME_NODE,
};

static enum topology topology_from_hints(const struct svc_port_endpoints *r,
                                         const struct endpoint_filter *f) {
        bool all_node = true, any_node = false, all_zone = true, any_zone = false;

        for (size_t i = 0; i < r->n_all; i++) {
                const struct endpoint *e = &r->all[i];
                const struct endpoint_hints *h = e->hints;
                if (!e->ready)
                        continue;
                if (!h || h->n_nodes == 0)
                        all_node = false;
                else if (strv_contains(h->nodes, h->n_nodes, f->node_name))
                        any_node = true;
                if (!h || h->n_zones == 0)
                        all_zone = false;
                else if (strv_contains(h->zones, h->n_zones, f->zone))
                        any_zone = true;
        }
        if (f->prefer_same_node && all_node && any_node)
                return TOPOLOGY_SAME_NODE;
        if (all_zone && any_zone)
                return TOPOLOGY_SAME_ZONE;
        return TOPOLOGY_NONE;
}

static bool topology_admits(const struct endpoint *e, enum topology t, const struct endpoint_filter *f) {
        switch (t) {
        case TOPOLOGY_SAME_NODE:
                return e->hints && strv_contains(e->hints->nodes, e->hints->n_nodes, f->node_name);
        case TOPOLOGY_SAME_ZONE:
                return e->hints && strv_contains(e->hints->zones, e->hints->n_zones, f->zone);
        default:
                return true;
        }
}

int endpoints_collect(const struct svc *svc, const struct svc_port *port, uint8_t family,
                      const struct slice *const *slices, size_t n_slices,
                      const struct endpoint_filter *f, struct svc_port_endpoints *ret) {
        struct svc_port_endpoints r = {0};
        int rr;

        r.externally_accessible = port->node_port != 0 ||
                                  count_family(svc->lb_ips, svc->n_lb_ips, family) > 0 ||
                                  count_family(svc->external_ips, svc->n_external_ips, family) > 0;
        r.external_policy_local = svc->external_policy == TRAFFIC_POLICY_LOCAL &&
                                  svc_externally_accessible_by_type(svc);
        r.internal_policy_local = svc->internal_policy == TRAFFIC_POLICY_LOCAL;
        r.uses_cluster = !r.internal_policy_local || r.externally_accessible;
        r.uses_local = r.internal_policy_local || (r.external_policy_local && r.externally_accessible);

        rr = merge(port, family, slices, n_slices, f->node_name, &r);
        if (rr < 0)
                goto fail;
        if (r.n_all == 0) {
                *ret = r;
                return 0;
        }

        r.cluster = malloc(r.n_all * sizeof *r.cluster);
        r.local = malloc(r.n_all * sizeof *r.local);
        r.reachable = malloc(r.n_all * sizeof *r.reachable);
        if (!r.cluster || !r.local || !r.reachable) {
                rr = -ENOMEM;
                goto fail;
        }

        for (size_t i = 0; i < r.n_all; i++)
                if (r.all[i].local && r.all[i].ready)
                        r.n_local_ready++;

        if (r.uses_cluster) {
                enum topology t = topology_from_hints(&r, f);
                for (size_t i = 0; i < r.n_all; i++)
                        if (r.all[i].ready && topology_admits(&r.all[i], t, f))
                                r.cluster[r.n_cluster++] = &r.all[i];
                if (r.n_cluster == 0)
                        for (size_t i = 0; i < r.n_all; i++)
                                if (r.all[i].serving && r.all[i].terminating)
                                        r.cluster[r.n_cluster++] = &r.all[i];
                r.has_any = r.n_cluster > 0;
        }

        if (r.uses_local) {
                for (size_t i = 0; i < r.n_all; i++) {
                        const struct endpoint *e = &r.all[i];
                        if (e->ready || (e->serving && e->terminating))
                                r.has_any = true;
                }
                for (size_t i = 0; i < r.n_all; i++)
                        if (r.all[i].local && r.all[i].ready)
                                r.local[r.n_local++] = &r.all[i];
                if (r.n_local == 0)
                        for (size_t i = 0; i < r.n_all; i++)
                                if (r.all[i].local && r.all[i].serving && r.all[i].terminating)
                                        r.local[r.n_local++] = &r.all[i];
        }

        /* Both lists are in r.all order (sorted), so the union is a merge. */
        for (size_t i = 0, a = 0, b = 0; i < r.n_all; i++) {
                bool in_a = a < r.n_cluster && r.cluster[a] == &r.all[i];
                bool in_b = b < r.n_local && r.local[b] == &r.all[i];
                a += in_a;
                b += in_b;
                if ((in_a && r.uses_cluster) || (in_b && r.uses_local))
                        r.reachable[r.n_reachable++] = &r.all[i];
        }

        *ret = r;
        return 0;
fail:
        endpoints_done(&r);
        return rr;
}

bool endpoints_lb_admits_node(const struct svc *svc, uint8_t family, const struct inet_addr *node_ip) {
        for (size_t i = 0; i < svc->n_source_ranges; i++)
                if (svc->source_ranges[i].addr.family == family && inet_cidr_contains(&svc->source_ranges[i], node_ip))
                        return true;
        return false;
}

void endpoints_plan(const struct svc *svc, uint8_t family, const struct svc_port_endpoints *e,
                    const struct endpoints_masq *masq, struct endpoints_plan *ret) {
        struct endpoints_plan p = {
                .internal_policy_local = e->internal_policy_local,
                .external_policy_local = e->external_policy_local,
                .has_any = e->has_any,
                .n_external_ips = count_family(svc->external_ips, svc->n_external_ips, family),
                .n_lb_ips = count_family(svc->lb_ips, svc->n_lb_ips, family),
        };

        for (size_t i = 0; i < svc->n_source_ranges; i++)
                p.n_source_ranges += svc->source_ranges[i].addr.family == family;
        /* A Local policy without a local endpoint has nowhere to send its
         * traffic, though other nodes have endpoints: dropped, not rejected. */
        p.has_internal = p.has_any && !(p.internal_policy_local && e->n_local == 0);
        p.has_external = p.has_any && !(p.external_policy_local && e->n_local == 0);
        p.internal_block = p.has_internal ? ENDPOINTS_PASS : p.has_any ? ENDPOINTS_DROP : ENDPOINTS_REJECT;
        p.external_block = p.has_external ? ENDPOINTS_PASS : p.has_any ? ENDPOINTS_DROP : ENDPOINTS_REJECT;

        p.uses_cluster_chain = e->n_cluster > 0 && e->uses_cluster;
        p.uses_local_chain = e->n_local > 0 && e->uses_local;
        /* On has_any, not has_external: with a Local policy and no local
         * endpoint, the chain still short-circuits the node's own traffic. */
        p.uses_external_chain = p.has_any && e->externally_accessible;
        p.filters_sources = p.n_lb_ips > 0 && p.n_source_ranges > 0;
        p.uses_firewall_chain = p.has_any && p.filters_sources;

        p.masq_internal = p.has_internal && (masq->all || masq->detect_local);
        p.masq_external = p.uses_external_chain && !p.external_policy_local;
        p.short_circuit_pods = p.uses_external_chain && p.external_policy_local && masq->detect_local;
        *ret = p;
}
