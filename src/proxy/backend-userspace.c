/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode behind the backend interface (docs/userspace.md): no
 * packet filter; the service addresses are host addresses on kube-proxy0
 * and kproxy forwards each connection itself. A sync turns the model into
 * a plan (userspace/plan.h) and makes the node match it: addresses added
 * before a frontend binds to them, frontends opened, their endpoints
 * swapped in place, the unwanted ones closed, then the addresses nobody
 * wants removed. A TCP frontend that goes away stops accepting at once
 * and keeps its open connections until they end (as conntrack keeps an
 * established flow); a UDP one ends its sessions at once (a flow to a
 * service without endpoints must be refused, not carried on).
 *
 * Restarts: the running process listens on userspace.sock in --state-dir.
 * A successor connects there as it starts and is handed every listening
 * and bound socket (userspace/handover.h); the predecessor stops
 * accepting, tells the core (which stops its servers) and finishes its
 * connections. The successor's first sync adopts the sockets it wants, so
 * the socket objects, and the connections queued on them, never close.
 */
#include "proxy/backend.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "apply/sysctl.h"
#include "config/config.h"
#include "ev/ev.h"
#include "host/host.h"
#include "model/model.h"
#include "proxy/nolocal.h"
#include "render/render.h"
#include "userspace/fwd-pipes.h"
#include "userspace/fwd-tcp.h"
#include "userspace/fwd-udp.h"
#include "userspace/handover.h"
#include "userspace/ifaddr.h"
#include "userspace/pick.h"
#include "userspace/plan.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "util/log.h"

#define USERSPACE_LINK "kube-proxy0"
#define CONNECT_TIMEOUT_MS 2000
#define UDP_IDLE_DEFAULT_MS 30000       /* the kernel's UDP conntrack timeout */
#define PIPE_SIZE (1 << 20)             /* 1 MiB: a third less CPU per GB (docs/userspace.md) */
#define SPARE_PIPES 256
#define HANDOVER_SOCK "userspace.sock"
#define HANDOVER_WAIT_MS 2000           /* per message, from a predecessor handing over */

struct frontend {
        char key[FWD_ADDR_STRLEN + 4];  /* the plan's: "tcp 10.96.0.10:80" */
        struct backend *b;
        struct frontend *next_draining;
        uint8_t family;
        int proto;
        struct picker *picker;
        struct fwd_tcp *tcp;
        struct fwd_udp *udp;
        struct buf line;                /* the plan's line, for /debug/backend */
        uint64_t gen;                   /* the sync that last wanted it */
        bool failed;                    /* could not bind: full syncs try again */
};

struct held_addr {
        char key[INET_ADDR_STRLEN];
        struct inet_addr a;
        uint64_t gen;
};

/* Counters of frontends already freed, so the totals only grow. */
struct gone {
        struct fwd_tcp_stats tcp;
        struct fwd_udp_stats udp;
};

struct backend {
        struct backend_env env;
        struct ifaddr *ia;
        struct fwd_pipes *pipes;
        struct hmap frontends;          /* key -> struct frontend */
        struct hmap addrs;              /* address text -> struct held_addr */
        struct frontend *draining;      /* TCP frontends no longer wanted, finishing their connections */
        struct gone gone;
        uint64_t gen;
        uint64_t tcp_idle_ms, udp_idle_ms;
        size_t n_sctp[2];               /* per family, as last logged */
        struct handover_sock *adopt;    /* handed over by a predecessor, until the first syncs adopt them */
        size_t n_adopt;
        int handover_fd;                /* listening for a successor; -1: none */
        bool retired;                   /* handed over: syncs do nothing */
        struct nolocal *nolocal[2];     /* per family: Local policies without local endpoints */
        bool link_ready;
};

/* --- picking --- */

static uint64_t now_ms(const struct backend *b) {
        ev_now_update(b->env.loop);
        return ev_now_ms(b->env.loop);
}

