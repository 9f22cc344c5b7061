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
 *
 * The parts, each on the ones below it; only this file sees them all:
 *
 *   backend.c         the object and the operations
 *   us-restart.c      the hand-over to and from another process
 *   us-stats.c        metrics and /debug/backend (reads only)
 *   us-switch.c       set-up, switching modes, --cleanup, conntrack
 *   us-addrs.c        the service addresses on kube-proxy0
 *   us-frontends.c    the sockets, their pickers, draining, the stop
 */
#include "proxy/userspace/backend.h"

#include <linux/capability.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "config/config.h"
#include "ev/ev.h"
#include "host/host.h"
#include "model/model.h"
#include "proxy/backend.h"
#include "proxy/userspace/us-addrs.h"
#include "proxy/userspace/us-frontends.h"
#include "proxy/userspace/us-restart.h"
#include "proxy/userspace/us-stats.h"
#include "proxy/userspace/us-switch.h"
#include "render/nolocal.h"
#include "render/render.h"
#include "userspace/fwd-pipes.h"
#include "userspace/plan.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/log.h"

#define US_UDP_IDLE_DEFAULT_MS 30000    /* the kernel's UDP conntrack timeout */
#define US_PIPE_SIZE (1 << 20)          /* 1 MiB: a third less CPU per GB (docs/userspace.md) */
#define US_SPARE_PIPES 256
#define US_UDP_REPLY_WAIT_MS 2000       /* after a hand-over, for replies to datagrams passed on */
#define US_SETTLE_MS 100                /* stopping: how often listeners are looked at */

struct userspace_mode {
        struct backend base;            /* the core's handle: BACKEND_MODE() */
        struct backend_env env;
        struct fwd_pipes *pipes;
        struct us_addrs addrs;
        struct us_frontends fe;
        struct us_restart restart;
        size_t n_sctp[2];               /* per family, as last logged */
        struct ev_timer *nat_flush;     /* after the first sync: a NAT mode's conntrack bindings go */
        bool nat_flushed;
        struct ev_timer *settle;        /* stopping: listeners close as their handshakes end */
        struct nolocal *nolocal[2];     /* per family: Local policies without local endpoints */
        bool link_ready;
};

/* --- the sync --- */

static int link_ready(struct userspace_mode *b) {
        int r = us_addrs_link_ensure(&b->addrs);
        if (r < 0)
                return r;
        b->link_ready = true;
        return 0;
}

static void on_nat_flush(struct ev_loop *l, void *userdata) {
        struct userspace_mode *b = userdata;
        (void) l;
        b->nat_flush = NULL;
        us_switch_flush_nat(&b->fe, b->env.families, b->env.n_families);
}

static int us_sync(struct backend *base, uint8_t family, const struct backend_sync *s, struct backend_stats *ret) {
        struct userspace_mode *b = BACKEND_MODE(base, struct userspace_mode);
        struct userspace_plan pl;
        bool full = s->kind == BACKEND_SYNC_FULL;
        const char *k;
        int r, err = 0;

        *ret = (struct backend_stats) {0};
        if (b->restart.retired)
                return 0;       /* the successor serves the node */
        /* Only now, with the model complete: the predecessor serves until
         * this sync adopts its sockets. */
        us_restart_start(&b->restart);
        if ((full || !b->link_ready) && (r = link_ready(b)) < 0) {
                ret->kernel_refused = true;
                return r;
        }
        if (full && (r = us_addrs_read(&b->addrs, family)) < 0) {
                ret->kernel_refused = true;
                return r;
        }
        /* A partial sync plans only the changed services (a whole plan
         * is about a second of CPU at 20k services). */
        const struct hmap *only = s->kind == BACKEND_SYNC_PARTIAL && !s->all_changed ? s->changed : NULL;
        r = userspace_plan_build(s->model, s->params, only, &pl);
        if (r < 0)
                return r;
        us_frontends_begin(&b->fe);
        /* Addresses first: a frontend binds to one. */
        if (only)
                for (size_t i = 0; hmap_next(only, &i, &k, NULL);)
                        us_addrs_drop(&b->addrs, family, k);
        else
                us_addrs_forget(&b->addrs, family);
        r = us_addrs_take(&b->addrs, family, &pl);
        if (r < 0)
                err = r;
        for (size_t i = 0; i < pl.n_fe; i++) {
                r = us_frontends_want(&b->fe, s->model, only, family, &pl.fe[i], s->kind != BACKEND_SYNC_PARTIAL);
                if (r < 0 && !err)
                        err = r;
        }
        us_frontends_end(&b->fe, family, only);
        r = us_addrs_prune(&b->addrs, family);
        if (r < 0 && !err)
                err = r;
        us_frontends_close_unadopted(&b->fe, family);
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
        if (!b->nat_flushed) {
                b->nat_flushed = true;
                b->nat_flush = ev_timer_add(b->env.loop, 0, on_nat_flush, b);
        }
        struct nolocal *nl = b->nolocal[family == 6];
        nolocal_update(nl, s->model, s->params, s->all_changed ? NULL : s->changed);
        nolocal_totals(nl, &ret->no_local_internal, &ret->no_local_external);
        return 0;
}

