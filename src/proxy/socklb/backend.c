/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket load balancing (--socket-lb) as a backend beside the mode's: the
 * sync loop hands it every family's sync after the rules' (proxy/proxier.c),
 * and it writes the cluster IPs' translations into the maps of src/sockbpf.
 * What a service address translates to is what userspace mode would forward
 * it to as this node's clients see it (userspace/plan.h,
 * userspace_plan_build_local(): cluster IPs by the internal policy, node
 * ports on every node address, external and load-balancer IPs to the
 * cluster endpoints, terminating fallback, ClientIP affinity); a port with
 * no endpoint has no entry, so the rules reject it as before.
 */
#include "proxy/socklb/backend.h"

#include <linux/capability.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "config/config.h"
#include "host/host.h"
#include "proxy/backend.h"
#include "proxy/socklb/reaper.h"
#include "sockbpf/sockbpf.h"
#include "userspace/plan.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/alloc.h"
#include "util/hmap.h"
#include "util/log.h"

#define DEFAULT_PIN_DIR "/sys/fs/bpf/kproxy"

/* What one service wrote into the maps for a family: to delete what it no
 * longer has. */
struct written {
        char *svc_key;                  /* owned; the map's key */
        struct {
                int proto;
                struct sockbpf_addr a;
        } *fe;
        size_t n_fe;
        uint64_t gen;                   /* the sync that last wrote it */
};

struct socklb_mode {
        struct backend base;          /* the core's handle: BACKEND_MODE() */
        struct backend_env env;
        struct sockbpf *bpf;
        struct hmap written[2];         /* IPv4, IPv6: svc_key -> struct written */
        uint64_t gen;
        uint64_t updates, update_errors;
        double update_seconds;
        struct socklb_reaper *reaper;   /* connected UDP sockets of endpoints that left; NULL: no loop */
        bool udp_changed;               /* this sync wrote or deleted a UDP entry */
};

static size_t fam_index(uint8_t family) {
        return family == 6;
}

static struct written *written_free(struct written *w) {
        if (w) {
                free(w->svc_key);
                free(w->fe);
                free(w);
        }
        return NULL;
}

static const char *pin_dir(const struct kproxy_config *c) {
        return c->socket_lb_pin_dir ? c->socket_lb_pin_dir : DEFAULT_PIN_DIR;
}

/* The first cgroup v2 mount: the unified hierarchy's root. */
static int cgroup2_root(char *buf, size_t size) {
        FILE *f = fopen("/proc/self/mounts", "re");
        char dev[256], dir[4096], type[64];
        int r = -ENOENT;

        if (!f)
                return -errno;
        while (r < 0 && fscanf(f, "%255s %4095s %63s %*[^\n]", dev, dir, type) == 3)
                if (strcmp(type, "cgroup2") == 0) {
                        snprintf(buf, size, "%s", dir);
                        r = 0;
                }
        fclose(f);
        return r;
}

static struct socklb_mode *socklb_free(struct socklb_mode *b) {
        const char *k;
        void *v;

        if (!b)
                return NULL;
        for (size_t f = 0; f < 2; f++) {
                for (size_t i = 0; hmap_next(&b->written[f], &i, &k, &v);)
                        written_free(v);
                hmap_done(&b->written[f]);
        }
        b->reaper = socklb_reaper_free(b->reaper);
        sockbpf_close(b->bpf);  /* what is pinned stays: translation goes on */
        free(b);
        return NULL;
}

static struct backend *socklb_destroy(struct backend *base) {
        if (base)
                socklb_free(BACKEND_MODE(base, struct socklb_mode));
        return NULL;
}

