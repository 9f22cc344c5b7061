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
#include "proxy/userspace/backend.h"
#include "proxy/userspace/mode.h"

#include <linux/capability.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include "apply/sysctl.h"
#include "config/config.h"
#include "ev/ev.h"
#include "host/host.h"
#include "model/model.h"
#include "render/nolocal.h"
#include "render/render.h"
#include "userspace/fwd-filter.h"
#include "userspace/fwd-pipes.h"
#include "userspace/fwd-tcp.h"
#include "userspace/fwd-udp.h"
#include "userspace/handover.h"
#include "userspace/ifaddr.h"
#include "userspace/pick.h"
#include "userspace/plan.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/hmap.h"
#include "util/log.h"

/* --- picking --- */

static uint64_t now_ms(const struct userspace_mode *b) {
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

void userspace_udp_close(struct frontend *fe) {
        struct fwd_udp_stats st;

        if (!fe->udp)
                return;
        fwd_udp_get_stats(fe->udp, &st);
        st.active = 0;
        userspace_add_udp_stats(&fe->b->gone.udp, &st);
        fe->udp = fwd_udp_free(fe->udp);
}

/* Closes the frontend's socket and connections, keeping their counts. */
static void frontend_close(struct frontend *fe) {
        if (fe->tcp) {
                struct fwd_tcp_stats st;
                fwd_tcp_get_stats(fe->tcp, &st);
                st.active = 0;
                userspace_add_tcp_stats(&fe->b->gone.tcp, &st);
                fe->tcp = fwd_tcp_free(fe->tcp);
        }
        userspace_udp_close(fe);
}

void userspace_frontend_free(struct frontend *fe) {
        frontend_close(fe);
        picker_free(fe->picker);
        buf_done(&fe->line);
        free(fe->sources);
        free(fe->svc_key);
        free(fe);
}

/* Frees the draining frontends whose connections have all ended. */
static void reap_draining(struct userspace_mode *b) {
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
                userspace_frontend_free(fe);
        }
}

/* No longer wanted: removed from the map. A TCP one takes what is queued
 * on its listener (closing would reset it) and closes it; with open
 * connections then, it drains. Anything else goes now. */
static void frontend_retire(struct userspace_mode *b, struct frontend *fe) {
        struct fwd_tcp_stats st = {0};

        hmap_remove(&b->frontends, fe->key);
        if (fe->tcp) {
                fwd_tcp_close_listener(fe->tcp);
                fwd_tcp_get_stats(fe->tcp, &st);
        }
        if (st.active == 0) {
                userspace_frontend_free(fe);
                return;
        }
        fe->next_draining = b->draining;
        b->draining = fe;
}

/* Gives the frontend's socket the filter of its sources. A filter that
 * cannot be set closes the socket: a load-balancer IP whose sources are
 * limited is served to none rather than to all. Returns 0 or -errno
 * (logged). */
static int frontend_filter(struct frontend *fe) {
        int fd = fe->tcp ? fwd_tcp_listener(fe->tcp) : fe->udp ? fwd_udp_socket(fe->udp) : -1;
        int r = fd < 0 ? 0 : fwd_filter_sources(fd, fe->family, fe->sources, fe->n_sources);
        if (r == 0)
                return 0;
        log_error_errno(r, "Failed to limit %s of service %s to its loadBalancerSourceRanges; not serving it", fe->key,
                        fe->svc_key);
        frontend_close(fe);
        fe->failed = true;
        return r;
}

/* Binds the frontend's socket. Returns 0 or -errno (logged once per
 * failure streak). */
static int frontend_open(struct userspace_mode *b, struct frontend *fe, const struct userspace_frontend *want) {
        int fd = userspace_adoptable(b, want);
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
        if (r == -EMFILE || r == -ENFILE)
                b->out_of_fds++;        /* one line for all of them, after the sync */
        else if (r < 0 && !fe->failed)
                log_error_errno(r, "Failed to open %s for service %s (retried with each full sync)", fe->key,
                                want->svc_key);
        fe->failed = r < 0;
        return r < 0 ? r : frontend_filter(fe);
}

/* The clients' table of want's service port (made on first use). */
static struct affinity *svc_affinity(struct userspace_mode *b, const struct userspace_frontend *want) {
        char key[512];
        struct svc_affinity *sa;

