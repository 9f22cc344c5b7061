/* SPDX-License-Identifier: Apache-2.0 */
#include "util/intern.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/hmap.h"

struct interned {
        size_t refs;
        char s[];
};

static struct hmap pool = HMAP_INIT;

const char *intern(const char *s) {
        struct interned *e = hmap_get(&pool, s);
        if (!e) {
                size_t len = strlen(s);
                e = malloc(sizeof *e + len + 1);
                if (!e)
                        abort();
                e->refs = 0;
                memcpy(e->s, s, len + 1);
                hmap_put(&pool, e->s, e);
        }
        e->refs++;
        return e->s;
}

void intern_release(const char *s) {
        if (!s)
                return;
        struct interned *e = (struct interned *) (void *) (s - offsetof(struct interned, s));
        if (--e->refs > 0)
                return;
        hmap_remove(&pool, e->s);
        free(e);
        if (pool.len == 0)
                hmap_done(&pool);       /* nothing left: no map either (leak checkers) */
}

size_t intern_count(void) {
        return pool.len;
}