static int socklb_create(const struct backend_env *env, struct backend **ret) {
        const struct kproxy_config *c = env->config;
        char root[4096];
        const char *cgroup = c->socket_lb_cgroup;
        struct socklb_mode *b;
        int r;

        if (!cgroup) {
                r = cgroup2_root(root, sizeof root);
                if (r < 0)
                        return log_error_errno(r, "Failed to find the cgroup v2 mount for --socket-lb");
                cgroup = root;
        }
        if (mkdir(pin_dir(c), 0700) < 0 && errno != EEXIST)
                return log_error_errno(-errno, "Failed to create --socket-lb-pin-dir %s", pin_dir(c));
        b = xcalloc(1, sizeof *b);
        b->env = *env;
        for (size_t i = 0; i < 2; i++)
                b->written[i] = (struct hmap) HMAP_INIT_KEYED(struct written, svc_key);
        r = sockbpf_open(pin_dir(c), &b->bpf);
        if (r >= 0)
                r = sockbpf_attach(b->bpf, cgroup);
        if (r < 0) {
                sockbpf_close(b->bpf);
                free(b);
                return r;
        }
        if (env->loop && (r = socklb_reaper_new(env->loop, b->bpf, cgroup, &b->reaper)) < 0) {
                sockbpf_close(b->bpf);
                free(b);
                return r;
        }
        log_info("Socket load balancing on: cgroup %s, maps and links pinned in %s", cgroup, pin_dir(c));
        b->base.ops = &backend_socklb;
        *ret = &b->base;
        return 0;
}


/* One map entry: a frontend of the plan at one address (a node port on
 * every node address is one entry per address). */
struct entry {
        const struct userspace_frontend *fe;
        struct sockbpf_addr a;
};

static int cmp_by_service(const void *x, const void *y) {
        const struct entry *a = x, *b = y;
        return strcmp(a->fe->svc_key, b->fe->svc_key);
}

static bool same_frontend(int proto, const struct sockbpf_addr *a, int proto2, const struct sockbpf_addr *b) {
        return proto == proto2 && a->port == b->port && inet_addr_equal(&a->ip, &b->ip);
}

static bool expanded(const struct entry *e) {
        return inet_addr_is_unspecified(&e->fe->addr.ip);
}

/* By map key; of two with one key, an address of the service's own (an
 * external IP) before a node port's expansion, as the rules match it
 * first; then by service, as the plan orders two claims. */
static int cmp_by_key(const void *x, const void *y) {
        const struct entry *a = x, *b = y;
        int c = a->fe->proto - b->fe->proto;
        if (!c)
                c = (int) a->a.ip.family - (int) b->a.ip.family;
        if (!c)
                c = memcmp(a->a.ip.bytes, b->a.ip.bytes, a->a.ip.family == 4 ? 4 : 16);
        if (!c)
                c = (int) a->a.port - (int) b->a.port;
        if (!c)
                c = (int) expanded(a) - (int) expanded(b);
        return c ? c : strcmp(a->fe->svc_key, b->fe->svc_key);
}

static void to_sockbpf(const struct fwd_addr *a, struct sockbpf_addr *ret) {
        ret->ip = a->ip;
        ret->port = a->port;
}

static int set_entry(struct socklb_mode *b, const struct entry *e) {
        const struct userspace_frontend *fe = e->fe;
        _cleanup_free_ struct sockbpf_addr *eps = xcalloc(fe->n_eps, sizeof *eps);

        for (size_t i = 0; i < fe->n_eps; i++)
                to_sockbpf(&fe->eps[i], &eps[i]);
        b->udp_changed |= fe->proto == IPPROTO_UDP;
        return sockbpf_set_service(b->bpf, fe->proto, &e->a, eps, fe->n_eps, fe->affinity_timeout);
}

/* The entries of the plan's frontends of family, grouped by service: a
 * wildcard (node ports on every address) becomes one per address of the
 * node, but loopback ones (a pod's loopback is its own); one per key. */