static int pick_tcp(void *userdata, const struct fwd_addr *client, const struct fwd_addr *failed,
                    struct fwd_addr *ret) {
        struct frontend *fe = userdata;
        return picker_pick(fe->picker, &client->ip, failed, now_ms(fe->b), ret);
}

static int pick_udp(void *userdata, const struct fwd_addr *client, struct fwd_addr *ret) {
        struct frontend *fe = userdata;
        return picker_pick(fe->picker, &client->ip, NULL, now_ms(fe->b), ret);
}

/* --- frontends --- */

static void add_tcp_stats(struct fwd_tcp_stats *t, const struct fwd_tcp_stats *s) {
        t->accepted += s->accepted;
        t->active += s->active;
        t->bytes_to_endpoints += s->bytes_to_endpoints;
        t->bytes_to_clients += s->bytes_to_clients;
        t->accept_errors += s->accept_errors;
        t->connect_errors += s->connect_errors;
        t->retries += s->retries;
        t->refused += s->refused;
        t->idle_timeouts += s->idle_timeouts;
        t->resets += s->resets;
}

static void add_udp_stats(struct fwd_udp_stats *t, const struct fwd_udp_stats *s) {
        t->sessions += s->sessions;
        t->active += s->active;
        t->to_endpoints += s->to_endpoints;
        t->to_clients += s->to_clients;
        t->bytes_to_endpoints += s->bytes_to_endpoints;
        t->bytes_to_clients += s->bytes_to_clients;
        t->dropped += s->dropped;
        t->refused += s->refused;
        t->idle_timeouts += s->idle_timeouts;
}

static void frontend_free(struct frontend *fe) {
        struct backend *b = fe->b;

        if (fe->tcp) {
                struct fwd_tcp_stats st;
                fwd_tcp_get_stats(fe->tcp, &st);
                st.active = 0;
                add_tcp_stats(&b->gone.tcp, &st);
                fwd_tcp_free(fe->tcp);
        }
        if (fe->udp) {
                struct fwd_udp_stats st;
                fwd_udp_get_stats(fe->udp, &st);
                st.active = 0;
                add_udp_stats(&b->gone.udp, &st);
                fwd_udp_free(fe->udp);
        }
        picker_free(fe->picker);
        buf_done(&fe->line);
        free(fe);
}

/* Frees the draining frontends whose connections have all ended. */
static void reap_draining(struct backend *b) {
        struct frontend **pp = &b->draining;

        while (*pp) {
                struct frontend *fe = *pp;
                struct fwd_tcp_stats st;
                fwd_tcp_get_stats(fe->tcp, &st);
                if (st.active > 0) {
                        pp = &fe->next_draining;
                        continue;
                }
                *pp = fe->next_draining;
                frontend_free(fe);
        }
}

/* No longer wanted: removed from the map; a TCP one with open
 * connections stops accepting and drains, anything else goes now. */
static void frontend_retire(struct backend *b, struct frontend *fe) {
        struct fwd_tcp_stats st = {0};

        hmap_remove(&b->frontends, fe->key);
        if (fe->tcp)
                fwd_tcp_get_stats(fe->tcp, &st);
        if (st.active == 0) {
                frontend_free(fe);
                return;
        }
        fwd_tcp_stop_accepting(fe->tcp);
        fe->next_draining = b->draining;
        b->draining = fe;
}

/* Binds the frontend's socket. Returns 0 or -errno (logged once per
 * failure streak). */
/* The socket a predecessor handed over for want, taken out of the list;
 * -1 if there is none. */
static int adoptable(struct backend *b, const struct userspace_frontend *want) {
        for (size_t i = 0; i < b->n_adopt; i++) {
                struct handover_sock *s = &b->adopt[i];
                if (s->fd >= 0 && s->proto == want->proto && fwd_addr_equal(&s->addr, &want->addr)) {
                        int fd = s->fd;
                        s->fd = -1;
                        return fd;
                }
        }
        return -1;
}

