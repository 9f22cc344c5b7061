/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle: the endpoints are an array, a choice is one random index.
 * Affinity is a map from client address to the endpoint it got and when
 * it last came; an entry that outlived its timeout is ignored when read
 * and swept when the map has doubled since the last sweep, so a client
 * flood costs memory in proportion to the clients seen within a timeout.
 */
#include "userspace/pick.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "util/alloc.h"
#include "util/hmap.h"

struct client {
        char key[INET_ADDR_STRLEN];     /* the client address */
        struct fwd_addr endpoint;
        uint64_t last_ms;
};

struct affinity {
        unsigned refs;
        struct hmap clients;            /* key -> struct client */
        size_t swept_len;               /* the map's size after the last sweep */
};

struct picker {
        struct fwd_addr *eps;
        size_t n;
        uint64_t timeout_ms;            /* 0: no affinity */
        struct affinity *aff;           /* referenced; NULL without affinity */
};

static uint64_t rng_state;

void picker_seed(uint64_t seed) {
        rng_state = seed ? seed : 0x9e3779b97f4a7c15ull;
}

/* xorshift64*: fast and fair enough for spreading connections. */
static uint64_t rng_next(void) {
        if (!rng_state) {
                uint64_t s = 0;
                if (getrandom(&s, sizeof s, GRND_NONBLOCK) != sizeof s)
                        s = (uint64_t) (uintptr_t) &s;
                picker_seed(s);
        }
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545f4914f6cdd1dull;
}

/* Uniform in [0, n), n > 0, without modulo bias worth the name (n is at
 * most a few thousand; the top 32 bits scaled). */
static size_t rng_below(size_t n) {
        return (size_t) (((rng_next() >> 32) * (uint64_t) n) >> 32);
}

struct affinity *affinity_new(void) {
        struct affinity *a = xcalloc(1, sizeof *a);
        a->refs = 1;
        a->clients = (struct hmap) HMAP_INIT_KEY_ARRAY(struct client, key);
        return a;
}

struct affinity *affinity_ref(struct affinity *a) {
        a->refs++;
        return a;
}

struct affinity *affinity_unref(struct affinity *a) {
        const char *k;
        void *v;

        if (!a || --a->refs > 0)
                return NULL;
        for (size_t i = 0; hmap_next(&a->clients, &i, &k, &v);)
                free(v);
        hmap_done(&a->clients);
        free(a);
        return NULL;
}

size_t affinity_n_clients(const struct affinity *a) {
        return a ? a->clients.len : 0;
}

bool affinity_unshared(const struct affinity *a) {
        return a->refs == 1;
}

struct picker *picker_new(void) {
        return xcalloc(1, sizeof(struct picker));
}

struct picker *picker_free(struct picker *p) {
        if (!p)
                return NULL;
        affinity_unref(p->aff);
        free(p->eps);
        free(p);
        return NULL;
}

int picker_set(struct picker *p, const struct fwd_addr *eps, size_t n, uint32_t affinity_timeout_s,
               struct affinity *shared) {
        struct fwd_addr *copy = NULL;
        struct affinity *aff = NULL;

        if (affinity_timeout_s) {
                aff = shared ? affinity_ref(shared) : p->aff ? affinity_ref(p->aff) : affinity_new();
                if (!aff)
                        return -ENOMEM;
        }
        if (n) {
                copy = malloc(n * sizeof *copy);
                if (!copy) {
                        affinity_unref(aff);
                        return -ENOMEM;
                }
                memcpy(copy, eps, n * sizeof *copy);
        }
        free(p->eps);
        p->eps = copy;
        p->n = n;
        p->timeout_ms = (uint64_t) affinity_timeout_s * 1000;
        affinity_unref(p->aff);
        p->aff = aff;
        return 0;
}

size_t picker_n(const struct picker *p) {
        return p->n;
}

const struct fwd_addr *picker_endpoint(const struct picker *p, size_t i) {
        return &p->eps[i];
}

size_t picker_n_clients(const struct picker *p) {
        return affinity_n_clients(p->aff);
}

static bool listed(const struct picker *p, const struct fwd_addr *a) {
        for (size_t i = 0; i < p->n; i++)
                if (fwd_addr_equal(&p->eps[i], a))
                        return true;
        return false;
}

static void sweep(struct affinity *aff, uint64_t timeout_ms, uint64_t now_ms) {
        const char *k;
        void *v;
        size_t i = 0;

        while (hmap_next(&aff->clients, &i, &k, &v)) {
                struct client *c = v;
                if (now_ms - c->last_ms > timeout_ms) {
                        hmap_remove(&aff->clients, c->key);
                        free(c);
                }
        }
        aff->swept_len = aff->clients.len;
}

/* Equal chances among the endpoints but failed. */
static int choose(const struct picker *p, const struct fwd_addr *failed, struct fwd_addr *ret) {
        size_t skip = p->n;

        if (failed)
                for (size_t i = 0; i < p->n; i++)
                        if (fwd_addr_equal(&p->eps[i], failed))
                                skip = i;
        size_t n = p->n - (skip < p->n);
        if (n == 0)
                return -ENOENT;
        size_t i = rng_below(n);
        *ret = p->eps[i + (i >= skip)];
        return 0;
}

int picker_pick(struct picker *p, const struct inet_addr *client, const struct fwd_addr *failed, uint64_t now_ms,
                struct fwd_addr *ret) {
        char key[INET_ADDR_STRLEN];
        struct affinity *aff = p->aff;
        struct client *a;
        int r;

        if (!p->timeout_ms || !aff || !client)
                return choose(p, failed, ret);
        inet_addr_format(client, key);
        a = hmap_get(&aff->clients, key);
        if (a && now_ms - a->last_ms <= p->timeout_ms && listed(p, &a->endpoint) &&
            !(failed && fwd_addr_equal(&a->endpoint, failed))) {
                a->last_ms = now_ms;
                *ret = a->endpoint;
                return 0;
        }
        r = choose(p, failed, ret);
        if (r < 0)
                return r;
        if (!a) {
                if (aff->clients.len >= 2 * aff->swept_len + 64)
                        sweep(aff, p->timeout_ms, now_ms);
                a = calloc(1, sizeof *a);
                if (!a)
                        return 0;       /* chosen, not remembered */
                memcpy(a->key, key, sizeof key);
                hmap_put(&aff->clients, a->key, a);
        }
        a->endpoint = *ret;
        a->last_ms = now_ms;
        return 0;
}