        snprintf(key, sizeof key, "%s:%s", want->svc_key, want->port_name);
        sa = hmap_get(&b->affinities, key);
        if (sa)
                return sa->aff;
        sa = calloc(1, sizeof *sa);
        if (!sa || !(sa->key = strdup(key)) || !(sa->aff = affinity_new())) {
                if (sa)
                        free(sa->key);
                free(sa);
                return NULL;
        }
        hmap_put(&b->affinities, sa->key, sa);
        return sa->aff;
}

/* Tables no frontend uses any more go (all of them: unshared false never
 * frees a table a picker still holds). */
static void affinities_prune(struct userspace_mode *b, bool all) {
        const char *k;
        void *v;

        for (size_t i = 0; hmap_next(&b->affinities, &i, &k, &v);) {
                struct svc_affinity *sa = v;
                if (!all && !affinity_unshared(sa->aff))
                        continue;
                hmap_remove(&b->affinities, sa->key);
                affinity_unref(sa->aff);
                free(sa->key);
                free(sa);
        }
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
        if (fe->n_sources != want->n_sources ||
            (want->n_sources && memcmp(fe->sources, want->sources, want->n_sources * sizeof *want->sources) != 0)) {
                struct inet_cidr *v = want->n_sources ? malloc(want->n_sources * sizeof *v) : NULL;
                if (want->n_sources && !v)
                        return -ENOMEM;
                if (v)
                        memcpy(v, want->sources, want->n_sources * sizeof *v);
                free(fe->sources);
                fe->sources = v;
                fe->n_sources = want->n_sources;
                (void) frontend_filter(fe);     /* logged; on failure it serves nobody */
        }
        buf_clear(&fe->line);
        userspace_frontend_format(want, &fe->line);
        struct affinity *shared = NULL;
        if (want->affinity_timeout) {
                shared = svc_affinity(fe->b, want);
                if (!shared)
                        return -ENOMEM;
        }
        return picker_set(fe->picker, want->eps, want->n_eps, want->affinity_timeout, shared);
}

