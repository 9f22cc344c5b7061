/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/udp-stale.h"

#include <stdlib.h>

#include "apply/conntrack.h"
#include "model/endpoints.h"
#include "model/model.h"
#include "util/alloc.h"
#include "util/log.h"

struct udp_stale {
        struct ct_frontend *gone;       /* frontends of replaced service versions */
        size_t n_gone;
        udp_stale_fn reconcile;
};

/* What one reconcile sends: frontends, each with a range of backends
 * (indexes: the arrays move while they grow). */
struct plan {
        struct ct_frontend *fr;
        struct {
                size_t first, n;
        } *ranges;
        size_t n_fr, cap_fr;
        struct ct_backend *be;
        size_t n_be, cap_be;
};

struct udp_stale *udp_stale_new(void) {
        struct udp_stale *u = xcalloc(1, sizeof *u);
        u->reconcile = conntrack_reconcile_udp;
        return u;
}

void udp_stale_set_reconciler(struct udp_stale *u, udp_stale_fn fn) {
        u->reconcile = fn;
}

struct udp_stale *udp_stale_free(struct udp_stale *u) {
        if (u) {
                free(u->gone);
                free(u);
        }
        return NULL;
}

bool udp_stale_applies(const struct svc *s) {
        for (size_t i = 0; s && i < s->n_ports; i++)
                if (s->ports[i].proto == L4_UDP)
                        return true;
        return false;
}

void udp_stale_remember(struct udp_stale *u, const struct svc *s) {
        if (!udp_stale_applies(s))
                return;
        size_t want = s->n_ports * (2 * s->n_cluster_ips + s->n_external_ips + s->n_lb_ips);
        struct ct_frontend *v = u->gone = xrealloc(u->gone, (u->n_gone + want) * sizeof *v);
        for (size_t j = 0; j < s->n_ports; j++) {
                const struct svc_port *port = &s->ports[j];
                if (port->proto != L4_UDP)
                        continue;
                for (size_t k = 0; k < s->n_cluster_ips; k++) {
                        v[u->n_gone++] = (struct ct_frontend) {.ip = s->cluster_ips[k], .port = port->port};
                        if (port->node_port)
                                v[u->n_gone++] = (struct ct_frontend) {
                                        .ip = s->cluster_ips[k], .port = port->node_port, .node_port = 1};
                }
                for (size_t k = 0; k < s->n_external_ips; k++)
                        v[u->n_gone++] = (struct ct_frontend) {.ip = s->external_ips[k], .port = port->port};
                for (size_t k = 0; k < s->n_lb_ips; k++)
                        v[u->n_gone++] = (struct ct_frontend) {.ip = s->lb_ips[k], .port = port->port};
        }
}

void udp_stale_clear(struct udp_stale *u) {
        free(u->gone);
        u->gone = NULL;
        u->n_gone = 0;
}

static void plan_room(struct plan *p, size_t more) {
        if (p->n_fr + more <= p->cap_fr)
                return;
        p->cap_fr = (p->n_fr + more) * 2;
        p->fr = xrealloc(p->fr, p->cap_fr * sizeof *p->fr);
        p->ranges = xrealloc(p->ranges, p->cap_fr * sizeof *p->ranges);
}

static void plan_backend(struct plan *p, const struct endpoint *e) {
        if (p->n_be == p->cap_be) {
                p->cap_be = p->cap_be ? p->cap_be * 2 : 64;
                p->be = xrealloc(p->be, p->cap_be * sizeof *p->be);
        }
        p->be[p->n_be++] = (struct ct_backend) {e->addr, e->port};
}

/* A frontend whose backends are those planned since first. */
static void plan_frontend(struct plan *p, const struct inet_addr *ip, uint16_t port, int node_port, size_t first) {
        p->fr[p->n_fr] = (struct ct_frontend) {.ip = *ip, .port = port, .node_port = node_port};
        p->ranges[p->n_fr].first = first;
        p->ranges[p->n_fr].n = p->n_be - first;
        p->n_fr++;
}

/* The frontends of one UDP service port: cluster IP, external IPs, LB IPs,
 * node port; all with the port's serving endpoints. */
static void plan_port(struct plan *p, const struct svc *s, const struct svc_port *port, const struct inet_addr *cip,
                      const struct slice **slices, size_t n_slices, const struct endpoint_filter *f) {
        struct svc_port_endpoints e;
        if (endpoints_collect(s, port, cip->family, slices, n_slices, f, &e) < 0)
                return;
        size_t first = p->n_be;
        for (size_t k = 0; k < e.n_all; k++)
                if (e.all[k].serving)
                        plan_backend(p, &e.all[k]);
        endpoints_done(&e);
        plan_room(p, 2 + s->n_external_ips + s->n_lb_ips);
        plan_frontend(p, cip, port->port, 0, first);
        for (size_t k = 0; k < s->n_external_ips; k++)
                if (s->external_ips[k].family == cip->family)
                        plan_frontend(p, &s->external_ips[k], port->port, 0, first);
        for (size_t k = 0; k < s->n_lb_ips; k++)
                if (s->lb_ips[k].family == cip->family)
                        plan_frontend(p, &s->lb_ips[k], port->port, 0, first);
        if (port->node_port)
                plan_frontend(p, cip, port->node_port, 1, first);
}

int udp_stale_reconcile(struct udp_stale *u, const struct model *m, uint8_t family, const char *node_name) {
        struct endpoint_filter f = {.node_name = node_name};
        struct plan p = {0};
        size_t n_svcs;
        const struct svc **svcs = model_services_sorted(m, &n_svcs);

        for (size_t i = 0; i < n_svcs; i++) {
                const struct svc *s = svcs[i];
                const struct inet_addr *cip = svc_cluster_ip(s, family);
                if (!cip || !udp_stale_applies(s))
                        continue;
                size_t n_slices;
                const struct slice **slices = model_service_slices(m, s->key, &n_slices);
                for (size_t j = 0; j < s->n_ports; j++)
                        if (s->ports[j].proto == L4_UDP)
                                plan_port(&p, s, &s->ports[j], cip, slices, n_slices, &f);
                free(slices);
        }
        /* Gone frontends: no valid endpoint of their own. */
        plan_room(&p, u->n_gone);
        for (size_t i = 0; i < u->n_gone; i++)
                if (u->gone[i].ip.family == family)
                        plan_frontend(&p, &u->gone[i].ip, u->gone[i].port, u->gone[i].node_port, p.n_be);
        /* Backend pointers only now: the array may have moved while growing. */
        for (size_t i = 0; i < p.n_fr; i++) {
                p.fr[i].backends = p.be + p.ranges[i].first;
                p.fr[i].n_backends = p.ranges[i].n;
        }
        int r = 0;
        if (p.n_fr > 0) {
                r = u->reconcile(family, p.fr, p.n_fr);
                if (r < 0)
                        log_warning_errno(r, "Failed to clear stale IPv%u UDP conntrack entries, will retry", family);
                else if (r > 0)
                        log_v(2, "Deleted %d stale IPv%u UDP conntrack entries", r, family);
        }
        free(p.fr);
        free(p.ranges);
        free(p.be);
        free(svcs);
        return r;
}