static int frontend_open(struct backend *b, struct frontend *fe, const struct userspace_frontend *want) {
        int fd = adoptable(b, want);
        int r;

        if (fe->proto == IPPROTO_TCP) {
                const struct fwd_tcp_params tp = {
                        .idle_timeout_ms = b->tcp_idle_ms,
                        .connect_timeout_ms = CONNECT_TIMEOUT_MS,
                        .pipes = b->pipes,
                };
                r = fd >= 0 ? fwd_tcp_adopt(b->env.loop, fd, &tp, pick_tcp, fe, &fe->tcp)
                            : fwd_tcp_new(b->env.loop, &want->addr, &tp, pick_tcp, fe, &fe->tcp);
        } else {
                const struct fwd_udp_params up = {.idle_timeout_ms = b->udp_idle_ms};
                r = fd >= 0 ? fwd_udp_adopt(b->env.loop, fd, &up, pick_udp, fe, &fe->udp)
                            : fwd_udp_new(b->env.loop, &want->addr, &up, pick_udp, fe, &fe->udp);
        }
        if (fd >= 0 && r < 0)
                close(fd);      /* not what it claimed to be */
        if (r < 0 && !fe->failed)
                log_error_errno(r, "Failed to open %s for service %s (retried with each full sync)", fe->key,
                                want->svc_key);
        fe->failed = r < 0;
        return r;
}

/* Gives fe want's endpoints; UDP sessions to an endpoint that left end
 * now, so their next datagram picks again (the stale-UDP lesson). */
static int frontend_update(struct frontend *fe, const struct userspace_frontend *want) {
        if (fe->udp)
                for (size_t i = 0; i < picker_n(fe->picker); i++) {
                        const struct fwd_addr *old = picker_endpoint(fe->picker, i);
                        bool kept = false;
                        for (size_t k = 0; k < want->n_eps && !kept; k++)
                                kept = fwd_addr_equal(old, &want->eps[k]);
                        if (!kept)
                                fwd_udp_drop_endpoint(fe->udp, old);
                }
        buf_clear(&fe->line);
        userspace_frontend_format(want, &fe->line);
        return picker_set(fe->picker, want->eps, want->n_eps, want->affinity_timeout);
}

static int frontend_want(struct backend *b, uint8_t family, const struct userspace_frontend *want, bool retry) {
        struct frontend *fe = hmap_get(&b->frontends, want->key);
        int r;

        if (!fe) {
                fe = calloc(1, sizeof *fe);
                if (!fe || !(fe->picker = picker_new())) {
                        free(fe);
                        return -ENOMEM;
                }
                memcpy(fe->key, want->key, sizeof fe->key);
                fe->b = b;
                fe->family = family;
                fe->proto = want->proto;
                fe->line = (struct buf) BUF_INIT;
                hmap_put(&b->frontends, fe->key, fe);
                retry = true;
        }
        fe->gen = b->gen;
        r = frontend_update(fe, want);
        if (r < 0)
                return r;
        if (!fe->tcp && !fe->udp && retry)
                (void) frontend_open(b, fe, want);      /* logged; the rest of the node goes on */
        return 0;
}

/* --- addresses --- */

static int addr_want(struct backend *b, const struct inet_addr *a) {
        char key[INET_ADDR_STRLEN];
        struct held_addr *h;
        int r;

        inet_addr_format(a, key);
        h = hmap_get(&b->addrs, key);
        if (!h) {
                r = ifaddr_add(b->ia, a);
                if (r < 0)
                        return log_error_errno(r, "Failed to add service address %s to " USERSPACE_LINK, key);
                h = calloc(1, sizeof *h);
                if (!h)
                        return -ENOMEM;
                memcpy(h->key, key, sizeof key);
                h->a = *a;
                hmap_put(&b->addrs, h->key, h);
        }
        h->gen = b->gen;
        return 0;
}

/* What the interface holds, as if this process had added it (a full sync
 * trusts only the kernel: a predecessor's addresses, or someone's
 * deletions). */