/* The interface is the canary: gone (deleted by hand, or by another
 * kproxy's --cleanup) means every address must be put back. */
static void us_check(struct backend *base) {
        struct userspace_mode *b = BACKEND_MODE(base, struct userspace_mode);

        us_frontends_reap(&b->fe);
        if (b->link_ready && !us_addrs_link_present(&b->addrs)) {
                b->link_ready = false;
                b->env.changed(b->env.core, 0, "interface " US_LINK " is gone");
        }
}

/* A socket per frontend, and per connection two sockets and two pipes:
 * 20k services need more descriptors than the usual soft limit (Go raises
 * it to the hard limit on its own). Raised as far as allowed: to the
 * kernel's nr_open where the process may raise its hard limit. */
static void raise_fd_limit(void) {
        struct rlimit rl;
        unsigned long max = 0;
        FILE *f = fopen("/proc/sys/fs/nr_open", "re");

        if (f) {
                if (fscanf(f, "%lu", &max) != 1)
                        max = 0;
                fclose(f);
        }
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return;
        if (max > rl.rlim_max) {
                struct rlimit more = {max, max};
                if (setrlimit(RLIMIT_NOFILE, &more) == 0) {
                        log_v(2, "Raised the open-files limit to %lu", max);
                        return;
                }
        }
        if (rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
                        log_v(2, "Raised the open-files limit to %lu", (unsigned long) rl.rlim_max);
        }
}

/* --- the object --- */

static struct userspace_mode *us_free(struct userspace_mode *b) {
        if (!b)
                return NULL;
        us_restart_close(&b->restart);
        b->nat_flush = ev_timer_cancel(b->env.loop, b->nat_flush);
        b->settle = ev_timer_cancel(b->env.loop, b->settle);
        us_frontends_done(&b->fe);
        us_addrs_done(&b->addrs);
        fwd_pipes_free(b->pipes);
        nolocal_free(b->nolocal[0]);
        nolocal_free(b->nolocal[1]);
        free(b);
        return NULL;
}

static struct backend *us_destroy(struct backend *base) {
        if (base)
                us_free(BACKEND_MODE(base, struct userspace_mode));
        return NULL;
}

static int us_create(const struct backend_env *env, struct backend **ret) {
        struct userspace_mode *b = xcalloc(1, sizeof *b);
        const struct config_conntrack *ct = &env->config->conntrack;
        int r;

        b->env = *env;
        r = us_addrs_init(&b->addrs);
        if (r < 0) {
                free(b);
                return r;
        }
        r = fwd_pipes_new(US_SPARE_PIPES, US_PIPE_SIZE, &b->pipes);
        if (r < 0) {
                us_addrs_done(&b->addrs);
                free(b);
                return r;
        }
        /* conntrack's timeouts, which the other modes' flows live by. */
        us_frontends_init(&b->fe, env->loop, b->pipes, ct->tcp_established_timeout_ms,
                          ct->udp_stream_timeout_ms ? ct->udp_stream_timeout_ms
                          : ct->udp_timeout_ms      ? ct->udp_timeout_ms
                                                    : US_UDP_IDLE_DEFAULT_MS);
        us_restart_init(&b->restart, &b->env, &b->fe);
        b->nolocal[0] = nolocal_new();
        b->nolocal[1] = nolocal_new();
        raise_fd_limit();
        us_restart_announce(&b->restart);
        b->base.ops = &backend_userspace;
        *ret = &b->base;
        return 0;
}

