/* SPDX-License-Identifier: Apache-2.0 */
#include "model/servicecidrs.h"

#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/hmap.h"
#include "util/inet.h"

struct entry {
        char *name;
        struct inet_cidr *cidrs;
        size_t n;
};

struct service_cidrs {
        struct hmap by_name;            /* struct entry, keyed by its name */
        struct inet_cidr *all;          /* the union, sorted */
        size_t n_all;
};

static void entry_free(struct entry *e) {
        if (!e)
                return;
        free(e->name);
        free(e->cidrs);
        free(e);
}

struct service_cidrs *service_cidrs_new(void) {
        struct service_cidrs *s = xcalloc(1, sizeof *s);
        s->by_name = (struct hmap) HMAP_INIT_KEYED(struct entry, name);
        return s;
}

struct service_cidrs *service_cidrs_free(struct service_cidrs *s) {
        const char *k;
        void *v;
        if (!s)
                return NULL;
        for (size_t it = 0; hmap_next(&s->by_name, &it, &k, &v);)
                entry_free(v);
        hmap_done(&s->by_name);
        free(s->all);
        free(s);
        return NULL;
}

/* Family, then address bytes, then prefix: IPv4 first, a stable order. */
static int cmp_cidr(const void *a, const void *b) {
        const struct inet_cidr *x = a, *y = b;
        if (x->addr.family != y->addr.family)
                return x->addr.family < y->addr.family ? -1 : 1;
        int c = memcmp(x->addr.bytes, y->addr.bytes, sizeof x->addr.bytes);
        if (c != 0)
                return c;
        return (int) x->prefix - (int) y->prefix;
}

static void rebuild(struct service_cidrs *s, struct inet_cidr **ret, size_t *ret_n) {
        const char *k;
        void *v;
        size_t n = 0, out = 0;

        for (size_t it = 0; hmap_next(&s->by_name, &it, &k, &v);)
                n += ((struct entry *) v)->n;
        struct inet_cidr *all = xmalloc(n * sizeof *all);
        n = 0;
        for (size_t it = 0; hmap_next(&s->by_name, &it, &k, &v);) {
                const struct entry *e = v;
                memcpy(all + n, e->cidrs, e->n * sizeof *all);
                n += e->n;
        }
        qsort(all, n, sizeof *all, cmp_cidr);
        for (size_t i = 0; i < n; i++)
                if (out == 0 || cmp_cidr(&all[out - 1], &all[i]) != 0)
                        all[out++] = all[i];
        *ret = all;
        *ret_n = out;
}

bool service_cidrs_set(struct service_cidrs *s, const char *name, const struct inet_cidr *cidrs, size_t n) {
        struct entry *old = hmap_remove(&s->by_name, name);
        entry_free(old);
        if (n > 0) {
                struct entry *e = xmalloc(sizeof *e);
                e->name = xstrdup(name);
                e->cidrs = xmalloc(n * sizeof *cidrs);
                memcpy(e->cidrs, cidrs, n * sizeof *cidrs);
                e->n = n;
                hmap_put(&s->by_name, e->name, e);
        }
        struct inet_cidr *all;
        size_t n_all;
        rebuild(s, &all, &n_all);
        /* memcmp() of NULL is undefined even for 0 bytes (UBSan stops on it). */
        bool changed = n_all != s->n_all || (n_all > 0 && memcmp(all, s->all, n_all * sizeof *all) != 0);
        free(s->all);
        s->all = all;
        s->n_all = n_all;
        return changed;
}

const struct inet_cidr *service_cidrs_all(const struct service_cidrs *s, size_t *ret_n) {
        *ret_n = s->n_all;
        return s->all;
}

void service_cidrs_keys(const struct service_cidrs *s, void (*each)(const char *name, void *ctx), void *ctx) {
        const char *k;
        void *v;
        for (size_t it = 0; hmap_next(&s->by_name, &it, &k, &v);)
                each(k, ctx);
}
