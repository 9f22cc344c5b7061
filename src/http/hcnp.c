/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the health-check node ports: upstream's ServiceHealthServer
 * (pkg/proxy/healthcheck/service_health.go), answered on the loop thread.
 * A cloud load balancer probes every node on a Service's healthCheckNodePort
 * and sends traffic only to nodes that answer 200, so the one thing that
 * matters besides the answer is that a port stays open while it is wanted:
 * a probe that meets a refused connection takes the node out of rotation.
 *
 * State is kept per port, not per Service: a port is the thing a probe sees.
 * Each wanted port has one listener per node address (one http/mhd.c server
 * each, which also makes the wildcard socket dual-stack as Go does). A sync
 * diffs the wanted ports against the open ones: ports no longer wanted are
 * closed, ports that stay keep their sockets and only get the new count
 * (or, when another Service took the port over, the new name), new ports
 * are bound. Within a port, addresses no longer wanted close before new
 * ones bind: going from every address (the wildcard socket) to a list
 * could not bind otherwise. A port or address that cannot be bound keeps
 * its place and is retried on every sync.
 *
 * Departures from upstream, all about sockets, none about answers:
 *  - upstream keys by Service and re-binds when the port moves to another
 *    Service; kproxy keeps the socket and answers for the new owner.
 *  - upstream lets Go's map order decide which of two Services sharing a
 *    port binds it, and logs the loser on every sync; here the first in the
 *    caller's order wins and the loser is logged once.
 *  - upstream drops every address of a Service when one fails to bind; here
 *    each address is independent, so the ones that work are served while
 *    the others are retried.
 *  - a bind failure is logged as an error once, repeats of the same errno
 *    at verbosity 2 (upstream logs each sync).
 */
#include "http/hcnp.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/mhd.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/hmap.h"
#include "util/inet.h"
#include "util/log.h"

/* Probes are one small request at a time, from a load balancer's few
 * health checkers, and there is a listener per port and address, so each
 * holds fewer connections than the other servers; a new probe always gets
 * in (http/mhd.h). */
static const struct mhd_limits hcnp_limits = {
        .connections = 32,
        .per_client = 8,
        .wait_ms = 10000,
};

struct hcnp {
        struct ev_loop *loop;
        bool proxy_healthy;
        struct hmap ports;              /* decimal port → struct hcnp_port */
        struct hmap conflicts;          /* "ns/name:port" (owned) of losers already logged */
};

struct hcnp_listener {
        struct hcnp_port *owner;
        struct inet_addr addr;
        struct mhd_server *server;      /* NULL while the address cannot be bound */
        int error;                      /* the last bind failure, already logged */
};

struct hcnp_port {
        struct hcnp *hcnp;
        char key[8];                    /* the port in decimal: the map key */
        uint16_t port;
        char *ns, *name;                /* the Service answered for */
        size_t local_endpoints;
        bool wanted;                    /* during a sync: claimed by a Service */
        size_t claimed_by;              /* during a sync: that Service's index */
        struct hcnp_listener **listeners;
        size_t n_listeners;
};

/* Upstream prints the names with Go's %q. Namespaces and names are DNS
 * labels and subdomains (validated in kube/), for which %q only adds the
 * quotes; for anything else JSON's escapes, where %q's (\x01) would make the
 * body unparseable. */
static void hcnp_put_quoted(struct buf *b, const char *s) {
        buf_putc(b, '"');
        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;

                if (c == '"' || c == '\\')
                        buf_printf(b, "\\%c", c);
                else if (c < 0x20 || c >= 0x7f)
                        buf_printf(b, "\\u%04x", c);
                else
                        buf_putc(b, (char) c);
        }
        buf_putc(b, '"');
}

/* Upstream writes its body with fmt.Sprintf from an indented template that
 * dedent.Dedent and strings.Trim(…, "\n") reduce to tab-indented JSON
 * without a final newline; clients that compare bytes see the same. The
 * status needs both local endpoints and a healthy proxy. */
