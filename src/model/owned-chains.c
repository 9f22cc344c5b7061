/* SPDX-License-Identifier: Apache-2.0 */
#include "model/owned-chains.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/hmap.h"

/* One service's chains: its key, then the names, each NUL-terminated, in
 * one allocation (tens of thousands of services: one malloc each). */
struct owned_svc {
        uint32_t n_rules, n_names;
        char data[];
};

struct owned_chains {
        struct hmap svcs;       /* service key (in the entry) -> struct owned_svc */
        size_t n_chains, n_rules;
};

static struct owned_chains_entry entry_of(const struct owned_svc *s) {
        return (struct owned_chains_entry) {s->data + strlen(s->data) + 1, s->n_names, s->n_rules};
}

struct owned_chains *owned_chains_new(void) {
        return xcalloc(1, sizeof(struct owned_chains));
}

static void svcs_clear(struct hmap *svcs) {
        void *v;
        for (size_t i = 0; hmap_next(svcs, &i, NULL, &v);)
                free(v);
        hmap_done(svcs);
}

struct owned_chains *owned_chains_free(struct owned_chains *o) {
        if (!o)
                return NULL;
        svcs_clear(&o->svcs);
        free(o);
        return NULL;
}

/* Takes s into o, in place of key's entry if any. */
static void take(struct owned_chains *o, struct owned_svc *s) {
        struct owned_svc *old = hmap_put(&o->svcs, s->data, s);
        if (old) {
                o->n_chains -= old->n_names;
                o->n_rules -= old->n_rules;
                free(old);
        }
        o->n_chains += s->n_names;
        o->n_rules += s->n_rules;
}

static void drop(struct owned_chains *o, const char *key) {
        struct owned_svc *old = hmap_remove(&o->svcs, key);
        if (old) {
                o->n_chains -= old->n_names;
                o->n_rules -= old->n_rules;
                free(old);
        }
}

int owned_chains_put(struct owned_chains *o, const char *key, const char *names, size_t len, uint32_t n_names,
                     uint32_t n_rules) {
        size_t klen = strlen(key) + 1;
        struct owned_svc *s = malloc(sizeof *s + klen + len);
        if (!s)
                return -ENOMEM;
        s->n_rules = n_rules;
        s->n_names = n_names;
        memcpy(s->data, key, klen);
        memcpy(s->data + klen, names, len);
        take(o, s);
        return 0;
}

bool owned_chains_get(const struct owned_chains *o, const char *key, struct owned_chains_entry *ret) {
        const struct owned_svc *s = o ? hmap_get(&o->svcs, key) : NULL;
        if (!s)
                return false;
        *ret = entry_of(s);
        return true;
}

bool owned_chains_next(const struct owned_chains *o, size_t *iter, const char **ret_key,
                       struct owned_chains_entry *ret) {
        void *v;
        if (!o || !hmap_next(&o->svcs, iter, NULL, &v))
                return false;
        const struct owned_svc *s = v;
        if (ret_key)
                *ret_key = s->data;
        if (ret)
                *ret = entry_of(s);
        return true;
}

size_t owned_chains_n_chains(const struct owned_chains *o) {
        return o ? o->n_chains : 0;
}

size_t owned_chains_n_rules(const struct owned_chains *o) {
        return o ? o->n_rules : 0;
}

void owned_chains_merge(struct owned_chains *o, struct owned_chains *fresh, const struct hmap *changed) {
        const char *k;
        void *v;

        if (!o) {
                owned_chains_free(fresh);
                return;
        }
        if (!fresh)
                return;
        if (!changed) {
                svcs_clear(&o->svcs);
                *o = *fresh;
                free(fresh);
                return;
        }
        for (size_t i = 0; hmap_next(changed, &i, &k, NULL);)
                drop(o, k);
        /* Moved, not copied: fresh's entries become o's. */
        for (size_t i = 0; hmap_next(&fresh->svcs, &i, NULL, &v);)
                take(o, v);
        hmap_done(&fresh->svcs);
        free(fresh);
}