static int frontend_want(struct userspace_mode *b, const struct model *model, const struct hmap *only, uint8_t family,
                         const struct userspace_frontend *want, bool retry) {
        struct frontend *fe = hmap_get(&b->frontends, want->key);
        int r;

        if (fe && strcmp(fe->svc_key, want->svc_key) != 0) {
                /* Two services claim one address and port (external IPs
                 * are the users'): the first in key order keeps it, as the
                 * plan decides among the services it plans. A partial sync
                 * of the later one leaves the earlier one's alone. */
                if (only && !hmap_get(only, fe->svc_key) && strcmp(fe->svc_key, want->svc_key) < 0 &&
                    model_service_get(model, fe->svc_key))
                        return 0;
                char *k = strdup(want->svc_key);
                if (!k)
                        return -ENOMEM;
                free(fe->svc_key);
                fe->svc_key = k;
        }
        if (!fe) {
                fe = calloc(1, sizeof *fe);
                if (!fe || !(fe->picker = picker_new()) || !(fe->svc_key = strdup(want->svc_key))) {
                        if (fe)
                                picker_free(fe->picker);
                        free(fe);
                        return -ENOMEM;
                }
                memcpy(fe->key, want->key, sizeof fe->key);
                fe->addr = want->addr;
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

/* One more service wants a: added to the interface if it is the first. */
static int addr_ref(struct userspace_mode *b, const struct inet_addr *a) {
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
        h->refs++;
        return 0;
}

static void addr_unref(struct userspace_mode *b, const struct inet_addr *a) {
        char key[INET_ADDR_STRLEN];
        struct held_addr *h = hmap_get(&b->addrs, inet_addr_format(a, key));

        if (h && h->refs > 0)
                h->refs--;
}

static void svc_addrs_free(struct svc_addrs *sa) {
        free(sa->key);
        free(sa->a);
        free(sa);
}

/* Lets go of what the service key asked for in family. */
static void svc_addrs_drop(struct userspace_mode *b, uint8_t family, const char *key) {
        struct svc_addrs *sa = hmap_remove(&b->svc_addrs[family == 6], key);

        if (!sa)
                return;
        for (size_t i = 0; i < sa->n; i++)
                addr_unref(b, &sa->a[i]);
        svc_addrs_free(sa);
}

static void svc_addrs_clear(struct userspace_mode *b, uint8_t family) {
        struct hmap *m = &b->svc_addrs[family == 6];
        const char *k;
        void *v;

        for (size_t i = 0; hmap_next(m, &i, &k, &v);)
                svc_addrs_free(v);
        hmap_done(m);
}

/* The plan's addresses (sorted by address, then service) referenced, and
 * remembered per service. */
static int addrs_take(struct userspace_mode *b, uint8_t family, const struct userspace_plan *pl) {
        struct hmap *m = &b->svc_addrs[family == 6];
        int err = 0;

        for (size_t i = 0; i < pl->n_addrs; i++) {
                const struct userspace_addr *ua = &pl->addrs[i];
                struct svc_addrs *sa = hmap_get(m, ua->svc_key);
                if (!sa) {
                        sa = calloc(1, sizeof *sa);
                        if (!sa || !(sa->key = strdup(ua->svc_key))) {
                                free(sa);
                                return -ENOMEM;
                        }
                        hmap_put(m, sa->key, sa);
                }
                struct inet_addr *v = realloc(sa->a, (sa->n + 1) * sizeof *v);
                if (!v)
                        return -ENOMEM;
                sa->a = v;
                sa->a[sa->n++] = ua->a;
                int r = addr_ref(b, &ua->a);
                if (r < 0 && !err)
                        err = r;
        }
        return err;
}

/* Removes the family's addresses no service wants. */
static int addrs_prune(struct userspace_mode *b, uint8_t family) {
        const char *k;
        void *v;
        int err = 0;

        for (size_t i = 0; hmap_next(&b->addrs, &i, &k, &v);) {
                struct held_addr *h = v;
                if (h->a.family != family || h->refs > 0)
                        continue;
                int r = ifaddr_del(b->ia, &h->a);
                if (r < 0) {
                        log_error_errno(r, "Failed to remove address %s from " USERSPACE_LINK, h->key);
                        if (!err)
                                err = r;
                        continue;
                }
                hmap_remove(&b->addrs, h->key);
                free(h);
        }
        return err;
}

/* What the interface holds, as if this process had added it and nobody
 * wanted it yet (a full sync trusts only the kernel: a predecessor's
 * addresses, or someone's deletions). */
static int addrs_read(struct userspace_mode *b, uint8_t family) {
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
                hmap_put(&b->addrs, h->key, h);
        }
        free(have);
        return 0;
}

/* Before a sync that plans every service: nothing is wanted yet. */
static void addrs_forget(struct userspace_mode *b, uint8_t family) {
        const char *k;
        void *v;

        svc_addrs_clear(b, family);
        for (size_t i = 0; hmap_next(&b->addrs, &i, &k, &v);) {
                struct held_addr *h = v;
                if (h->a.family == family)
                        h->refs = 0;
        }
}

/* --- the sync --- */

static int link_ready(struct userspace_mode *b) {
        int r = ifaddr_link_ensure(b->ia);
        if (r < 0)
                return log_error_errno(r, "Failed to set up interface " USERSPACE_LINK);
        b->link_ready = true;
        return 0;
}

static int us_sync(struct backend *base, uint8_t family, const struct backend_sync *s, struct backend_stats *ret) {
        struct userspace_mode *b = BACKEND_MODE(base, struct userspace_mode);
        struct userspace_plan pl;
        bool full = s->kind == BACKEND_SYNC_FULL;
        const char *k;
        void *v;
        int r, err = 0;

        *ret = (struct backend_stats) {0};
        if (b->retired)
                return 0;       /* the successor serves the node */
        if (!b->handover_started) {
                /* Only now, with the model complete: the predecessor
                 * serves until this sync adopts its sockets. */
                b->handover_started = true;
                userspace_handover_start(b);
        }
        if ((full || !b->link_ready) && (r = link_ready(b)) < 0) {
                ret->kernel_refused = true;
                return r;
        }
        if (full && (r = addrs_read(b, family)) < 0) {
                ret->kernel_refused = true;
                return r;
        }
        /* A partial sync plans only the changed services (a whole plan
         * is about a second of CPU at 20k services). */
        const struct hmap *only = s->kind == BACKEND_SYNC_PARTIAL && !s->all_changed ? s->changed : NULL;
        r = userspace_plan_build(s->model, s->params, only, &pl);
        if (r < 0)
                return r;
        b->gen++;
        /* Addresses first: a frontend binds to one. */
        if (only)
                for (size_t i = 0; hmap_next(only, &i, &k, NULL);)
                        svc_addrs_drop(b, family, k);
        else
                addrs_forget(b, family);
        r = addrs_take(b, family, &pl);
        if (r < 0)
                err = r;
        for (size_t i = 0; i < pl.n_fe; i++) {
                r = frontend_want(b, s->model, only, family, &pl.fe[i], s->kind != BACKEND_SYNC_PARTIAL);
                if (r < 0 && !err)
                        err = r;
        }
        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v);) {
                struct frontend *fe = v;
                if (fe->family == family && fe->gen != b->gen && (!only || hmap_get(only, fe->svc_key)))
                        frontend_retire(b, fe);
        }
        r = addrs_prune(b, family);
        if (r < 0 && !err)
                err = r;
        affinities_prune(b, false);
        if (b->out_of_fds) {
                struct rlimit rl = {0};
                getrlimit(RLIMIT_NOFILE, &rl);
                log_error("Failed to open %zu frontends: too many open files (the limit is %llu, and this process "
                          "may not raise it: a frontend takes one, a connection four); retried with each full "
                          "sync",
                          b->out_of_fds, (unsigned long long) rl.rlim_cur);
                b->out_of_fds = 0;
        }
        reap_draining(b);
        userspace_close_unadopted(b, family);
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
                b->nat_flush = ev_timer_add(b->env.loop, 0, userspace_on_nat_flush, b);
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
        const char *k;
        void *v;

        if (!b)
                return NULL;
        userspace_handover_close(b);
        b->nat_flush = ev_timer_cancel(b->env.loop, b->nat_flush);
        handover_socks_free(b->adopt, b->n_adopt);
        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v);)
                userspace_frontend_free(v);
        hmap_done(&b->frontends);
        while (b->draining) {
                struct frontend *fe = b->draining;
                b->draining = fe->next_draining;
                userspace_frontend_free(fe);
        }
        for (size_t i = 0; hmap_next(&b->addrs, &i, &k, &v);)
                free(v);
        hmap_done(&b->addrs);
        svc_addrs_clear(b, 4);
        svc_addrs_clear(b, 6);
        affinities_prune(b, true);
        hmap_done(&b->affinities);
        fwd_pipes_free(b->pipes);
        nolocal_free(b->nolocal[0]);
        nolocal_free(b->nolocal[1]);
        ifaddr_close(b->ia);
        free(b);
        return NULL;
}

