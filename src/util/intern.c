/* SPDX-License-Identifier: Apache-2.0 */
#include "util/intern.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/hmap.h"
#include "util/alloc.h"

struct interned {
        uint32_t refs;
        uint32_t id;
        char s[];
};

static struct hmap pool = HMAP_INIT;    /* string -> struct interned */
static struct interned **by_id;         /* [id]: NULL when free; [0] unused */
static uint32_t n_ids, cap_ids;
static uint32_t *free_ids;              /* numbers to use again, a stack */
static uint32_t n_free, cap_free;

static void *grow(void *p, uint32_t *cap, size_t size) {
        *cap = *cap ? *cap * 2 : 64;
        p = xrealloc(p, *cap * size);
        return p;
}

uint32_t intern(const char *s) {
        struct interned *e = hmap_get(&pool, s);
        if (!e) {
                size_t len = strlen(s);
                e = xmalloc(sizeof *e + len + 1);
                e->refs = 0;
                memcpy(e->s, s, len + 1);
                if (n_free > 0) {
                        e->id = free_ids[--n_free];
                } else {
                        if (n_ids == 0)
                                n_ids = 1;      /* 0 stands for none */
                        if (n_ids >= cap_ids)
                                by_id = grow(by_id, &cap_ids, sizeof *by_id);
                        e->id = n_ids++;
                }
                by_id[e->id] = e;
                hmap_put(&pool, e->s, e);
        }
        e->refs++;
        return e->id;
}

const char *interned(uint32_t id) {
        return id && id < n_ids && by_id[id] ? by_id[id]->s : NULL;
}

void intern_release(uint32_t id) {
        struct interned *e = id && id < n_ids ? by_id[id] : NULL;
        if (!e || --e->refs > 0)
                return;
        hmap_remove(&pool, e->s);
        by_id[id] = NULL;
        free(e);
        if (pool.len == 0) {
                /* Nothing left: no tables either (leak checkers). */
                hmap_done(&pool);
                free(by_id);
                free(free_ids);
                by_id = NULL;
                free_ids = NULL;
                n_ids = cap_ids = n_free = cap_free = 0;
                return;
        }
        if (n_free >= cap_free)
                free_ids = grow(free_ids, &cap_free, sizeof *free_ids);
        free_ids[n_free++] = id;
}

size_t intern_count(void) {
        return pool.len;
}