static unsigned hcnp_body(const struct hcnp_port *p, struct buf *b) {
        bool healthy = p->hcnp->proxy_healthy;

        buf_puts(b, "{\n\t\"service\": {\n\t\t\"namespace\": ");
        hcnp_put_quoted(b, p->ns);
        buf_puts(b, ",\n\t\t\"name\": ");
        hcnp_put_quoted(b, p->name);
        buf_printf(b, "\n\t},\n\t\"localEndpoints\": %zu,\n\t\"serviceProxyHealthy\": %s\n}", p->local_endpoints,
                   healthy ? "true" : "false");
        return p->local_endpoints != 0 && healthy ? 200 : 503;
}

/* Upstream's handler is the whole http.Server (no mux), so every path and
 * every method gets the answer. */
static void hcnp_handle(void *userdata, const struct mhd_request *req, struct mhd_reply *reply) {
        const struct hcnp_port *p = userdata;
        char weight[24];

        (void) req;
        reply->status = hcnp_body(p, &reply->body);
        reply->content_type = "application/json";
        reply->nosniff = true;
        /* Upstream (since 1.28) also puts the count in a header, for load
         * balancers that weight nodes by it without parsing the body. */
        snprintf(weight, sizeof weight, "%zu", p->local_endpoints);
        mhd_reply_add_header(reply, "X-Load-Balancing-Endpoint-Weight", weight);
}

/* Closes the listener's socket and connections. */
static struct hcnp_listener *hcnp_listener_free(struct hcnp_listener *li) {
        if (!li)
                return NULL;
        mhd_server_free(li->server);
        free(li);
        return NULL;
}

/* Binds the listener's address and registers its server with the loop.
 * Returns 0 or -errno; on failure the listener stays unbound. */
static int hcnp_listener_start(struct hcnp_listener *li) {
        const struct hcnp_port *p = li->owner;
        char name[32];

        assert(!li->server);
        snprintf(name, sizeof name, "healthcheck port %u", p->port);
        /* The port outlives its listeners: it is the handler's userdata. */
        return mhd_server_new(p->hcnp->loop, name, &li->addr, p->port, &hcnp_limits, 0, hcnp_handle,
                              li->owner, &li->server);
}

static struct hcnp_port *hcnp_port_free(struct hcnp_port *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n_listeners; i++)
                hcnp_listener_free(p->listeners[i]);
        free(p->listeners);
        free(p->ns);
        free(p->name);
        free(p);
        return NULL;
}

DEFINE_CLEANUP(struct hcnp_port, hcnp_port_free)

static bool hcnp_port_serving(const struct hcnp_port *p) {
        for (size_t i = 0; i < p->n_listeners; i++)
                if (p->listeners[i]->server)
                        return true;
        return false;
}

/* Points the port at svc (copies the names), keeping its sockets. */
static int hcnp_port_set(struct hcnp_port *p, const struct hcnp_service *svc) {
        if (!p->ns || strcmp(p->ns, svc->ns) != 0 || strcmp(p->name, svc->name) != 0) {
                _cleanup_free_ char *ns = strdup(svc->ns), *name = strdup(svc->name);

                if (!ns || !name)
                        return -ENOMEM;
                if (p->ns)
                        log_v(2, "Healthcheck port %u now answers for service %s/%s (was %s/%s)", p->port, ns,
                              name, p->ns, p->name);
                free(p->ns);
                free(p->name);
                p->ns = TAKE_PTR(ns);
                p->name = TAKE_PTR(name);
        }
        p->local_endpoints = svc->local_endpoints;
        return 0;
}

/* Makes p's listeners match addrs: closes the addresses no longer wanted,
 * then binds the missing ones (new, or failed before). Returns 0 or the
 * first -errno; every failure is logged here. */