/* Addresses and sockets: only the kernel's IPv6 to ask about (a kernel
 * booted with ipv6.disable=1 has no /proc/net/if_inet6). */
static bool us_ipv6_usable(const struct host_facts *host) {
        (void) host;
        return access("/proc/net/if_inet6", F_OK) == 0;
}

static int us_render(const struct model *m, const struct render_params *p, const struct inet_cidr *service_cidrs,
                     size_t n_service_cidrs, bool netlink, struct buf *out) {
        struct userspace_plan pl;
        (void) service_cidrs, (void) n_service_cidrs, (void) netlink;

        int r = userspace_plan_build(m, p, NULL, &pl);
        if (r < 0)
                return r;
        userspace_plan_format(&pl, out);
        userspace_plan_done(&pl);
        return 0;
}

static void us_expose(struct backend *base, struct buf *out) {
        us_stats_expose(&BACKEND_MODE(base, struct userspace_mode)->fe, out);
}

static void us_describe(struct backend *base, struct buf *out) {
        struct userspace_mode *b = BACKEND_MODE(base, struct userspace_mode);
        us_stats_describe(&b->addrs, &b->fe, out);
}

/* Open TCP connections; on a stop, the listeners whose handshakes are
 * still under way; after a hand-over, the UDP datagrams awaiting their
 * reply (the successor reads the service sockets, but a reply comes back
 * to this process's session socket, and would meet a closed port if the
 * process exited). On a stop the UDP sockets have closed (a client's next
 * datagram is refused), so nothing of UDP is waited for. */
static size_t us_busy(struct backend *base) {
        struct userspace_mode *b = BACKEND_MODE(base, struct userspace_mode);
        struct fwd_tcp_stats t;
        struct fwd_udp_stats u;
        size_t n_fe, awaiting = 0;

        us_frontends_totals(&b->fe, &t, &u, &n_fe);
        if (b->restart.retired) {
                uint64_t now = ev_now_ms(b->env.loop);
                awaiting = us_frontends_udp_awaiting(&b->fe, now > US_UDP_REPLY_WAIT_MS ? now - US_UDP_REPLY_WAIT_MS : 0);
        }
        return (size_t) t.active + b->fe.listening + awaiting;
}

static void on_settle(struct ev_loop *l, void *userdata) {
        struct userspace_mode *b = userdata;
        us_frontends_settle(&b->fe);
        b->settle = b->fe.listening ? ev_timer_add(l, US_SETTLE_MS, on_settle, b) : NULL;
}

/* Stopping without a successor: each listener drops new SYNs and closes
 * once no handshake of its own is under way (closing earlier would reset
 * it: userspace/synrecv.h), looked at every US_SETTLE_MS, then refuses;
 * UDP sockets close at once (port unreachable); the open TCP connections
 * go on while the core waits for them (busy()). */
static void us_quiesce(struct backend *base) {
        struct userspace_mode *b = BACKEND_MODE(base, struct userspace_mode);

        b->restart.retired = true;
        us_restart_close(&b->restart);
        us_frontends_stop(&b->fe);
        if (b->fe.listening && !b->settle)
                b->settle = ev_timer_add(b->env.loop, US_SETTLE_MS, on_settle, b);
}

const struct backend_ops backend_userspace = {
        .name = "userspace",
        .stopped = "new connections to services on this node are refused until kproxy runs again",
        .hands_over = true,
        /* kube-proxy0 and its addresses; service ports below 1024. */
        .caps = 1ULL << CAP_NET_ADMIN | 1ULL << CAP_NET_BIND_SERVICE,
        .setup = us_switch_setup,
        .ipv6_usable = us_ipv6_usable,
        .create = us_create,
        .destroy = us_destroy,
        .sync = us_sync,
        .check = us_check,
        .leftovers = us_switch_leftovers,
        .remove_leftovers = us_switch_remove_leftovers,
        .cleanup = us_switch_cleanup,
        .render = us_render,
        .expose = us_expose,
        .describe = us_describe,
        .busy = us_busy,
        .quiesce = us_quiesce,
};
