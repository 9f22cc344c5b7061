/* SPDX-License-Identifier: Apache-2.0 */
#include "util/hmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TAG_EMPTY 0
#define TAG_DELETED 1

/* FNV-1a: short keys, no adversarial pressure beyond what the API server
 * already validated (names are at most 253 bytes of DNS characters). */
static uint64_t hash_str(const char *s) {
        uint64_t h = 1469598103934665603ull;
        for (; *s; s++) {
                h ^= (unsigned char) *s;
                h *= 1099511628211ull;
        }
        return h ^ (h >> 29);
}

/* The slot comes from the low bits, the tag from the high ones. */
static uint8_t tag_of(uint64_t h) {
        return (uint8_t) (2 + (h >> 56) % 254);
}

static struct hmap_entry *find(const struct hmap *m, const char *key, uint64_t h) {
        if (m->cap == 0)
                return NULL;
        uint8_t tag = tag_of(h);
        for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
                if (m->tags[i] == TAG_EMPTY)
                        return NULL;
                if (m->tags[i] == tag && strcmp(m->entries[i].key, key) == 0)
                        return &m->entries[i];
        }
}

static void grow(struct hmap *m) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        /* Rehash into the same size if tombstones, not live entries, filled it. */
        if (m->len * 2 < m->cap)
                cap = m->cap;
        struct hmap_entry *old = m->entries;
        uint8_t *old_tags = m->tags;
        size_t oldcap = m->cap;
        m->entries = calloc(cap, sizeof *m->entries + 1);
        if (!m->entries)
                abort();
        m->tags = (uint8_t *) (m->entries + cap);
        m->cap = cap;
        m->used = m->len;
        for (size_t i = 0; i < oldcap; i++) {
                if (old_tags[i] < 2)
                        continue;
                uint64_t h = hash_str(old[i].key);
                size_t j = h & (cap - 1);
                while (m->tags[j] != TAG_EMPTY)
                        j = (j + 1) & (cap - 1);
                m->entries[j] = old[i];
                m->tags[j] = old_tags[i];
        }
        free(old);
}

void *hmap_get(const struct hmap *m, const char *key) {
        struct hmap_entry *e = find(m, key, hash_str(key));
        return e ? e->value : NULL;
}

void *hmap_put(struct hmap *m, const char *key, void *value) {
        uint64_t h = hash_str(key);
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
        while (m->tags[i] >= 2)
                i = (i + 1) & (m->cap - 1);
        if (m->tags[i] == TAG_EMPTY)
                m->used++;
        m->entries[i] = (struct hmap_entry) {key, value};
        m->tags[i] = tag_of(h);
        m->len++;
        return NULL;
}

void *hmap_remove(struct hmap *m, const char *key) {
        struct hmap_entry *e = find(m, key, hash_str(key));
        if (!e)
                return NULL;
        void *v = e->value;
        *e = (struct hmap_entry) {NULL, NULL};
        m->tags[e - m->entries] = TAG_DELETED;
        m->len--;
        return v;
}

int hmap_next(const struct hmap *m, size_t *iter, const char **ret_key, void **ret_value) {
        for (; *iter < m->cap; (*iter)++) {
                struct hmap_entry *e = &m->entries[*iter];
                if (m->tags[*iter] >= 2) {
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
