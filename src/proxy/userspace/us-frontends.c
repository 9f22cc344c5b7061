/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The frontends (us-frontends.h). A TCP frontend that goes away stops
 * accepting at once and keeps its open connections until they end (as
 * conntrack keeps an established flow); a UDP one ends its sessions at
 * once (a flow to a service without endpoints must be refused, not
 * carried on).
 */
#include "proxy/userspace/us-frontends.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ev/ev.h"
#include "model/model.h"
#include "userspace/fwd-filter.h"
#include "userspace/handover.h"
#include "userspace/pick.h"
#include "userspace/plan.h"
#include "userspace/synrecv.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/log.h"

/* The ClientIP affinity of one service port, shared by its frontends (as
 * the rules' recent lists are the endpoints', whichever way the client came). */
struct us_affinity {
        char *key;                      /* "ns/name:port" */
        struct affinity *aff;           /* the map's reference */
};

void us_frontends_init(struct us_frontends *f, struct ev_loop *loop, struct fwd_pipes *pipes, uint64_t tcp_idle_ms,
                       uint64_t udp_idle_ms) {
        *f = (struct us_frontends) {
                .loop = loop,
                .pipes = pipes,
                .tcp_idle_ms = tcp_idle_ms,
                .udp_idle_ms = udp_idle_ms,
                .by_key = HMAP_INIT_KEY_ARRAY(struct us_frontend, key),
                .affinities = HMAP_INIT_KEYED(struct us_affinity, key),
        };
}

/* --- counters --- */

