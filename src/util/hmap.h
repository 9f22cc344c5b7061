/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Open-addressing hash map from a NUL-terminated string key to a pointer.
 * The map borrows keys: each key must live as long as its entry (kproxy keys
 * objects by a "namespace/name" string the object itself owns). Linear
 * probing with tombstones; grows by half at 70% load (tombstones included).
 *
 * A slot is 17 bytes: the key and value pointers, and a byte of the key's
 * hash in a separate array (most probes of other keys stop there, without
 * strcmp). A map whose values hold their own key (HMAP_INIT_KEYED: a
 * char * field; HMAP_INIT_KEY_ARRAY: a char array) keeps only the value:
 * 9 bytes a slot, and its key passed to hmap_put() must be the value's.
 */
#include <stddef.h>
#include <stdint.h>

struct hmap_entry {
        const char *key;
        void *value;
};

enum hmap_keys {
        HMAP_KEYS_OWN,          /* slots hold key and value */
        HMAP_KEYS_FIELD,        /* slots hold the value; its key is the char * at key_off */
        HMAP_KEYS_ARRAY,        /* ... the chars at key_off */
};

struct hmap {
        void *slots;            /* struct hmap_entry, or void * (values) for a keyed map */
        uint8_t *tags;          /* per slot: 0 empty, 1 deleted, else a byte of the hash; after slots */
        size_t cap;             /* slots: 16 grown by half, or 0 */
        size_t len;             /* live entries */
        size_t used;            /* live + tombstones */
        uint32_t key_off;
        uint8_t keys;           /* enum hmap_keys */
        uint32_t salt;          /* odd, this map's own: set when it first grows */
};

#define HMAP_INIT {NULL, NULL, 0, 0, 0, 0, HMAP_KEYS_OWN, 0}
#define HMAP_INIT_KEYED(type, field) {NULL, NULL, 0, 0, 0, offsetof(type, field), HMAP_KEYS_FIELD, 0}
#define HMAP_INIT_KEY_ARRAY(type, field) {NULL, NULL, 0, 0, 0, offsetof(type, field), HMAP_KEYS_ARRAY, 0}
/* A set of strings: each value is its own key. */
#define HMAP_INIT_STRINGS {NULL, NULL, 0, 0, 0, 0, HMAP_KEYS_ARRAY, 0}

void *hmap_get(const struct hmap *m, const char *key);
/* Inserts or replaces; returns the previous value (or NULL). Aborts on OOM. */
void *hmap_put(struct hmap *m, const char *key, void *value);
/* Removes the entry; returns its value (or NULL if absent). */
void *hmap_remove(struct hmap *m, const char *key);
/* A map of several values per key (the slices of one service) uses these
 * instead of hmap_put(), hmap_get() and hmap_remove(). hmap_add() inserts
 * value even when the key has others; hmap_next_of() iterates the values
 * of key: for (size_t i = 0; (v = hmap_next_of(m, key, &i)); ); and
 * hmap_remove_value() removes that value of key, returning whether it was
 * there. */
void hmap_add(struct hmap *m, const char *key, void *value);
void *hmap_next_of(const struct hmap *m, const char *key, size_t *iter);
int hmap_remove_value(struct hmap *m, const char *key, const void *value);
/* Frees the slots; the map stays usable (and keyed as it was). */
void hmap_done(struct hmap *m);

/* Iteration: for (size_t i = 0; hmap_next(m, &i, &k, &v); ) */
int hmap_next(const struct hmap *m, size_t *iter, const char **ret_key, void **ret_value);