static int addrs_read(struct backend *b, uint8_t family) {
        struct inet_addr *have = NULL;
        size_t n = 0;
        const char *k;
        void *v;
        int r;

        for (size_t i = 0; hmap_next(&b->addrs, &i, &k, &v);) {
                struct held_addr *h = v;
                if (h->a.family == family) {
                        hmap_remove(&b->addrs, h->key);
                        free(h);
                }
        }
        r = ifaddr_list(b->ia, &have, &n);
        if (r < 0)
                return log_error_errno(r, "Failed to list the addresses of " USERSPACE_LINK);
        for (size_t i = 0; i < n; i++) {
                struct held_addr *h;
                if (have[i].family != family || !(h = calloc(1, sizeof *h)))
                        continue;
                inet_addr_format(&have[i], h->key);
                h->a = have[i];
                h->gen = 0;
                hmap_put(&b->addrs, h->key, h);
        }
        free(have);
        return 0;
}

/* --- restarts (docs/userspace.md) --- */

/* After the family's first sync, the handed-over sockets it did not want
 * (a service deleted while no process ran) close. */
static void close_unadopted(struct backend *b, uint8_t family) {
        size_t k = 0;

        for (size_t i = 0; i < b->n_adopt; i++) {
                struct handover_sock *s = &b->adopt[i];
                if (s->fd >= 0 && s->addr.ip.family == family) {
                        close(s->fd);
                        s->fd = -1;
                }
                if (s->fd >= 0)
                        b->adopt[k++] = *s;
        }
        b->n_adopt = k;
        if (k == 0) {
                free(b->adopt);
                b->adopt = NULL;
        }
}

/* A successor is connecting: it gets every socket, this process stops
 * taking new connections and datagrams, and the core retires. */
static void on_successor(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct backend *b = userdata;
        size_t n = 0, cap = b->frontends.len;
        int *fds = calloc(cap ? cap : 1, sizeof *fds);
        const char *k;
        void *v;
        (void) events;

        if (!fds)
                return;
        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v) && n < cap;) {
                struct frontend *fe = v;
                int s = fe->tcp ? fwd_tcp_listener(fe->tcp) : fe->udp ? fwd_udp_socket(fe->udp) : -1;
                if (s >= 0)
                        fds[n++] = s;
        }
        int r = handover_give(fd, fds, n, HANDOVER_WAIT_MS);
        free(fds);
        if (r == -EAGAIN)
                return;
        if (r < 0) {
                /* It binds beside this process instead (SO_REUSEPORT). */
                log_error_errno(r, "Failed to hand the service sockets to a successor");
                return;
        }
        log_info("Handed %zu service sockets to a successor", n);
        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v);) {
                struct frontend *fe = v;
                if (fe->tcp)
                        fwd_tcp_stop_accepting(fe->tcp);
                if (fe->udp)
                        fwd_udp_stop_reading(fe->udp);
        }
        ev_io_del(l, fd);
        close(fd);
        b->handover_fd = -1;
        b->retired = true;
        b->env.handed_over(b->env.core);
}

/* Takes a predecessor's sockets, if one is running, then listens for a
 * successor. Neither is fatal: without them, a restart refuses
 * connections for a moment, as a crash does. */
static void handover_start(struct backend *b) {
        const char *dir = b->env.config->state_dir;
        char path[4096];
        int r;

        if (!dir || !*dir || (size_t) snprintf(path, sizeof path, "%s/" HANDOVER_SOCK, dir) >= sizeof path)
                return;
        r = handover_take(path, HANDOVER_WAIT_MS, &b->adopt, &b->n_adopt);
        if (r == 0)
                log_info("Took %zu service sockets from the process this one replaces", b->n_adopt);
        else if (r != -ENOENT && r != -ECONNREFUSED)
                log_warning_errno(r, "Failed to take the service sockets of the process this one replaces");
        r = handover_listen(path);
        if (r < 0) {
                log_warning_errno(r, "Failed to listen on %s: a restart will refuse connections for a moment", path);
                return;
        }
        b->handover_fd = r;
        if (ev_io_add(b->env.loop, r, EPOLLIN, on_successor, b) < 0) {
                close(r);
                b->handover_fd = -1;
        }
}