static int hcnp_port_sync(struct hcnp_port *p, const struct inet_addr *addrs, size_t n_addrs) {
        size_t kept = 0;
        int ret = 0;

        for (size_t i = 0; i < p->n_listeners; i++) {
                if (inet_addr_in(&p->listeners[i]->addr, addrs, n_addrs))
                        p->listeners[kept++] = p->listeners[i];
                else
                        hcnp_listener_free(p->listeners[i]);
        }
        p->n_listeners = kept;

        for (size_t i = 0; i < n_addrs; i++) {
                struct hcnp_listener *li = NULL;
                char text[INET_ADDR_STRLEN];
                int r;

                if (inet_addr_in(&addrs[i], addrs, i))
                        continue;       /* given twice */
                for (size_t j = 0; j < p->n_listeners && !li; j++)
                        if (inet_addr_equal(&p->listeners[j]->addr, &addrs[i]))
                                li = p->listeners[j];
                if (li && li->server)
                        continue;
                inet_addr_format(&addrs[i], text);
                if (!li) {
                        struct hcnp_listener **v = reallocarray(p->listeners, p->n_listeners + 1, sizeof *v);

                        if (v)
                                p->listeners = v;
                        li = v ? calloc(1, sizeof *li) : NULL;
                        if (!li) {
                                r = log_error_errno(-ENOMEM, "Failed to start healthcheck for service %s/%s on "
                                                    "%s port %u", p->ns, p->name, text, p->port);
                                ret = ret ?: r;
                                continue;
                        }
                        *li = (struct hcnp_listener) {.owner = p, .addr = addrs[i]};
                        p->listeners[p->n_listeners++] = li;
                        log_v(2, "Opening healthcheck for service %s/%s on %s port %u", p->ns, p->name, text,
                              p->port);
                }

                r = hcnp_listener_start(li);
                if (r >= 0) {
                        if (li->error != 0)
                                log_info("Healthcheck for service %s/%s on %s port %u is listening now",
                                         p->ns, p->name, text, p->port);
                        li->error = 0;
                        continue;
                }
                /* Retried on every sync: the same failure again says nothing new. */
                if (r != li->error)
                        log_error("Failed to start healthcheck for service %s/%s on %s port %u: %s, will retry",
                                  p->ns, p->name, text, p->port, strerror(-r));
                else
                        log_v(2, "Healthcheck for service %s/%s on %s port %u still cannot listen: %s", p->ns,
                              p->name, text, p->port, strerror(-r));
                li->error = r;
                ret = ret ?: r;
        }
        return ret;
}

int hcnp_new(struct ev_loop *l, struct hcnp **ret) {
        struct hcnp *h;

        assert(l);
        assert(ret);

        h = calloc(1, sizeof *h);
        if (!h)
                return -ENOMEM;
        *h = (struct hcnp) {
                .loop = l,
                /* Upstream's proxier is healthy while it starts up. */
                .proxy_healthy = true,
                .ports = HMAP_INIT,
                .conflicts = HMAP_INIT,
        };
        *ret = h;
        return 0;
}

static void hcnp_conflicts_done(struct hmap *m) {
        void *v;

        for (size_t i = 0; hmap_next(m, &i, NULL, &v);)
                free(v);
        hmap_done(m);
}

struct hcnp *hcnp_free(struct hcnp *h) {
        void *v;

        if (!h)
                return NULL;
        for (size_t i = 0; hmap_next(&h->ports, &i, NULL, &v);)
                hcnp_port_free(v);
        hmap_done(&h->ports);
        hcnp_conflicts_done(&h->conflicts);
        free(h);
        return NULL;
}

/* Decides which Service each port answers for: the first to name it. A
 * loser is logged when it first loses, not on every sync. Creates the
 * records of new ports (unbound). Returns 0 or -ENOMEM. */