static void plan_entries(const struct userspace_plan *pl, uint8_t family, const struct host_facts *h,
                         struct entry **ret, size_t *ret_n) {
        size_t n_host = 0, n = 0;
        for (size_t i = 0; h && i < h->n_addrs; i++)
                n_host += h->addrs[i].addr.family == family && !inet_addr_is_loopback(&h->addrs[i].addr);
        size_t cap = 1;
        for (size_t i = 0; i < pl->n_fe; i++)
                cap += inet_addr_is_unspecified(&pl->fe[i].addr.ip) ? n_host : 1;
        struct entry *v = xcalloc(cap, sizeof *v);
        for (size_t i = 0; i < pl->n_fe; i++) {
                const struct userspace_frontend *fe = &pl->fe[i];
                if (fe->addr.ip.family != family)
                        continue;
                if (!inet_addr_is_unspecified(&fe->addr.ip)) {
                        v[n] = (struct entry) {fe, {fe->addr.ip, fe->addr.port}};
                        n++;
                        continue;
                }
                for (size_t j = 0; h && j < h->n_addrs; j++) {
                        const struct inet_addr *a = &h->addrs[j].addr;
                        if (a->family == family && !inet_addr_is_loopback(a))
                                v[n++] = (struct entry) {fe, {*a, fe->addr.port}};
                }
        }
        /* One entry per key: a second one in a batch would take a new id
         * and leave the first one's slots behind. */
        qsort(v, n, sizeof *v, cmp_by_key);
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                if (k == 0 || !same_frontend(v[k - 1].fe->proto, &v[k - 1].a, v[i].fe->proto, &v[i].a))
                        v[k++] = v[i];
        n = k;
        qsort(v, n, sizeof *v, cmp_by_service);
        *ret = v;
        *ret_n = n;
}

/* Records what svc_key now has in the family (e, n of them: its entries,
 * already written into the maps) and deletes from the maps what it had
 * before and has no more. */
static int written_update(struct socklb_mode *b, uint8_t family, const char *svc_key, const struct entry *e, size_t n) {
        struct hmap *m = &b->written[fam_index(family)];
        struct written *old = hmap_remove(m, svc_key), *w = NULL;
        int err = 0;

        if (n > 0) {
                w = xcalloc(1, sizeof *w);
                w->svc_key = xstrdup(svc_key);
                w->fe = xcalloc(n, sizeof *w->fe);
                for (size_t i = 0; i < n; i++) {
                        w->fe[i].proto = e[i].fe->proto;
                        w->fe[i].a = e[i].a;
                }
                w->n_fe = n;
                w->gen = b->gen;
                hmap_put(m, w->svc_key, w);
        }
        for (size_t i = 0; old && i < old->n_fe; i++) {
                bool kept = false;
                for (size_t j = 0; w && j < w->n_fe && !kept; j++)
                        kept = same_frontend(w->fe[j].proto, &w->fe[j].a, old->fe[i].proto, &old->fe[i].a);
                if (!kept) {
                        b->udp_changed |= old->fe[i].proto == IPPROTO_UDP;
                        int r = sockbpf_set_service(b->bpf, old->fe[i].proto, &old->fe[i].a, NULL, 0, 0);
                        if (r < 0 && !err)
                                err = r;
                }
        }
        written_free(old);
        return err;
}

/* A frontend as a string key: "6 10.96.0.10 80" (protocol, address, port). */
#define FE_KEY_LEN (4 + INET_ADDR_STRLEN + 8)
static void fe_key(char *buf, int proto, const struct sockbpf_addr *a) {
        char ip[INET_ADDR_STRLEN];
        snprintf(buf, FE_KEY_LEN, "%d %s %u", proto, inet_addr_format(&a->ip, ip), a->port);
}

struct prune {
        struct socklb_mode *b;
        uint8_t family;
        struct hmap keep;               /* fe_key() strings of what the services wrote */
        int err;
};

/* A full sync: an entry of the family in the maps that no service wrote
 * (a previous run's, for a service deleted while kproxy was stopped). */
static void prune_one(struct sockbpf *s, int proto, const struct sockbpf_addr *a, void *ctx) {
        struct prune *p = ctx;
        char key[FE_KEY_LEN];

        if (a->ip.family != p->family)
                return;
        fe_key(key, proto, a);
        if (hmap_get(&p->keep, key))
                return;
        p->b->udp_changed |= proto == IPPROTO_UDP;
        int r = sockbpf_set_service(s, proto, a, NULL, 0, 0);
        if (r < 0 && !p->err)
                p->err = r;
}

