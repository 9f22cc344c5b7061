/* SPDX-License-Identifier: Apache-2.0 */
#include "userspace/plan.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "model/endpoints.h"
#include "model/model.h"
#include "render/render.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/hmap.h"

/* Growable arrays of the plan under construction. */
struct build {
        struct userspace_plan *pl;
        size_t cap_addrs, cap_fe;
        bool local_clients;             /* userspace_plan_build_local() */
};

static int add_addr(struct build *b, const struct svc *s, const struct inet_addr *a) {
        struct userspace_plan *pl = b->pl;

        if (pl->n_addrs == b->cap_addrs) {
                size_t cap = b->cap_addrs ? 2 * b->cap_addrs : 64;
                struct userspace_addr *v = realloc(pl->addrs, cap * sizeof *v);
                if (!v)
                        return -ENOMEM;
                pl->addrs = v;
                b->cap_addrs = cap;
        }
        pl->addrs[pl->n_addrs++] = (struct userspace_addr) {*a, s->key};
        return 0;
}

static int cmp_fwd_addr(const void *x, const void *y) {
        const struct fwd_addr *a = x, *b = y;
        int c = memcmp(&a->ip, &b->ip, sizeof a->ip);
        return c ? c : (int) a->port - (int) b->port;
}

/* The sources a load-balancer IP of s admits in p's family, as the rules'
 * firewall chain admits them: the ranges, and the load-balancer IPs
 * themselves when endpoints_lb_admits_node(). Returns 0 or -ENOMEM. */
static int lb_sources(const struct svc *s, const struct render_params *p, struct inet_cidr **ret, size_t *ret_n) {
        struct inet_cidr *v = calloc(s->n_source_ranges + s->n_lb_ips, sizeof *v);
        bool from_node = endpoints_lb_admits_node(s, p->family, &p->node_ip);
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_source_ranges; i++)
                if (s->source_ranges[i].addr.family == p->family)
                        v[n++] = s->source_ranges[i];
        for (size_t i = 0; from_node && i < s->n_lb_ips; i++)
                if (s->lb_ips[i].family == p->family)
                        v[n++] = (struct inet_cidr) {s->lb_ips[i], p->family == 4 ? 32 : 128};
        *ret = v;
        *ret_n = n;
        return 0;
}

/* A frontend for addr:port with endpoints list (n of them; none: no
 * frontend), admitting only sources (n_sources of them, taken) if any. */