/* --- the sync --- */

static int link_ready(struct backend *b) {
        int r = ifaddr_link_ensure(b->ia);
        if (r < 0)
                return log_error_errno(r, "Failed to set up interface " USERSPACE_LINK);
        b->link_ready = true;
        return 0;
}

static int us_sync(struct backend *b, uint8_t family, const struct backend_sync *s, struct backend_stats *ret) {
        struct userspace_plan pl;
        bool full = s->kind == BACKEND_SYNC_FULL;
        const char *k;
        void *v;
        int r, err = 0;

        *ret = (struct backend_stats) {0};
        if (b->retired)
                return 0;       /* the successor serves the node */
        if ((full || !b->link_ready) && (r = link_ready(b)) < 0) {
                ret->kernel_refused = true;
                return r;
        }
        if (full && (r = addrs_read(b, family)) < 0) {
                ret->kernel_refused = true;
                return r;
        }
        r = userspace_plan_build(s->model, s->params, &pl);
        if (r < 0)
                return r;
        b->gen++;
        /* Addresses first: a frontend binds to one. */
        for (size_t i = 0; i < pl.n_addrs; i++) {
                r = addr_want(b, &pl.addrs[i]);
                if (r < 0 && !err)
                        err = r;
        }
        for (size_t i = 0; i < pl.n_fe; i++) {
                r = frontend_want(b, family, &pl.fe[i], s->kind != BACKEND_SYNC_PARTIAL);
                if (r < 0 && !err)
                        err = r;
        }
        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v);) {
                struct frontend *fe = v;
                if (fe->family == family && fe->gen != b->gen)
                        frontend_retire(b, fe);
        }
        for (size_t i = 0; hmap_next(&b->addrs, &i, &k, &v);) {
                struct held_addr *h = v;
                if (h->a.family != family || h->gen == b->gen)
                        continue;
                r = ifaddr_del(b->ia, &h->a);
                if (r < 0) {
                        log_error_errno(r, "Failed to remove address %s from " USERSPACE_LINK, h->key);
                        if (!err)
                                err = r;
                        continue;
                }
                hmap_remove(&b->addrs, h->key);
                free(h);
        }
        reap_draining(b);
        close_unadopted(b, family);
        size_t *sctp = &b->n_sctp[family == 6];
        if (pl.n_sctp != *sctp && pl.n_sctp > 0)
                log_warning("%zu SCTP service ports are not served: userspace mode forwards TCP and UDP only",
                            pl.n_sctp);
        *sctp = pl.n_sctp;
        /* Upstream's message and numServices, as the other modes log them. */
        log_v_kv(2, "Reloading service userspace data", KV_STR("ipFamily", family == 6 ? "IPv6" : "IPv4"),
                 KV_INT("numServices", model_n_services(s->model)), KV_INT("frontends", pl.n_fe),
                 KV_INT("addresses", pl.n_addrs));
        userspace_plan_done(&pl);
        if (err) {
                ret->kernel_refused = true;
                return err;
        }
        struct nolocal *nl = b->nolocal[family == 6];
        nolocal_update(nl, s->model, s->params, s->all_changed ? NULL : s->changed);
        nolocal_totals(nl, &ret->no_local_internal, &ret->no_local_external);
        return 0;
}

/* The interface is the canary: gone (deleted by hand, or by another
 * kproxy's --cleanup) means every address must be put back. */
static void us_check(struct backend *b) {
        struct inet_addr *have = NULL;
        size_t n = 0;

        reap_draining(b);
        if (!b->link_ready)
                return;
        if (ifaddr_list(b->ia, &have, &n) == -ENODEV) {
                b->link_ready = false;
                b->env.changed(b->env.core, 0, "interface " USERSPACE_LINK " is gone");
        }
        free(have);
}