static int prune(struct socklb_mode *b, uint8_t family) {
        struct hmap *m = &b->written[fam_index(family)];
        struct prune p = {b, family, HMAP_INIT_STRINGS, 0};
        size_t total = 0, at = 0;
        const char *k;
        void *v;
        int r;

        for (size_t i = 0; hmap_next(m, &i, &k, &v);)
                total += ((struct written *) v)->n_fe;
        char *keys = xcalloc(total + 1, FE_KEY_LEN);
        for (size_t i = 0; hmap_next(m, &i, &k, &v);) {
                const struct written *w = v;
                for (size_t j = 0; j < w->n_fe; j++, at++) {
                        fe_key(keys + at * FE_KEY_LEN, w->fe[j].proto, &w->fe[j].a);
                        hmap_put(&p.keep, keys + at * FE_KEY_LEN, keys + at * FE_KEY_LEN);
                }
        }
        r = sockbpf_each_service(b->bpf, prune_one, &p);
        hmap_done(&p.keep);
        free(keys);
        return r < 0 ? r : p.err;
}

static int socklb_sync(struct backend *base, uint8_t family, const struct backend_sync *s, struct backend_stats *ret) {
        struct socklb_mode *b = BACKEND_MODE(base, struct socklb_mode);
        const struct hmap *only = s->kind == BACKEND_SYNC_PARTIAL && !s->all_changed ? s->changed : NULL;
        struct hmap *m = &b->written[fam_index(family)];
        struct entry *e = NULL;
        struct userspace_plan pl;
        double t0, took;
        size_t n = 0;
        const char *k;
        void *v;
        int r, err = 0;

        *ret = (struct backend_stats) {0};
        t0 = clock_mono_s();
        r = userspace_plan_build_local(s->model, s->params, only, &pl);
        if (r < 0)
                return r;
        b->gen++;
        /* The entries, grouped by service; written into the maps in
         * batches (slots, then counts: sockbpf.h). */
        plan_entries(&pl, family, b->env.host, &e, &n);
        sockbpf_batch_begin(b->bpf);
        for (size_t i = 0; i < n; i++)
                if ((r = set_entry(b, &e[i])) < 0 && !err)
                        err = r;
        if ((r = sockbpf_batch_end(b->bpf)) < 0 && !err)
                err = r;
        for (size_t i = 0, j; i < n; i = j) {
                for (j = i + 1; j < n && strcmp(e[j].fe->svc_key, e[i].fe->svc_key) == 0; j++)
                        ;
                if ((r = written_update(b, family, e[i].fe->svc_key, e + i, j - i)) < 0 && !err)
                        err = r;
        }
        /* Then what the services this sync looked at had and have no more:
         * the changed ones, or every one. */
        if (only) {
                for (size_t i = 0; hmap_next(only, &i, &k, NULL);) {
                        const struct written *w = hmap_get(m, k);
                        if (w && w->gen != b->gen && (r = written_update(b, family, k, NULL, 0)) < 0 && !err)
                                err = r;
                }
        } else {
                /* The services not in the plan any more: their keys first
                 * (written_update() frees the entry whose key it is given). */
                char **gone = xcalloc(m->len + 1, sizeof *gone);
                size_t n_gone = 0;
                for (size_t i = 0; hmap_next(m, &i, &k, &v);)
                        if (((struct written *) v)->gen != b->gen)
                                gone[n_gone++] = xstrdup(k);
                for (size_t i = 0; i < n_gone; i++) {
                        if ((r = written_update(b, family, gone[i], NULL, 0)) < 0 && !err)
                                err = r;
                        free(gone[i]);
                }
                free(gone);
        }
        if (s->kind == BACKEND_SYNC_FULL && (r = prune(b, family)) < 0 && !err)
                err = r;
        took = clock_mono_s() - t0;
        b->updates++;
        b->update_seconds += took;
        if (s->kind == BACKEND_SYNC_FULL)
                log_v(2, "Socket load balancing maps (IPv%u): %zu services written (%zu frontends planned) in %.1f ms", family,
                      m->len, pl.n_fe, took * 1e3);
        free(e);
        userspace_plan_done(&pl);
        if (b->udp_changed)
                socklb_reaper_kick(b->reaper);
        b->udp_changed = false;
        if (err < 0) {
                b->update_errors++;
                ret->kernel_refused = true;
                return log_error_errno(err, "Failed to update the socket load-balancing maps (IPv%u)", family);
        }
        return 0;
}