static int hcnp_claim(struct hcnp *h, const struct hcnp_service *svcs, size_t n) {
        struct hmap conflicts = HMAP_INIT;
        void *v;
        int ret = 0;

        for (size_t i = 0; hmap_next(&h->ports, &i, NULL, &v);)
                ((struct hcnp_port *) v)->wanted = false;

        for (size_t i = 0; i < n; i++) {
                const struct hcnp_service *s = &svcs[i];
                char key[8];
                struct hcnp_port *p;
                int r;

                if (s->port == 0)
                        continue;
                snprintf(key, sizeof key, "%u", s->port);
                p = hmap_get(&h->ports, key);
                if (p && p->wanted) {
                        char *c;

                        if (asprintf(&c, "%s/%s:%u", s->ns, s->name, s->port) < 0) {
                                ret = ret ?: -ENOMEM;
                                continue;
                        }
                        if (!hmap_get(&h->conflicts, c))
                                log_error("Service %s/%s wants healthcheck port %u, which service %s/%s already "
                                          "uses on this node, ignoring", s->ns, s->name, s->port, p->ns, p->name);
                        free(hmap_put(&conflicts, c, c));
                        continue;
                }
                if (!p) {
                        _cleanup_(hcnp_port_freep) struct hcnp_port *np = calloc(1, sizeof *np);

                        if (!np) {
                                ret = ret ?: log_error_errno(-ENOMEM, "Failed to start healthcheck for service "
                                                             "%s/%s on port %u", s->ns, s->name, s->port);
                                continue;
                        }
                        np->hcnp = h;
                        np->port = s->port;
                        memcpy(np->key, key, sizeof key);
                        r = hcnp_port_set(np, s);
                        if (r < 0) {
                                ret = ret ?: log_error_errno(r, "Failed to start healthcheck for service %s/%s "
                                                             "on port %u", s->ns, s->name, s->port);
                                continue;
                        }
                        p = TAKE_PTR(np);
                        hmap_put(&h->ports, p->key, p);
                } else if ((r = hcnp_port_set(p, s)) < 0) {
                        /* Keeps answering for the old owner until a sync succeeds. */
                        ret = ret ?: log_error_errno(r, "Failed to update healthcheck port %u for service %s/%s",
                                                     s->port, s->ns, s->name);
                }
                p->wanted = true;
                p->claimed_by = i;
        }

        hcnp_conflicts_done(&h->conflicts);
        h->conflicts = conflicts;
        return ret;
}

int hcnp_sync(struct hcnp *h, const struct hcnp_service *svcs, size_t n, const struct inet_addr *addrs,
              size_t n_addrs) {
        /* No node addresses: upstream listens on 0.0.0.0, i.e. every address
         * of both families (one dual-stack socket, see mhd_server_new). */
        static const struct inet_addr any = {.family = 4};
        void *v;
        int ret;

        assert(h);
        assert(svcs || n == 0);
        assert(addrs || n_addrs == 0);

        if (n_addrs == 0) {
                addrs = &any;
                n_addrs = 1;
        }

        ret = hcnp_claim(h, svcs, n);

        /* Ports no longer wanted. A port that passes from one Service to
         * another is still wanted (state is per port), so it is never closed
         * and bound again. */
        for (size_t i = 0; hmap_next(&h->ports, &i, NULL, &v);) {
                struct hcnp_port *p = v;

                if (p->wanted)
                        continue;
                log_v(2, "Closing healthcheck for service %s/%s on port %u", p->ns, p->name, p->port);
                hmap_remove(&h->ports, p->key);
                hcnp_port_free(p);
        }

        /* In the caller's order, so the first error returned is the first
         * Service's. */
        for (size_t i = 0; i < n; i++) {
                struct hcnp_port *p;
                char key[8];
                int r;

                if (svcs[i].port == 0)
                        continue;
                snprintf(key, sizeof key, "%u", svcs[i].port);
                p = hmap_get(&h->ports, key);
                if (!p || p->claimed_by != i)
                        continue;
                r = hcnp_port_sync(p, addrs, n_addrs);
                ret = ret ?: r;
        }
        return ret;
}

void hcnp_set_proxy_healthy(struct hcnp *h, bool healthy) {
        if (h)
                h->proxy_healthy = healthy;
}

/* The number of health-check ports listening on at least one address. */
size_t hcnp_count(const struct hcnp *h) {
        size_t n = 0;
        void *v;

        if (!h)
                return 0;
        for (size_t i = 0; hmap_next(&h->ports, &i, NULL, &v);)
                if (hcnp_port_serving(v))
                        n++;
        return n;
}