/* --- the object --- */

static struct backend *us_destroy(struct backend *b) {
        const char *k;
        void *v;

        if (!b)
                return NULL;
        if (b->handover_fd >= 0) {
                ev_io_del(b->env.loop, b->handover_fd);
                close(b->handover_fd);
        }
        handover_socks_free(b->adopt, b->n_adopt);
        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v);)
                frontend_free(v);
        hmap_done(&b->frontends);
        while (b->draining) {
                struct frontend *fe = b->draining;
                b->draining = fe->next_draining;
                frontend_free(fe);
        }
        for (size_t i = 0; hmap_next(&b->addrs, &i, &k, &v);)
                free(v);
        hmap_done(&b->addrs);
        fwd_pipes_free(b->pipes);
        nolocal_free(b->nolocal[0]);
        nolocal_free(b->nolocal[1]);
        ifaddr_close(b->ia);
        free(b);
        return NULL;
}

static int us_create(const struct backend_env *env, struct backend **ret) {
        struct backend *b = calloc(1, sizeof *b);
        const struct config_conntrack *ct = &env->config->conntrack;
        int r;

        if (!b)
                return -ENOMEM;
        b->env = *env;
        b->handover_fd = -1;
        b->frontends = (struct hmap) HMAP_INIT_KEY_ARRAY(struct frontend, key);
        b->addrs = (struct hmap) HMAP_INIT_KEY_ARRAY(struct held_addr, key);
        /* conntrack's timeouts, which the other modes' flows live by. */
        b->tcp_idle_ms = ct->tcp_established_timeout_ms;
        b->udp_idle_ms = ct->udp_stream_timeout_ms ? ct->udp_stream_timeout_ms
                         : ct->udp_timeout_ms      ? ct->udp_timeout_ms
                                                   : UDP_IDLE_DEFAULT_MS;
        r = ifaddr_open(USERSPACE_LINK, &b->ia);
        if (r < 0) {
                log_error_errno(r, "Failed to open rtnetlink");
                goto fail;
        }
        r = fwd_pipes_new(SPARE_PIPES, PIPE_SIZE, &b->pipes);
        if (r < 0)
                goto fail;
        b->nolocal[0] = nolocal_new();
        b->nolocal[1] = nolocal_new();
        if (!b->nolocal[0] || !b->nolocal[1]) {
                r = -ENOMEM;
                goto fail;
        }
        handover_start(b);
        *ret = b;
        return 0;
fail:
        us_destroy(b);
        return r;
}

/* --- node set-up, switching modes, --cleanup --- */

/* Each forwarded connection leaves a TIME_WAIT toward its endpoint (the
 * client's FIN is passed on first): without reuse, ~28k connections a
 * minute to one endpoint exhaust the ports. */
static int us_setup(const struct kproxy_config *c, struct host_facts *host, const char *node_name,
                    const char *root) {
        (void) c, (void) host, (void) node_name;
        int r = sysctl_write_u64(root, "/proc/sys/net/ipv4/tcp_tw_reuse", 1);
        if (r < 0 && !sysctl_not_permitted(r))
                return log_warning_errno(r, "Failed to set net.ipv4.tcp_tw_reuse to 1");
        return 0;
}

static bool us_ipv6_usable(const struct host_facts *host) {
        (void) host;
        return true;    /* addresses and sockets: nothing to probe beyond the kernel's IPv6 */
}

static bool link_present(void) {
        struct ifaddr *ia;
        struct inet_addr *have = NULL;
        size_t n = 0;

        if (ifaddr_open(USERSPACE_LINK, &ia) < 0)
                return true;    /* unsure */
        int r = ifaddr_list(ia, &have, &n);
        free(have);
        ifaddr_close(ia);
        return r != -ENODEV;
}

