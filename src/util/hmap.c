/* SPDX-License-Identifier: Apache-2.0 */
#include "util/hmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char tombstone_mark;
#define HMAP_TOMBSTONE (&tombstone_mark)

/* FNV-1a: short keys, no adversarial pressure beyond what the API server
 * already validated (names are at most 253 bytes of DNS characters). */
static size_t hash_str(const char *s) {
        uint64_t h = 1469598103934665603ull;
        for (; *s; s++) {
                h ^= (unsigned char) *s;
                h *= 1099511628211ull;
        }
        return (size_t) (h ^ (h >> 29));
}

static struct hmap_entry *find(const struct hmap *m, const char *key, size_t h) {
        if (m->cap == 0)
                return NULL;
        for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
                struct hmap_entry *e = &m->entries[i];
                if (!e->key)
                        return NULL;
                if (e->key != HMAP_TOMBSTONE && e->hash == h && strcmp(e->key, key) == 0)
                        return e;
        }
}

static void grow(struct hmap *m) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        /* Rehash into the same size if tombstones, not live entries, filled it. */
        if (m->len * 2 < m->cap)
                cap = m->cap;
        struct hmap_entry *old = m->entries;
        size_t oldcap = m->cap;
        m->entries = calloc(cap, sizeof *m->entries);
        if (!m->entries)
                abort();
        m->cap = cap;
        m->used = m->len;
        for (size_t i = 0; i < oldcap; i++) {
                if (!old[i].key || old[i].key == HMAP_TOMBSTONE)
                        continue;
                size_t j = old[i].hash & (cap - 1);
                while (m->entries[j].key)
                        j = (j + 1) & (cap - 1);
                m->entries[j] = old[i];
        }
        free(old);
}

void *hmap_get(const struct hmap *m, const char *key) {
        struct hmap_entry *e = find(m, key, hash_str(key));
        return e ? e->value : NULL;
}

void *hmap_put(struct hmap *m, const char *key, void *value) {
        size_t h = hash_str(key);
        struct hmap_entry *e = find(m, key, h);
        if (e) {
                void *old = e->value;
                e->key = key;
                e->value = value;
                return old;
        }
        if ((m->used + 1) * 10 >= m->cap * 7)
                grow(m);
        size_t i = h & (m->cap - 1);
        while (m->entries[i].key && m->entries[i].key != HMAP_TOMBSTONE)
                i = (i + 1) & (m->cap - 1);
        if (!m->entries[i].key)
                m->used++;
        m->entries[i] = (struct hmap_entry) {key, value, h};
        m->len++;
        return NULL;
}

void *hmap_remove(struct hmap *m, const char *key) {
        struct hmap_entry *e = find(m, key, hash_str(key));
        if (!e)
                return NULL;
        void *v = e->value;
        e->key = HMAP_TOMBSTONE;
        e->value = NULL;
        m->len--;
        return v;
}

int hmap_next(const struct hmap *m, size_t *iter, const char **ret_key, void **ret_value) {
        for (; *iter < m->cap; (*iter)++) {
                struct hmap_entry *e = &m->entries[*iter];
                if (e->key && e->key != HMAP_TOMBSTONE) {
                        if (ret_key)
                                *ret_key = e->key;
                        if (ret_value)
                                *ret_value = e->value;
                        (*iter)++;
                        return 1;
                }
        }
        return 0;
}

void hmap_done(struct hmap *m) {
        free(m->entries);
        *m = (struct hmap) HMAP_INIT;
}
