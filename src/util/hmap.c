/* SPDX-License-Identifier: Apache-2.0 */
#include "util/hmap.h"
#include "util/alloc.h"

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TAG_EMPTY 0
#define TAG_DELETED 1

/* FNV-1a: short keys, no adversarial pressure beyond what the API server
 * already validated (names are at most 253 bytes of DNS characters).
 * Then MurmurHash3's finalizer: keys that differ in their last characters
 * only (element ids, "ns/svc-000123") left FNV's low bits, where the home
 * slot comes from, clustered: 2.8 probes per insert at half full, runs of
 * 489 slots, against 1.5 and 17 with it (20k element ids). */
static uint64_t hash_str(const char *s) {
        uint64_t h = 1469598103934665603ull;
        for (; *s; s++) {
                h ^= (unsigned char) *s;
                h *= 1099511628211ull;
        }
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdull;
        return h ^ (h >> 33);
}

/* The home slot of hash h in m's cap slots, from its low 32 bits (cap is
 * any size: a map grows by half, not double, so that it is not a third
 * full after growing); the tag comes from the high ones. The low bits are
 * first multiplied by the map's own odd salt: with the same order of home
 * slots in every map, keys walked out of one map arrive at another sorted
 * by home slot, and a table filled in that order piles every key into its
 * first slots (inserting 223k chain names so took 8 s). */
static size_t home_of(const struct hmap *m, uint64_t h) {
        uint32_t x = (uint32_t) h * m->salt;
        return (size_t) (((uint64_t) x * m->cap) >> 32);
}

static size_t next_slot(size_t i, size_t cap) {
        return i + 1 == cap ? 0 : i + 1;
}

/* The slot comes from the low bits, the tag from the high ones. */
static uint8_t tag_of(uint64_t h) {
        return (uint8_t) (2 + (h >> 56) % 254);
}

static size_t slot_size(const struct hmap *m) {
        return m->keys == HMAP_KEYS_OWN ? sizeof(struct hmap_entry) : sizeof(void *);
}

static void *slot_value(const struct hmap *m, size_t i) {
        if (m->keys == HMAP_KEYS_OWN)
                return ((struct hmap_entry *) m->slots)[i].value;
        return ((void **) m->slots)[i];
}

/* The key a keyed map's value holds. */
static const char *value_key(const struct hmap *m, const void *value) {
        const char *v = value;
        if (m->keys == HMAP_KEYS_FIELD)
                return *(const char *const *) (const void *) (v + m->key_off);
        return v + m->key_off;
}

static const char *slot_key(const struct hmap *m, size_t i) {
        if (m->keys == HMAP_KEYS_OWN)
                return ((struct hmap_entry *) m->slots)[i].key;
        return value_key(m, ((void **) m->slots)[i]);
}

static void slot_set(struct hmap *m, size_t i, const char *key, void *value) {
        if (m->keys == HMAP_KEYS_OWN)
                ((struct hmap_entry *) m->slots)[i] = (struct hmap_entry) {key, value};
        else
                ((void **) m->slots)[i] = value;
}

/* The first slot of key (h: its hash) from slot i on, holding value
 * unless any_value; -1 when there is none before an empty slot. Every
 * value of key sits between its home slot and the first empty one. */
static ptrdiff_t probe(const struct hmap *m, const char *key, uint64_t h, size_t i, bool any_value,
                       const void *value) {
        uint8_t tag = tag_of(h);
        for (;; i = next_slot(i, m->cap)) {
                if (m->tags[i] == TAG_EMPTY)
                        return -1;
                if (m->tags[i] == tag && (any_value || slot_value(m, i) == value) &&
                    strcmp(slot_key(m, i), key) == 0)
                        return (ptrdiff_t) i;
        }
}

/* The slot of key, or -1. */
static ptrdiff_t find(const struct hmap *m, const char *key, uint64_t h) {
        return m->cap ? probe(m, key, h, home_of(m, h), true, NULL) : -1;
}

/* Empties slot i; returns its value. */
static void *remove_at(struct hmap *m, size_t i) {
        void *v = slot_value(m, i);
        slot_set(m, i, NULL, NULL);
        m->tags[i] = TAG_DELETED;
        m->len--;
        return v;
}

