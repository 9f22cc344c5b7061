/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A fake of socket load balancing's kernel side (sockbpf/sockbpf.h) and of
 * the UDP socket sweep (sockbpf/udpreap.h), for the tests of
 * proxy/socklb/: included by one test program, whose object then defines
 * those functions and the linker takes them instead of the library's.
 *
 * The maps are a table of services (protocol, address) -> endpoints that
 * lives across sockbpf_open()s, as pinned maps do; writes between
 * batch_begin() and batch_end() are held and applied at the end, where a
 * failure can be injected. The sweep visits a list of connected UDP
 * sockets (cookie, peer), asks stale() of each and counts those closed; it
 * can be held until the test lets it go, or answer -EPERM.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sockbpf/sockbpf.h"
#include "sockbpf/udpreap.h"

#define FAKE_MAX_SERVICES 64
#define FAKE_MAX_EPS 8
#define FAKE_MAX_SOCKETS 8

struct fake_service {
        int proto;
        struct sockbpf_addr a;
        struct sockbpf_addr eps[FAKE_MAX_EPS];
        size_t n_eps;
        uint32_t affinity;
};

struct fake_socket {
        uint64_t cookie;
        struct sockbpf_addr peer;
        bool closed;
};

static struct {
        struct fake_service svc[FAKE_MAX_SERVICES];
        size_t n_svc;
        bool in_batch;
        size_t writes;                  /* set_service() calls, all time */
        int fail_batch_end;             /* -errno for the next batch_end(), once */
        char attached[256], unpinned[256];
        size_t open_handles;
        /* the sweep */
        struct fake_socket sockets[FAKE_MAX_SOCKETS];
        size_t n_sockets;
        int sweep_result;               /* what udpreap_run() returns */
        size_t sweeps;
        bool hold;                      /* a sweep waits for fake_release() */
        bool sweeping;
        pthread_mutex_t mu;
        pthread_cond_t cond;
} fake = {.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

struct sockbpf {
        int unused;
};

static bool fake_same(int proto, const struct sockbpf_addr *a, const struct fake_service *s) {
        return s->proto == proto && s->a.port == a->port && inet_addr_equal(&s->a.ip, &a->ip);
}

/* The service at "proto ip port", or NULL. */
static inline const struct fake_service *fake_find(int proto, const char *ip, uint16_t port) {
        struct sockbpf_addr a = {.port = port};
        if (inet_addr_parse(ip, &a.ip) < 0)
                return NULL;
        for (size_t i = 0; i < fake.n_svc; i++)
                if (fake_same(proto, &a, &fake.svc[i]))
                        return &fake.svc[i];
        return NULL;
}

static inline void fake_reset(void) {
        pthread_mutex_lock(&fake.mu);
        memset(fake.svc, 0, sizeof fake.svc);
        fake.n_svc = fake.writes = fake.n_sockets = fake.sweeps = 0;
        fake.in_batch = fake.hold = fake.sweeping = false;
        fake.fail_batch_end = fake.sweep_result = 0;
        fake.attached[0] = fake.unpinned[0] = '\0';
        pthread_mutex_unlock(&fake.mu);
}

static inline void fake_add_socket(uint64_t cookie, const char *ip, uint16_t port) {
        pthread_mutex_lock(&fake.mu);
        struct fake_socket *s = &fake.sockets[fake.n_sockets];
        *s = (struct fake_socket) {.cookie = cookie, .peer = {.port = port}};
        inet_addr_parse(ip, &s->peer.ip);
        fake.n_sockets++;
        pthread_mutex_unlock(&fake.mu);
}

/* Lets a held sweep finish. */
static inline void fake_release(void) {
        pthread_mutex_lock(&fake.mu);
        fake.hold = false;
        pthread_cond_broadcast(&fake.cond);
        pthread_mutex_unlock(&fake.mu);
}

/* Waits until n sweeps have ended (their threads may still be returning). */
static inline void fake_wait_sweeps(size_t n) {
        pthread_mutex_lock(&fake.mu);
        while (fake.sweeps < n)
                pthread_cond_wait(&fake.cond, &fake.mu);
        pthread_mutex_unlock(&fake.mu);
}

/* Waits until a sweep is running (and held). */
static inline void fake_wait_sweeping(void) {
        pthread_mutex_lock(&fake.mu);
        while (!fake.sweeping)
                pthread_cond_wait(&fake.cond, &fake.mu);
        pthread_mutex_unlock(&fake.mu);
}

static void fake_apply(int proto, const struct sockbpf_addr *a, const struct sockbpf_addr *eps, size_t n,
                       uint32_t affinity) {
        size_t i = 0;
        while (i < fake.n_svc && !fake_same(proto, a, &fake.svc[i]))
                i++;
        if (n == 0) {
                if (i < fake.n_svc)
                        fake.svc[i] = fake.svc[--fake.n_svc];
                return;
        }
        if (i == fake.n_svc && fake.n_svc < FAKE_MAX_SERVICES)
                fake.n_svc++;
        struct fake_service *s = &fake.svc[i];
        *s = (struct fake_service) {.proto = proto, .a = *a, .affinity = affinity};
        s->n_eps = n < FAKE_MAX_EPS ? n : FAKE_MAX_EPS;
        memcpy(s->eps, eps, s->n_eps * sizeof *eps);
}

/* Writes held in a batch, applied at its end. */
static struct {
        struct fake_service w[FAKE_MAX_SERVICES * 2];
        size_t n;
} held;

int sockbpf_open(const char *pin_dir, struct sockbpf **ret) {
        (void) pin_dir;
        *ret = calloc(1, sizeof **ret);
        if (!*ret)
                return -ENOMEM;
        fake.open_handles++;
        return 0;
}

int sockbpf_attach(struct sockbpf *s, const char *cgroup_dir) {
        (void) s;
        snprintf(fake.attached, sizeof fake.attached, "%s", cgroup_dir);
        return 0;
}

int sockbpf_set_service(struct sockbpf *s, int protocol, const struct sockbpf_addr *service,
                        const struct sockbpf_addr *backends, size_t n, uint32_t affinity_s) {
        (void) s;
        fake.writes++;
        if (!fake.in_batch) {
                fake_apply(protocol, service, backends, n, affinity_s);
                return 0;
        }
        if (held.n == sizeof held.w / sizeof *held.w)
                return -E2BIG;
        struct fake_service *w = &held.w[held.n++];
        *w = (struct fake_service) {.proto = protocol, .a = *service, .affinity = affinity_s};
        w->n_eps = n < FAKE_MAX_EPS ? n : FAKE_MAX_EPS;
        memcpy(w->eps, backends, w->n_eps * sizeof *backends);
        return 0;
}

void sockbpf_batch_begin(struct sockbpf *s) {
        (void) s;
        fake.in_batch = true;
        held.n = 0;
}

int sockbpf_batch_end(struct sockbpf *s) {
        (void) s;
        fake.in_batch = false;
        int r = fake.fail_batch_end;
        fake.fail_batch_end = 0;
        if (r == 0)
                for (size_t i = 0; i < held.n; i++)
                        fake_apply(held.w[i].proto, &held.w[i].a, held.w[i].eps, held.w[i].n_eps, held.w[i].affinity);
        held.n = 0;
        return r;
}

int sockbpf_each_service(struct sockbpf *s,
                         void (*each)(struct sockbpf *s, int protocol, const struct sockbpf_addr *service, void *ctx),
                         void *ctx) {
        struct fake_service copy[FAKE_MAX_SERVICES];
        size_t n = fake.n_svc;
        memcpy(copy, fake.svc, n * sizeof *copy);       /* each() may remove the one it is given */
        for (size_t i = 0; i < n; i++)
                each(s, copy[i].proto, &copy[i].a, ctx);
        return 0;
}

int sockbpf_stale(struct sockbpf *s, int protocol, uint64_t cookie, const struct sockbpf_addr *peer) {
        (void) s, (void) cookie;
        /* Translated there by a service that still has peer: not stale. */
        for (size_t i = 0; i < fake.n_svc; i++)
                for (size_t j = 0; fake.svc[i].proto == protocol && j < fake.svc[i].n_eps; j++)
                        if (fake.svc[i].eps[j].port == peer->port && inet_addr_equal(&fake.svc[i].eps[j].ip, &peer->ip))
                                return 0;
        return 1;
}

int sockbpf_stats(struct sockbpf *s, struct sockbpf_stats *ret) {
        (void) s;
        *ret = (struct sockbpf_stats) {.services = fake.n_svc, .translations = 7};
        for (size_t i = 0; i < fake.n_svc; i++)
                ret->slots += fake.svc[i].n_eps;
        return 0;
}

void sockbpf_close(struct sockbpf *s) {
        if (s)
                fake.open_handles--;
        free(s);
}

int sockbpf_unpin(const char *pin_dir) {
        snprintf(fake.unpinned, sizeof fake.unpinned, "%s", pin_dir);
        fake.n_svc = 0;
        return 0;
}

int udpreap_run(const char *cgroup_dir, udpreap_stale_fn stale, void *ctx, struct udpreap_stats *ret) {
        (void) cgroup_dir;
        pthread_mutex_lock(&fake.mu);
        size_t n = fake.n_sockets;      /* those added while it is held are the next sweep's */
        fake.sweeping = true;
        pthread_cond_broadcast(&fake.cond);
        while (fake.hold)
                pthread_cond_wait(&fake.cond, &fake.mu);
        *ret = (struct udpreap_stats) {.netns = 1};
        for (size_t i = 0; i < n && fake.sweep_result == 0; i++) {
                struct fake_socket *so = &fake.sockets[i];
                if (so->closed)
                        continue;
                ret->sockets++;
                if (stale(ctx, so->cookie, &so->peer) == 1) {
                        so->closed = true;
                        ret->destroyed++;
                }
        }
        fake.sweeps++;
        fake.sweeping = false;
        pthread_cond_broadcast(&fake.cond);
        int r = fake.sweep_result;
        pthread_mutex_unlock(&fake.mu);
        return r;
}