static int link_remove(void) {
        struct ifaddr *ia;
        int r = ifaddr_open(USERSPACE_LINK, &ia);

        if (r < 0)
                return log_error_errno(r, "Failed to open rtnetlink");
        r = ifaddr_link_delete(ia);
        ifaddr_close(ia);
        if (r == -EEXIST)
                return log_warning_errno(r, "Interface " USERSPACE_LINK " is not kproxy's, left alone");
        if (r < 0)
                return log_error_errno(r, "Failed to delete interface " USERSPACE_LINK);
        return 0;
}

static bool us_leftovers(const struct host_facts *h, bool running) {
        (void) h;
        return !running && link_present();
}

static int us_remove_leftovers(const struct host_facts *h, bool running) {
        (void) h;
        return running ? 0 : link_remove();
}

static int us_cleanup(const struct kproxy_config *c, const struct host_facts *h) {
        (void) c, (void) h;
        return link_remove();
}

static int us_render(const struct model *m, const struct render_params *p, const struct inet_cidr *service_cidrs,
                     size_t n_service_cidrs, bool netlink, struct buf *out) {
        struct userspace_plan pl;
        (void) service_cidrs, (void) n_service_cidrs, (void) netlink;

        int r = userspace_plan_build(m, p, &pl);
        if (r < 0)
                return r;
        userspace_plan_format(&pl, out);
        userspace_plan_done(&pl);
        return 0;
}

/* --- observability --- */

static void totals(struct backend *b, struct fwd_tcp_stats *tcp, struct fwd_udp_stats *udp, size_t *n_fe) {
        const char *k;
        void *v;

        *tcp = b->gone.tcp;
        *udp = b->gone.udp;
        *n_fe = 0;
        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v);) {
                struct frontend *fe = v;
                struct fwd_tcp_stats ts;
                struct fwd_udp_stats us;
                if (fe->tcp) {
                        fwd_tcp_get_stats(fe->tcp, &ts);
                        add_tcp_stats(tcp, &ts);
                        ++*n_fe;
                }
                if (fe->udp) {
                        fwd_udp_get_stats(fe->udp, &us);
                        add_udp_stats(udp, &us);
                        ++*n_fe;
                }
        }
        for (struct frontend *fe = b->draining; fe; fe = fe->next_draining) {
                struct fwd_tcp_stats ts;
                fwd_tcp_get_stats(fe->tcp, &ts);
                add_tcp_stats(tcp, &ts);
        }
}