static void socklb_expose(struct backend *base, struct buf *out) {
        struct socklb_mode *b = BACKEND_MODE(base, struct socklb_mode);
        struct sockbpf_stats st;

        if (sockbpf_stats(b->bpf, &st) < 0)
                return;
        buf_printf(out,
                   "# HELP kproxy_socket_lb_services Service ports socket load balancing translates.\n"
                   "# TYPE kproxy_socket_lb_services gauge\n"
                   "kproxy_socket_lb_services %zu\n"
                   "# HELP kproxy_socket_lb_backends Endpoint slots in the socket load-balancing maps.\n"
                   "# TYPE kproxy_socket_lb_backends gauge\n"
                   "kproxy_socket_lb_backends %zu\n"
                   "# HELP kproxy_socket_lb_translations_total Connects and sends translated to an endpoint.\n"
                   "# TYPE kproxy_socket_lb_translations_total counter\n"
                   "kproxy_socket_lb_translations_total %llu\n"
                   "# HELP kproxy_socket_lb_updates_total Syncs of the socket load-balancing maps.\n"
                   "# TYPE kproxy_socket_lb_updates_total counter\n"
                   "kproxy_socket_lb_updates_total %llu\n"
                   "# HELP kproxy_socket_lb_update_errors_total Syncs of the maps that failed.\n"
                   "# TYPE kproxy_socket_lb_update_errors_total counter\n"
                   "kproxy_socket_lb_update_errors_total %llu\n"
                   "# HELP kproxy_socket_lb_update_seconds_total Time spent syncing the maps.\n"
                   "# TYPE kproxy_socket_lb_update_seconds_total counter\n"
                   "kproxy_socket_lb_update_seconds_total %.6f\n"
                   "# HELP kproxy_socket_lb_udp_sockets_closed_total Connected UDP sockets closed because their "
                   "endpoint left the service.\n"
                   "# TYPE kproxy_socket_lb_udp_sockets_closed_total counter\n"
                   "kproxy_socket_lb_udp_sockets_closed_total %llu\n",
                   st.services, st.slots, (unsigned long long) st.translations, (unsigned long long) b->updates,
                   (unsigned long long) b->update_errors, b->update_seconds,
                   (unsigned long long) socklb_reaper_closed(b->reaper));
}

static int socklb_cleanup(const struct kproxy_config *c, const struct host_facts *h) {
        (void) h;
        return sockbpf_unpin(pin_dir(c));
}

/* `kproxy render --socket-lb`: what the maps hold for a state, one line per
 * translated service address, as userspace mode's plan prints its
 * frontends (a node port on 0.0.0.0 is one entry per node address):
 *   tcp 10.96.0.10:80 default/web:http internal -> 10.244.1.5:8080 10.244.2.7:8080
 *   tcp 0.0.0.0:30080 default/web:http external -> 10.244.1.5:8080 10.244.2.7:8080 */
static int socklb_render(const struct model *m, const struct render_params *p, const struct inet_cidr *service_cidrs,
                         size_t n_service_cidrs, bool netlink, struct buf *out) {
        struct userspace_plan pl;
        (void) service_cidrs, (void) n_service_cidrs, (void) netlink;

        int r = userspace_plan_build_local(m, p, NULL, &pl);
        if (r < 0)
                return r;
        for (size_t i = 0; i < pl.n_fe; i++) {
                userspace_frontend_format(&pl.fe[i], out);
                buf_putc(out, '\n');
        }
        userspace_plan_done(&pl);
        return 0;
}

const struct backend_ops backend_socklb = {
        .name = "socket-lb",
        /* Loading the programs and maps (the verifier refuses these
         * programs without CAP_PERFMON); attaching them to a cgroup. */
        .caps = 1ULL << CAP_BPF | 1ULL << CAP_PERFMON | 1ULL << CAP_NET_ADMIN,
        .create = socklb_create,
        .destroy = socklb_destroy,
        .sync = socklb_sync,
        .cleanup = socklb_cleanup,
        .render = socklb_render,
        .expose = socklb_expose,
};
