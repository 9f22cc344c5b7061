/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Open-addressing hash map from a NUL-terminated string key to a pointer.
 * The map borrows keys: each key must live as long as its entry (kproxy keys
 * objects by a "namespace/name" string the object itself owns). Linear
 * probing with tombstones; grows at 70% load (tombstones included). A slot
 * is 17 bytes: the key and value pointers, and a byte of the key's hash in
 * a separate array (most probes of other keys stop there, without strcmp).
 */
#include <stddef.h>
#include <stdint.h>

struct hmap_entry {
        const char *key;
        void *value;
};

struct hmap {
        struct hmap_entry *entries;
        uint8_t *tags;          /* per slot: 0 empty, 1 deleted, else a byte of the hash; after entries */
        size_t cap;             /* power of two, or 0 */
        size_t len;             /* live entries */
        size_t used;            /* live + tombstones */
};

#define HMAP_INIT {NULL, NULL, 0, 0, 0}

void *hmap_get(const struct hmap *m, const char *key);
/* Inserts or replaces; returns the previous value (or NULL). Aborts on OOM. */
void *hmap_put(struct hmap *m, const char *key, void *value);
/* Removes the entry; returns its value (or NULL if absent). */
void *hmap_remove(struct hmap *m, const char *key);
void hmap_done(struct hmap *m);

/* Iteration: for (size_t i = 0; hmap_next(m, &i, &k, &v); ) */
int hmap_next(const struct hmap *m, size_t *iter, const char **ret_key, void **ret_value);