static struct backend *us_destroy(struct backend *base) {
        if (base)
                us_free(BACKEND_MODE(base, struct userspace_mode));
        return NULL;
}

static int us_create(const struct backend_env *env, struct backend **ret) {
        struct userspace_mode *b = calloc(1, sizeof *b);
        const struct config_conntrack *ct = &env->config->conntrack;
        int r;

        if (!b)
                return -ENOMEM;
        b->env = *env;
        b->handover_fd = b->successor_fd = b->predecessor_fd = -1;
        b->frontends = (struct hmap) HMAP_INIT_KEY_ARRAY(struct frontend, key);
        b->addrs = (struct hmap) HMAP_INIT_KEY_ARRAY(struct held_addr, key);
        b->svc_addrs[0] = (struct hmap) HMAP_INIT_KEYED(struct svc_addrs, key);
        b->svc_addrs[1] = (struct hmap) HMAP_INIT_KEYED(struct svc_addrs, key);
        b->affinities = (struct hmap) HMAP_INIT_KEYED(struct svc_affinity, key);
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
        raise_fd_limit();
        userspace_handover_announce(b);
        b->base.ops = &backend_userspace;
        *ret = &b->base;
        return 0;
fail:
        us_free(b);
        return r;
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
        userspace_expose(BACKEND_MODE(base, struct userspace_mode), out);
}

static void us_describe(struct backend *base, struct buf *out) {
        userspace_describe(BACKEND_MODE(base, struct userspace_mode), out);
}

static size_t us_busy(struct backend *base) {
        return userspace_busy(BACKEND_MODE(base, struct userspace_mode));
}

static void us_quiesce(struct backend *base) {
        userspace_quiesce(BACKEND_MODE(base, struct userspace_mode));
}

const struct backend_ops backend_userspace = {
        .name = "userspace",
        .stopped = "new connections to services on this node are refused until kproxy runs again",
        .hands_over = true,
        /* kube-proxy0 and its addresses; service ports below 1024. */
        .caps = 1ULL << CAP_NET_ADMIN | 1ULL << CAP_NET_BIND_SERVICE,
        .setup = userspace_setup,
        .ipv6_usable = us_ipv6_usable,
        .create = us_create,
        .destroy = us_destroy,
        .sync = us_sync,
        .check = us_check,
        .leftovers = userspace_leftovers,
        .remove_leftovers = userspace_remove_leftovers,
        .cleanup = userspace_cleanup,
        .render = us_render,
        .expose = us_expose,
        .describe = us_describe,
        .busy = us_busy,
        .quiesce = us_quiesce,
};