static void metric(struct buf *out, const char *name, const char *type, const char *help) {
        buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void us_expose(struct backend *b, struct buf *out) {
        struct fwd_tcp_stats t;
        struct fwd_udp_stats u;
        size_t n_fe;

        totals(b, &t, &u, &n_fe);
        metric(out, "kproxy_userspace_frontends", "gauge", "Listening TCP and bound UDP service sockets.");
        buf_printf(out, "kproxy_userspace_frontends %zu\n", n_fe);
        metric(out, "kproxy_userspace_connections_total", "counter", "TCP connections accepted.");
        buf_printf(out, "kproxy_userspace_connections_total %" PRIu64 "\n", t.accepted);
        metric(out, "kproxy_userspace_active_connections", "gauge", "TCP connections open now.");
        buf_printf(out, "kproxy_userspace_active_connections %" PRIu64 "\n", t.active);
        metric(out, "kproxy_userspace_accept_errors_total", "counter", "accept() failures.");
        buf_printf(out, "kproxy_userspace_accept_errors_total %" PRIu64 "\n", t.accept_errors);
        metric(out, "kproxy_userspace_connect_errors_total", "counter",
               "Connections to endpoints that failed (each try).");
        buf_printf(out, "kproxy_userspace_connect_errors_total %" PRIu64 "\n", t.connect_errors);
        metric(out, "kproxy_userspace_refused_total", "counter",
               "TCP clients reset and UDP sessions ended: no endpoint answered.");
        buf_printf(out, "kproxy_userspace_refused_total{protocol=\"tcp\"} %" PRIu64 "\n", t.refused);
        buf_printf(out, "kproxy_userspace_refused_total{protocol=\"udp\"} %" PRIu64 "\n", u.refused);
        metric(out, "kproxy_userspace_bytes_total", "counter", "Bytes forwarded.");
        buf_printf(out, "kproxy_userspace_bytes_total{direction=\"to_endpoints\",protocol=\"tcp\"} %" PRIu64 "\n",
                   t.bytes_to_endpoints);
        buf_printf(out, "kproxy_userspace_bytes_total{direction=\"to_clients\",protocol=\"tcp\"} %" PRIu64 "\n",
                   t.bytes_to_clients);
        buf_printf(out, "kproxy_userspace_bytes_total{direction=\"to_endpoints\",protocol=\"udp\"} %" PRIu64 "\n",
                   u.bytes_to_endpoints);
        buf_printf(out, "kproxy_userspace_bytes_total{direction=\"to_clients\",protocol=\"udp\"} %" PRIu64 "\n",
                   u.bytes_to_clients);
        metric(out, "kproxy_userspace_udp_sessions_total", "counter", "UDP sessions created.");
        buf_printf(out, "kproxy_userspace_udp_sessions_total %" PRIu64 "\n", u.sessions);
        metric(out, "kproxy_userspace_udp_active_sessions", "gauge", "UDP sessions open now.");
        buf_printf(out, "kproxy_userspace_udp_active_sessions %" PRIu64 "\n", u.active);
        metric(out, "kproxy_userspace_udp_dropped_total", "counter",
               "Datagrams dropped: no endpoint, the session limit, or a failed send.");
        buf_printf(out, "kproxy_userspace_udp_dropped_total %" PRIu64 "\n", u.dropped);
}

/* Open TCP connections. UDP sessions are not waited for: a late reply
 * is lost as a datagram may be, and the client's next one is served by
 * the successor (or refused). */
static size_t us_busy(struct backend *b) {
        struct fwd_tcp_stats t;
        struct fwd_udp_stats u;
        size_t n_fe;

        totals(b, &t, &u, &n_fe);
        return (size_t) t.active;
}

/* Stopping without a successor: listeners close (new connections are
 * refused from now on), UDP sockets too (port unreachable), and the open
 * TCP connections go on while the core waits for them. */
static void us_quiesce(struct backend *b) {
        const char *k;
        void *v;

        b->retired = true;
        if (b->handover_fd >= 0) {
                ev_io_del(b->env.loop, b->handover_fd);
                close(b->handover_fd);
                b->handover_fd = -1;
        }
        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v);) {
                struct frontend *fe = v;
                if (fe->tcp)
                        fwd_tcp_stop_accepting(fe->tcp);
                if (fe->udp) {
                        struct fwd_udp_stats st;
                        fwd_udp_get_stats(fe->udp, &st);
                        st.active = 0;
                        add_udp_stats(&b->gone.udp, &st);
                        fe->udp = fwd_udp_free(fe->udp);
                }
        }
}

static void us_describe(struct backend *b, struct buf *out) {
        const char *k;
        void *v;

        for (size_t i = 0; hmap_next(&b->addrs, &i, &k, &v);)
                buf_printf(out, "address %s\n", k);
        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v);) {
                struct frontend *fe = v;
                if (!fe->tcp && !fe->udp)
                        continue;       /* wanted, not open */
                buf_put(out, fe->line.data, fe->line.len);
                buf_putc(out, '\n');
        }
}

const struct backend_ops backend_userspace = {
        .name = "userspace",
        .setup = us_setup,
        .ipv6_usable = us_ipv6_usable,
        .create = us_create,
        .destroy = us_destroy,
        .sync = us_sync,
        .check = us_check,
        .leftovers = us_leftovers,
        .remove_leftovers = us_remove_leftovers,
        .cleanup = us_cleanup,
        .render = us_render,
        .expose = us_expose,
        .describe = us_describe,
        .busy = us_busy,
        .quiesce = us_quiesce,
};