static void grow(struct hmap *m) {
        static uint32_t salts;
        size_t cap = m->cap ? m->cap + m->cap / 2 : 16;
        if (!m->salt)
                m->salt = (salts += 0x9e3779b9u) | 1;   /* the golden ratio's steps: far apart */
        /* Rehash into the same size if tombstones, not live entries, filled it. */
        if (m->len * 2 < m->cap)
                cap = m->cap;
        struct hmap old = *m;
        m->slots = xcalloc(cap, slot_size(m) + 1);
        m->tags = (uint8_t *) m->slots + cap * slot_size(m);
        m->cap = cap;
        m->used = m->len;
        for (size_t i = 0; i < old.cap; i++) {
                if (old.tags[i] < 2)
                        continue;
                uint64_t h = hash_str(slot_key(&old, i));
                size_t j = home_of(m, h);
                while (m->tags[j] != TAG_EMPTY)
                        j = next_slot(j, cap);
                slot_set(m, j, slot_key(&old, i), slot_value(&old, i));
                m->tags[j] = old.tags[i];
        }
        free(old.slots);
}

void *hmap_get(const struct hmap *m, const char *key) {
        if (m->len == 0)
                return NULL;    /* not even the hash: a cold sync asks empty maps */
        ptrdiff_t i = find(m, key, hash_str(key));
        return i < 0 ? NULL : slot_value(m, (size_t) i);
}

/* Puts value in the first free slot from key's home (h: key's hash). */
static void insert(struct hmap *m, const char *key, void *value, uint64_t h) {
        if ((m->used + 1) * 10 >= m->cap * 7)
                grow(m);
        size_t i = home_of(m, h);
        while (m->tags[i] >= 2)
                i = next_slot(i, m->cap);
        if (m->tags[i] == TAG_EMPTY)
                m->used++;
        slot_set(m, i, key, value);
        m->tags[i] = tag_of(h);
        m->len++;
}

void *hmap_put(struct hmap *m, const char *key, void *value) {
        uint64_t h = hash_str(key);
        /* A keyed map keeps the value's own key: they must be equal. */
        assert(m->keys == HMAP_KEYS_OWN || strcmp(key, value_key(m, value)) == 0);
        ptrdiff_t f = find(m, key, h);
        if (f >= 0) {
                void *old = slot_value(m, (size_t) f);
                slot_set(m, (size_t) f, key, value);
                return old;
        }
        insert(m, key, value, h);
        return NULL;
}

void hmap_add(struct hmap *m, const char *key, void *value) {
        insert(m, key, value, hash_str(key));
}

/* *iter: 0 to start, then 1 + the slot after the last value returned. */
void *hmap_next_of(const struct hmap *m, const char *key, size_t *iter) {
        if (m->cap == 0)
                return NULL;
        uint64_t h = hash_str(key);
        ptrdiff_t i = probe(m, key, h, *iter ? *iter - 1 : home_of(m, h), true, NULL);
        if (i < 0)
                return NULL;
        *iter = next_slot((size_t) i, m->cap) + 1;
        return slot_value(m, (size_t) i);
}

int hmap_remove_value(struct hmap *m, const char *key, const void *value) {
        if (m->cap == 0)
                return 0;
        uint64_t h = hash_str(key);
        ptrdiff_t i = probe(m, key, h, home_of(m, h), false, value);
        if (i < 0)
                return 0;
        remove_at(m, (size_t) i);
        return 1;
}

void *hmap_remove(struct hmap *m, const char *key) {
        ptrdiff_t i = find(m, key, hash_str(key));
        return i < 0 ? NULL : remove_at(m, (size_t) i);
}

int hmap_next(const struct hmap *m, size_t *iter, const char **ret_key, void **ret_value) {
        for (; *iter < m->cap; (*iter)++) {
                if (m->tags[*iter] >= 2) {
                        if (ret_key)
                                *ret_key = slot_key(m, *iter);
                        if (ret_value)
                                *ret_value = slot_value(m, *iter);
                        (*iter)++;
                        return 1;
                }
        }
        return 0;
}

void hmap_done(struct hmap *m) {
        free(m->slots);
        m->slots = NULL;
        m->tags = NULL;
        m->cap = m->len = m->used = 0;
}