static void add_tcp(struct fwd_tcp_stats *t, const struct fwd_tcp_stats *s) {
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

static void add_udp(struct fwd_udp_stats *t, const struct fwd_udp_stats *s) {
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

void us_frontends_totals(const struct us_frontends *f, struct fwd_tcp_stats *tcp, struct fwd_udp_stats *udp,
                         size_t *n_fe) {
        const char *k;
        void *v;

        *tcp = f->gone_tcp;
        *udp = f->gone_udp;
        *n_fe = 0;
        for (size_t i = 0; hmap_next(&f->by_key, &i, &k, &v);) {
                struct us_frontend *fe = v;
                struct fwd_tcp_stats ts;
                struct fwd_udp_stats us;
                if (fe->tcp) {
                        fwd_tcp_get_stats(fe->tcp, &ts);
                        add_tcp(tcp, &ts);
                        ++*n_fe;
                }
                if (fe->udp) {
                        fwd_udp_get_stats(fe->udp, &us);
                        add_udp(udp, &us);
                        ++*n_fe;
                }
        }
        for (const struct us_frontend *fe = f->draining; fe; fe = fe->next_draining) {
                struct fwd_tcp_stats ts;
                fwd_tcp_get_stats(fe->tcp, &ts);
                add_tcp(tcp, &ts);
        }
}

size_t us_frontends_udp_awaiting(const struct us_frontends *f, uint64_t since) {
        const char *k;
        void *v;
        size_t n = 0;

        for (size_t i = 0; hmap_next(&f->by_key, &i, &k, &v);) {
                const struct us_frontend *fe = v;
                if (fe->udp)
                        n += fwd_udp_awaiting(fe->udp, since);
        }
        return n;
}

/* --- picking --- */

static uint64_t now_ms(struct ev_loop *l) {
        ev_now_update(l);
        return ev_now_ms(l);
}

static int pick_tcp(void *userdata, const struct fwd_addr *client, const struct fwd_addr *failed,
                    struct fwd_addr *ret) {
        struct us_frontend *fe = userdata;
        return picker_pick(fe->picker, &client->ip, failed, now_ms(fe->set->loop), ret);
}

static int pick_udp(void *userdata, const struct fwd_addr *client, struct fwd_addr *ret) {
        struct us_frontend *fe = userdata;
        return picker_pick(fe->picker, &client->ip, NULL, now_ms(fe->set->loop), ret);
}

/* --- one frontend --- */

/* Closes fe's UDP forwarder and its sessions, keeping its counts. */
static void udp_close(struct us_frontend *fe) {
        struct fwd_udp_stats st;

        if (!fe->udp)
                return;
        fwd_udp_get_stats(fe->udp, &st);
        st.active = 0;
        add_udp(&fe->set->gone_udp, &st);
        fe->udp = fwd_udp_free(fe->udp);
}

/* Closes the frontend's socket and connections, keeping their counts. */
static void frontend_close(struct us_frontend *fe) {
        if (fe->tcp) {
                struct fwd_tcp_stats st;
                fwd_tcp_get_stats(fe->tcp, &st);
                st.active = 0;
                add_tcp(&fe->set->gone_tcp, &st);
                fe->tcp = fwd_tcp_free(fe->tcp);
        }
        udp_close(fe);
}

static void frontend_free(struct us_frontend *fe) {
        frontend_close(fe);
        picker_free(fe->picker);
        buf_done(&fe->line);
        free(fe->sources);
        free(fe->svc_key);
        free(fe);
}

/* No longer wanted: removed from the map. A TCP one takes what is queued
 * on its listener (closing would reset it) and closes it; with open
 * connections then, it drains. Anything else goes now. */
static void frontend_retire(struct us_frontends *f, struct us_frontend *fe) {
        struct fwd_tcp_stats st = {0};

        hmap_remove(&f->by_key, fe->key);
        if (fe->tcp) {
                fwd_tcp_close_listener(fe->tcp);
                fwd_tcp_get_stats(fe->tcp, &st);
        }
        if (st.active == 0) {
                frontend_free(fe);
                return;
        }
        fe->next_draining = f->draining;
        f->draining = fe;
}

/* Gives the frontend's socket the filter of its sources. A filter that
 * cannot be set closes the socket: a load-balancer IP whose sources are
 * limited is served to none rather than to all. Returns 0 or -errno
 * (logged). */
static int frontend_filter(struct us_frontend *fe) {
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

/* The socket a predecessor handed over for want, taken out of the list;
 * -1 if there is none. */
static int adoptable(struct us_frontends *f, const struct userspace_frontend *want) {
        for (size_t i = 0; i < f->n_adopt; i++) {
                struct handover_sock *s = &f->adopt[i];
                if (s->fd >= 0 && s->proto == want->proto && fwd_addr_equal(&s->addr, &want->addr)) {
                        int fd = s->fd;
                        s->fd = -1;
                        return fd;
                }
        }
        return -1;
}

/* Binds the frontend's socket. Returns 0 or -errno (logged once per
 * failure streak). */
static int frontend_open(struct us_frontends *f, struct us_frontend *fe, const struct userspace_frontend *want) {
        int fd = adoptable(f, want);
        int r;

        if (fe->proto == IPPROTO_TCP) {
                const struct fwd_tcp_params tp = {
                        .idle_timeout_ms = f->tcp_idle_ms,
                        .connect_timeout_ms = US_CONNECT_TIMEOUT_MS,
                        .pipes = f->pipes,
                };
                r = fd >= 0 ? fwd_tcp_adopt(f->loop, fd, &tp, pick_tcp, fe, &fe->tcp)
                            : fwd_tcp_new(f->loop, &want->addr, &tp, pick_tcp, fe, &fe->tcp);
        } else {
                const struct fwd_udp_params up = {.idle_timeout_ms = f->udp_idle_ms};
                r = fd >= 0 ? fwd_udp_adopt(f->loop, fd, &up, pick_udp, fe, &fe->udp)
                            : fwd_udp_new(f->loop, &want->addr, &up, pick_udp, fe, &fe->udp);
        }
        if (fd >= 0 && r < 0)
                close(fd);      /* not what it claimed to be */
        if (r == -EMFILE || r == -ENFILE)
                f->out_of_fds++;        /* one line for all of them, after the sync */
        else if (r < 0 && !fe->failed)
                log_error_errno(r, "Failed to open %s for service %s (retried with each full sync)", fe->key,
                                want->svc_key);
        fe->failed = r < 0;
        return r < 0 ? r : frontend_filter(fe);
}

/* The clients' table of want's service port (made on first use). */
static struct affinity *svc_affinity(struct us_frontends *f, const struct userspace_frontend *want) {
        char key[512];
        struct us_affinity *sa;

        snprintf(key, sizeof key, "%s:%s", want->svc_key, want->port_name);
        sa = hmap_get(&f->affinities, key);
        if (sa)
                return sa->aff;
        sa = xcalloc(1, sizeof *sa);
        sa->key = xstrdup(key);
        sa->aff = affinity_new();
        hmap_put(&f->affinities, sa->key, sa);
        return sa->aff;
}

/* Tables no frontend uses any more go (all of them: unshared false never
 * frees a table a picker still holds). */
static void affinities_prune(struct us_frontends *f, bool all) {
        const char *k;
        void *v;

        for (size_t i = 0; hmap_next(&f->affinities, &i, &k, &v);) {
                struct us_affinity *sa = v;
                if (!all && !affinity_unshared(sa->aff))
                        continue;
                hmap_remove(&f->affinities, sa->key);
                affinity_unref(sa->aff);
                free(sa->key);
                free(sa);
        }
}

/* Gives fe want's endpoints; UDP sessions to an endpoint that left end
 * now, so their next datagram picks again (the stale-UDP lesson). */
static int frontend_update(struct us_frontend *fe, const struct userspace_frontend *want) {
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
                struct inet_cidr *v = want->n_sources ? xmalloc(want->n_sources * sizeof *v) : NULL;
                if (v)
                        memcpy(v, want->sources, want->n_sources * sizeof *v);
                free(fe->sources);
                fe->sources = v;
                fe->n_sources = want->n_sources;
                (void) frontend_filter(fe);     /* logged; on failure it serves nobody */
        }
        buf_clear(&fe->line);
        userspace_frontend_format(want, &fe->line);
        struct affinity *shared = want->affinity_timeout ? svc_affinity(fe->set, want) : NULL;
        return picker_set(fe->picker, want->eps, want->n_eps, want->affinity_timeout, shared);
}

/* --- the set --- */

void us_frontends_begin(struct us_frontends *f) {
        f->gen++;
}

int us_frontends_want(struct us_frontends *f, const struct model *model, const struct hmap *only, uint8_t family,
                      const struct userspace_frontend *want, bool retry) {
        struct us_frontend *fe = hmap_get(&f->by_key, want->key);
        int r;

        if (fe && strcmp(fe->svc_key, want->svc_key) != 0) {
                /* Two services claim one address and port (external IPs
                 * are the users'): the first in key order keeps it, as the
                 * plan decides among the services it plans. A partial sync
                 * of the later one leaves the earlier one's alone. */
                if (only && !hmap_get(only, fe->svc_key) && strcmp(fe->svc_key, want->svc_key) < 0 &&
                    model_service_get(model, fe->svc_key))
                        return 0;
                free(fe->svc_key);
                fe->svc_key = xstrdup(want->svc_key);
        }
        if (!fe) {
                fe = xcalloc(1, sizeof *fe);
                fe->picker = picker_new();
                fe->svc_key = xstrdup(want->svc_key);
                memcpy(fe->key, want->key, sizeof fe->key);
                fe->addr = want->addr;
                fe->set = f;
                fe->family = family;
                fe->proto = want->proto;
                fe->line = (struct buf) BUF_INIT;
                hmap_put(&f->by_key, fe->key, fe);
                retry = true;
        }
        fe->gen = f->gen;
        r = frontend_update(fe, want);
        if (r < 0)
                return r;
        if (!fe->tcp && !fe->udp && retry)
                (void) frontend_open(f, fe, want);      /* logged; the rest of the node goes on */
        return 0;
}

void us_frontends_reap(struct us_frontends *f) {
        struct us_frontend **pp = &f->draining;

        while (*pp) {
                struct us_frontend *fe = *pp;
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

void us_frontends_end(struct us_frontends *f, uint8_t family, const struct hmap *only) {
        const char *k;
        void *v;

        for (size_t i = 0; hmap_next(&f->by_key, &i, &k, &v);) {
                struct us_frontend *fe = v;
                if (fe->family == family && fe->gen != f->gen && (!only || hmap_get(only, fe->svc_key)))
                        frontend_retire(f, fe);
        }
        affinities_prune(f, false);
        if (f->out_of_fds) {
                struct rlimit rl = {0};
                getrlimit(RLIMIT_NOFILE, &rl);
                log_error("Failed to open %zu frontends: too many open files (the limit is %llu, and this process "
                          "may not raise it: a frontend takes one, a connection four); retried with each full "
                          "sync",
                          f->out_of_fds, (unsigned long long) rl.rlim_cur);
                f->out_of_fds = 0;
        }
        us_frontends_reap(f);
}

void us_frontends_done(struct us_frontends *f) {
        const char *k;
        void *v;

        handover_socks_free(f->adopt, f->n_adopt);
        f->adopt = NULL;
        f->n_adopt = 0;
        for (size_t i = 0; hmap_next(&f->by_key, &i, &k, &v);)
                frontend_free(v);
        hmap_done(&f->by_key);
        while (f->draining) {
                struct us_frontend *fe = f->draining;
                f->draining = fe->next_draining;
                frontend_free(fe);
        }
        affinities_prune(f, true);
        hmap_done(&f->affinities);
}

/* --- hand-over and stop --- */

void us_frontends_adopt(struct us_frontends *f, struct handover_sock *socks, size_t n) {
        handover_socks_free(f->adopt, f->n_adopt);
        f->adopt = socks;
        f->n_adopt = n;
}

void us_frontends_close_unadopted(struct us_frontends *f, uint8_t family) {
        size_t k = 0;

        for (size_t i = 0; i < f->n_adopt; i++) {
                struct handover_sock *s = &f->adopt[i];
                if (s->fd >= 0 && s->addr.ip.family == family) {
                        close(s->fd);
                        s->fd = -1;
                }
                if (s->fd >= 0)
                        f->adopt[k++] = *s;
        }
        f->n_adopt = k;
        if (k == 0) {
                free(f->adopt);
                f->adopt = NULL;
        }
}

size_t us_frontends_sockets(const struct us_frontends *f, int *fds, size_t cap) {
        size_t n = 0;
        const char *k;
        void *v;

        for (size_t i = 0; hmap_next(&f->by_key, &i, &k, &v) && n < cap;) {
                const struct us_frontend *fe = v;
                int s = fe->tcp ? fwd_tcp_listener(fe->tcp) : fe->udp ? fwd_udp_socket(fe->udp) : -1;
                if (s >= 0)
                        fds[n++] = s;
        }
        return n;
}

void us_frontends_stop_reading(struct us_frontends *f) {
        const char *k;
        void *v;

        for (size_t i = 0; hmap_next(&f->by_key, &i, &k, &v);) {
                struct us_frontend *fe = v;
                if (fe->tcp)
                        fwd_tcp_stop_accepting(fe->tcp);
                if (fe->udp)
                        fwd_udp_stop_reading(fe->udp);
        }
}

void us_frontends_stop(struct us_frontends *f) {
        const char *k;
        void *v;

        f->stopping = true;
        for (size_t i = 0; hmap_next(&f->by_key, &i, &k, &v);) {
                struct us_frontend *fe = v;
                if (fe->tcp && fwd_tcp_listener(fe->tcp) >= 0) {
                        int r = fwd_tcp_refuse_syns(fe->tcp);
                        if (r < 0) {
                                log_warning_errno(r, "Failed to stop SYNs to %s: closing it now", fe->key);
                                fwd_tcp_close_listener(fe->tcp);
                        } else {
                                f->listening++;
                        }
                }
                udp_close(fe);
        }
        us_frontends_settle(f);
}

void us_frontends_settle(struct us_frontends *f) {
        _cleanup_(synrecv_freep) struct synrecv *s = NULL;
        size_t open = 0;
        const char *k;
        void *v;

        if (!f->stopping || !f->listening)
                return;
        int r = synrecv_dump(&s);
        if (r < 0)
                log_warning_errno(r, "Failed to list the TCP handshakes under way, closing the listeners now");
        for (size_t i = 0; hmap_next(&f->by_key, &i, &k, &v);) {
                struct us_frontend *fe = v;
                struct fwd_addr local;
                if (!fe->tcp || fwd_tcp_listener(fe->tcp) < 0)
                        continue;
                fwd_tcp_local(fe->tcp, &local);
                if (s && synrecv_has(s, &local)) {
                        open++;
                        continue;
                }
                fwd_tcp_close_listener(fe->tcp);
        }
        f->listening = open;
}