static int add_frontend(struct build *b, const struct svc *s, const struct svc_port *port, const struct inet_addr *ip,
                        uint16_t listen_port, bool external, struct endpoint *const *list, size_t n,
                        struct inet_cidr *sources, size_t n_sources) {
        struct userspace_plan *pl = b->pl;
        struct userspace_frontend *fe;

        if (n == 0) {
                free(sources);
                return 0;
        }
        if (pl->n_fe == b->cap_fe) {
                size_t cap = b->cap_fe ? 2 * b->cap_fe : 64;
                struct userspace_frontend *v = realloc(pl->fe, cap * sizeof *v);
                if (!v) {
                        free(sources);
                        return -ENOMEM;
                }
                pl->fe = v;
                b->cap_fe = cap;
        }
        fe = &pl->fe[pl->n_fe];
        *fe = (struct userspace_frontend) {
                .svc_key = s->key,
                .port_name = port->name,
                .proto = port->proto == L4_UDP ? IPPROTO_UDP : IPPROTO_TCP,
                .addr = {.ip = *ip, .port = listen_port},
                .external = external,
                .affinity_timeout = s->affinity_client_ip ? s->affinity_timeout : 0,
                .sources = sources,
                .n_sources = n_sources,
        };
        fe->eps = calloc(n, sizeof *fe->eps);
        if (!fe->eps) {
                free(sources);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                fe->eps[i] = (struct fwd_addr) {list[i]->addr, list[i]->port};
        fe->n_eps = n;
        qsort(fe->eps, n, sizeof *fe->eps, cmp_fwd_addr);
        char text[FWD_ADDR_STRLEN];
        strcpy(fe->key, fe->proto == IPPROTO_UDP ? "udp " : "tcp ");
        strcat(fe->key, fwd_addr_format(&fe->addr, text));
        pl->n_fe++;
        return 0;
}

static int add_port(struct build *b, const struct svc *s, const struct svc_port *port, const struct inet_addr *cip,
                    const struct slice *const *slices, size_t n_slices, const struct render_params *p) {
        const struct endpoint_filter f = {p->node_name, p->node_zone, p->prefer_same_node};
        const struct endpoints_masq masq = {0};
        struct svc_port_endpoints e;
        struct endpoints_plan plan;
        int r;

        r = endpoints_collect(s, port, p->family, slices, n_slices, &f, &e);
        if (r < 0)
                return r;
        endpoints_plan(s, p->family, &e, &masq, &plan);
        struct endpoint *const *in = plan.internal_policy_local ? e.local : e.cluster;
        size_t n_in = !plan.has_internal ? 0 : plan.internal_policy_local ? e.n_local : e.n_cluster;
        struct endpoint *const *ex = plan.external_policy_local ? e.local : e.cluster;
        size_t n_ex = !plan.has_external ? 0 : plan.external_policy_local ? e.n_local : e.n_cluster;
        if (b->local_clients) {
                /* This node's pods and processes reach external addresses
                 * through the cluster chain under either policy (the
                 * "route LOCAL traffic" short circuit): e.cluster holds
                 * the endpoints whenever the port is externally reachable. */
                ex = e.cluster;
                n_ex = e.n_cluster;
        }

        r = add_frontend(b, s, port, cip, port->port, false, in, n_in, NULL, 0);
        for (size_t i = 0; r == 0 && i < s->n_external_ips; i++)
                if (s->external_ips[i].family == p->family)
                        r = add_frontend(b, s, port, &s->external_ips[i], port->port, true, ex, n_ex, NULL, 0);
        /* Local clients of a load-balancer IP whose sources are filtered
         * are left to the rules, which filter them. */
        bool filtered = b->local_clients && plan.n_source_ranges > 0;
        for (size_t i = 0; r == 0 && !filtered && i < s->n_lb_ips; i++) {
                struct inet_cidr *sources = NULL;
                size_t n_sources = 0;
                if (s->lb_ips[i].family != p->family)
                        continue;
                if (plan.n_source_ranges > 0 && lb_sources(s, p, &sources, &n_sources) < 0)
                        r = -ENOMEM;
                else
                        r = add_frontend(b, s, port, &s->lb_ips[i], port->port, true, ex, n_ex, sources, n_sources);
        }
        if (r == 0 && port->node_port) {
                if (p->nodeports_match_all) {
                        const struct inet_addr any = {.family = p->family};
                        r = add_frontend(b, s, port, &any, port->node_port, true, ex, n_ex, NULL, 0);
                }
                for (size_t i = 0; r == 0 && !p->nodeports_match_all && i < p->n_nodeport_ips; i++) {
                        /* A local client's loopback is its own (a pod's, not the node's). */
                        if (b->local_clients && inet_addr_is_loopback(&p->nodeport_ips[i]))
                                continue;
                        r = add_frontend(b, s, port, &p->nodeport_ips[i], port->node_port, true, ex, n_ex, NULL,
                                         0);
                }
        }
        endpoints_done(&e);
        return r;
}

static int add_service(struct build *b, const struct model *m, const struct svc *s, const struct render_params *p) {
        const struct inet_addr *cip = svc_cluster_ip(s, p->family);
        size_t n_slices;
        int r = 0;

        if (!cip)
                return 0;       /* headless, ExternalName, or not of this family */
        r = add_addr(b, s, cip);
        for (size_t i = 0; r == 0 && i < s->n_external_ips; i++)
                if (s->external_ips[i].family == p->family)
                        r = add_addr(b, s, &s->external_ips[i]);
        for (size_t i = 0; r == 0 && i < s->n_lb_ips; i++)
                if (s->lb_ips[i].family == p->family)
                        r = add_addr(b, s, &s->lb_ips[i]);
        if (r < 0)
                return r;
        _cleanup_free_ const struct slice **slices = model_service_slices(m, s->key, &n_slices);
        for (size_t i = 0; r == 0 && i < s->n_ports; i++) {
                if (s->ports[i].proto == L4_SCTP) {
                        b->pl->n_sctp++;
                        continue;
                }
                r = add_port(b, s, &s->ports[i], cip, slices, n_slices, p);
        }
        return r;
}

static int cmp_inet(const void *x, const void *y) {
        return memcmp(x, y, sizeof(struct inet_addr));
}

static int cmp_addr(const void *x, const void *y) {
        const struct userspace_addr *a = x, *b = y;
        int c = cmp_inet(&a->a, &b->a);
        return c ? c : strcmp(a->svc_key, b->svc_key);
}

static int cmp_fe(const void *x, const void *y) {
        const struct userspace_frontend *a = x, *b = y;
        return strcmp(a->key, b->key);
}

/* The same, then by service: the first of two claims is the first
 * service in key order; within a service, an address that is both an
 * external IP and a filtered load-balancer IP is the external IP's, whose
 * rule comes first. */
static int cmp_fe_svc(const void *x, const void *y) {
        const struct userspace_frontend *a = x, *b = y;
        int c = strcmp(a->key, b->key);
        if (c == 0)
                c = strcmp(a->svc_key, b->svc_key);
        return c ? c : (a->n_sources > 0) - (b->n_sources > 0);
}

static int add_all(struct build *b, const struct model *m, const struct render_params *p) {
        size_t n;
        int r = 0;
        _cleanup_free_ const struct svc **svcs = model_services_sorted(m, &n);

        if (!svcs && model_n_services(m) > 0)
                return -ENOMEM;
        for (size_t i = 0; r == 0 && i < n; i++)
                r = add_service(b, m, svcs[i], p);
        return r;
}

static int add_only(struct build *b, const struct model *m, const struct render_params *p, const struct hmap *only) {
        const char *key;
        int r = 0;

        for (size_t i = 0; r == 0 && hmap_next(only, &i, &key, NULL);) {
                const struct svc *s = model_service_get(m, key);
                if (s)
                        r = add_service(b, m, s, p);
        }
        return r;
}

static int build(const struct model *m, const struct render_params *p, const struct hmap *only, bool local_clients,
                 struct userspace_plan *ret) {
        struct build b = {.pl = ret, .local_clients = local_clients};
        int r;

        *ret = (struct userspace_plan) {0};
        r = only ? add_only(&b, m, p, only) : add_all(&b, m, p);
        if (r < 0) {
                userspace_plan_done(ret);
                return r;
        }
        /* A service names an address once (its cluster IP may also be an
         * external IP of its own). */
        if (ret->n_addrs)
                qsort(ret->addrs, ret->n_addrs, sizeof *ret->addrs, cmp_addr);
        size_t k = 0;
        for (size_t i = 0; i < ret->n_addrs; i++)
                if (k == 0 || cmp_addr(&ret->addrs[k - 1], &ret->addrs[i]) != 0)
                        ret->addrs[k++] = ret->addrs[i];
        ret->n_addrs = k;
        /* Two services claiming one address and port (the API server
         * refuses that for cluster IPs and node ports; external IPs are
         * the users'): the first in key order keeps it, as the first
         * matching rule would. */
        if (ret->n_fe)
                qsort(ret->fe, ret->n_fe, sizeof *ret->fe, cmp_fe_svc);
        k = 0;
        for (size_t i = 0; i < ret->n_fe; i++) {
                if (k > 0 && strcmp(ret->fe[k - 1].key, ret->fe[i].key) == 0) {
                        free(ret->fe[i].eps);
                        free(ret->fe[i].sources);
                        continue;
                }
                ret->fe[k++] = ret->fe[i];
        }
        ret->n_fe = k;
        return 0;
}

int userspace_plan_build(const struct model *m, const struct render_params *p, const struct hmap *only,
                         struct userspace_plan *ret) {
        return build(m, p, only, false, ret);
}

int userspace_plan_build_local(const struct model *m, const struct render_params *p, const struct hmap *only,
                               struct userspace_plan *ret) {
        return build(m, p, only, true, ret);
}

void userspace_plan_done(struct userspace_plan *pl) {
        for (size_t i = 0; i < pl->n_fe; i++) {
                free(pl->fe[i].eps);
                free(pl->fe[i].sources);
        }
        free(pl->fe);
        free(pl->addrs);
        *pl = (struct userspace_plan) {0};
}

const struct userspace_frontend *userspace_plan_find(const struct userspace_plan *pl, const char *key) {
        struct userspace_frontend probe;

        if (pl->n_fe == 0 || strlen(key) >= sizeof probe.key)
                return NULL;
        strcpy(probe.key, key);
        return bsearch(&probe, pl->fe, pl->n_fe, sizeof *pl->fe, cmp_fe);
}

void userspace_frontend_format(const struct userspace_frontend *fe, struct buf *out) {
        char text[FWD_ADDR_STRLEN];

        /* The service port's name as upstream writes it: "ns/name:port",
         * or "ns/name" for an unnamed port. */
        buf_printf(out, "%s %s%s%s %s", fe->key, fe->svc_key, *fe->port_name ? ":" : "", fe->port_name,
                   fe->external ? "external" : "internal");
        if (fe->affinity_timeout)
                buf_printf(out, " affinity=%u", (unsigned) fe->affinity_timeout);
        for (size_t i = 0; i < fe->n_sources; i++) {
                char cidr[INET_CIDR_STRLEN];
                buf_printf(out, "%s%s", i ? "," : " sources=", inet_cidr_format(&fe->sources[i], cidr));
        }
        buf_puts(out, " ->");
        for (size_t i = 0; i < fe->n_eps; i++)
                buf_printf(out, " %s", fwd_addr_format(&fe->eps[i], text));
}

void userspace_plan_format(const struct userspace_plan *pl, struct buf *out) {
        char text[INET_ADDR_STRLEN];

        for (size_t i = 0; i < pl->n_addrs; i++)
                if (i == 0 || cmp_inet(&pl->addrs[i - 1].a, &pl->addrs[i].a) != 0)
                        buf_printf(out, "address %s\n", inet_addr_format(&pl->addrs[i].a, text));
        for (size_t i = 0; i < pl->n_fe; i++) {
                userspace_frontend_format(&pl->fe[i], out);
                buf_putc(out, '\n');
        }
}
