/* SPDX-License-Identifier: Apache-2.0 */
#include "util/hmap.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define N 20000

static char keys[N][24];

/* The map against a plain array of what should be in it, through growth,
 * removals (tombstones), re-insertion and replacement. */
static void test_against_array(void) {
        struct hmap m = HMAP_INIT;
        static bool in[N];
        size_t want = 0;

        for (int i = 0; i < N; i++)
                snprintf(keys[i], sizeof keys[i], "ns%d/svc%d", i % 97, i);
        CHECK(hmap_get(&m, keys[0]) == NULL && hmap_remove(&m, keys[0]) == NULL);
        for (int i = 0; i < N; i++) {
                CHECK(hmap_put(&m, keys[i], keys[i]) == NULL);
                in[i] = true;
        }
        want = N;
        /* Remove every third, put back every ninth: slots are reused. */
        for (int round = 0; round < 3; round++) {
                for (int i = round; i < N; i += 3)
                        if (in[i]) {
                                CHECK(hmap_remove(&m, keys[i]) == keys[i]);
                                in[i] = false;
                                want--;
                        }
                for (int i = round; i < N; i += 9)
                        if (!in[i]) {
                                CHECK(hmap_put(&m, keys[i], keys[i]) == NULL);
                                in[i] = true;
                                want++;
                        }
        }
        CHECK(m.len == want);
        for (int i = 0; i < N; i++)
                CHECK(hmap_get(&m, keys[i]) == (in[i] ? keys[i] : NULL));

        /* A copy of a key finds the entry (strings, not pointers, compare);
         * putting it replaces the value and returns the old one. */
        char copy[24];
        int k = 9;      /* in: put back in round 0 */
        memcpy(copy, keys[k], sizeof copy);
        CHECK(in[k] && hmap_get(&m, copy) == keys[k]);
        CHECK(hmap_put(&m, copy, (void *) "other") == keys[k]);
        CHECK_STREQ(hmap_get(&m, keys[k]), "other");
        CHECK(m.len == want);

        /* Iteration sees every live entry once. */
        size_t seen = 0;
        const char *key;
        void *v;
        for (size_t it = 0; hmap_next(&m, &it, &key, &v);) {
                seen++;
                CHECK(hmap_get(&m, key) == v);
        }
        CHECK(seen == want);

        /* Remove everything: nothing is found, and the map works on. */
        for (int i = 0; i < N; i++)
                if (in[i])
                        CHECK(hmap_remove(&m, keys[i]) != NULL);
        CHECK(m.len == 0);
        for (size_t it = 0; hmap_next(&m, &it, NULL, NULL);)
                CHECK(!"an entry after removing all");
        for (int i = 0; i < N; i++)
                CHECK(hmap_get(&m, keys[i]) == NULL);
        CHECK(hmap_put(&m, keys[1], keys[1]) == NULL && hmap_get(&m, keys[1]) == keys[1]);
        hmap_done(&m);
        CHECK(m.cap == 0 && m.len == 0 && hmap_get(&m, keys[1]) == NULL);
}

struct obj {
        int n;
        char *key;
};

struct obj_inline {
        int n;
        char key[24];
};

/* Maps that keep only the values: a key is found through its value,
 * through growth, removal and replacement by another object of the same
 * key. */
static void test_keyed(void) {
        static struct obj objs[N];
        static struct obj_inline inl[N];
        struct hmap m = HMAP_INIT_KEYED(struct obj, key), a = HMAP_INIT_KEY_ARRAY(struct obj_inline, key);
        for (int i = 0; i < N; i++) {
                snprintf(keys[i], sizeof keys[i], "ns%d/k%d", i % 13, i);
                objs[i] = (struct obj) {i, keys[i]};
                inl[i].n = i;
                memcpy(inl[i].key, keys[i], sizeof inl[i].key);
                CHECK(hmap_put(&m, keys[i], &objs[i]) == NULL);
                CHECK(hmap_put(&a, inl[i].key, &inl[i]) == NULL);
        }
        for (int i = 0; i < N; i += 2) {
                CHECK(hmap_remove(&m, keys[i]) == &objs[i]);
                CHECK(hmap_remove(&a, keys[i]) == &inl[i]);
        }
        CHECK(m.len == N / 2 && a.len == N / 2);
        for (int i = 0; i < N; i++) {
                CHECK(hmap_get(&m, keys[i]) == (i % 2 ? &objs[i] : NULL));
                CHECK(hmap_get(&a, keys[i]) == (i % 2 ? (void *) &inl[i] : NULL));
        }
        /* A new object of an existing key replaces the old one, and its key
         * is the one the map uses from then on. */
        char copy[24];
        memcpy(copy, keys[1], sizeof copy);
        struct obj other = {-1, copy};
        CHECK(hmap_put(&m, copy, &other) == &objs[1]);
        keys[1][0] = 'X';       /* the old object's key changes: not the map's */
        CHECK(hmap_get(&m, copy) == &other);
        size_t seen = 0;
        const char *k;
        void *v;
        for (size_t it = 0; hmap_next(&m, &it, &k, &v);) {
                seen++;
                CHECK(k == ((struct obj *) v)->key);
        }
        CHECK(seen == N / 2);
        for (size_t it = 0; hmap_next(&a, &it, &k, &v);)
                CHECK(k == ((struct obj_inline *) v)->key);
        hmap_done(&m);
        hmap_done(&a);
        /* Emptied, they stay keyed. */
        CHECK(hmap_put(&m, copy, &other) == NULL && hmap_get(&m, copy) == &other && m.keys == HMAP_KEYS_FIELD);
        hmap_done(&m);
}

/* Several values a key: each is found once, whichever of them goes, among
 * other keys' values and tombstones, through growth. */
static void test_multi(void) {
        enum { KEYS = 3000, PER = 5 };
        static struct obj objs[KEYS * PER];
        struct hmap m = HMAP_INIT_KEYED(struct obj, key);
        for (int i = 0; i < KEYS; i++)
                snprintf(keys[i], sizeof keys[i], "svc/%d", i);
        for (int j = 0; j < PER; j++)
                for (int i = 0; i < KEYS; i++) {
                        objs[i * PER + j] = (struct obj) {i * PER + j, keys[i]};
                        hmap_add(&m, keys[i], &objs[i * PER + j]);
                }
        CHECK(m.len == KEYS * PER);
        /* Remove value 1 and 3 of every key; 3 twice (the second finds nothing). */
        for (int i = 0; i < KEYS; i++) {
                CHECK(hmap_remove_value(&m, keys[i], &objs[i * PER + 1]) == 1);
                CHECK(hmap_remove_value(&m, keys[i], &objs[i * PER + 3]) == 1);
                CHECK(hmap_remove_value(&m, keys[i], &objs[i * PER + 3]) == 0);
        }
        CHECK(hmap_remove_value(&m, "svc/none", &objs[0]) == 0);
        for (int i = 0; i < KEYS; i++) {
                bool seen[PER] = {false};
                int n = 0;
                struct obj *o;
                for (size_t it = 0; (o = hmap_next_of(&m, keys[i], &it));) {
                        CHECK(o->key == keys[i] && o->n / PER == i && !seen[o->n % PER]);
                        seen[o->n % PER] = true;
                        n++;
                }
                CHECK(n == PER - 2 && seen[0] && !seen[1] && seen[2] && !seen[3] && seen[4]);
        }
        size_t it = 0;
        CHECK(hmap_next_of(&m, "svc/none", &it) == NULL);
        hmap_done(&m);
        it = 0;
        CHECK(hmap_next_of(&m, keys[0], &it) == NULL && hmap_remove_value(&m, keys[0], &objs[0]) == 0);
}

/* The longest run of occupied slots (a lookup's worst walk). */
static size_t longest_run(const struct hmap *m) {
        size_t best = 0, run = 0;
        for (size_t i = 0; i < 2 * m->cap; i++) {
                run = m->tags[i % m->cap] >= 2 ? run + 1 : 0;
                if (run > best)
                        best = run;
        }
        return best > m->cap ? m->cap : best;
}

/* Keys walked out of one map into another arrive in the first map's slot
 * order; the second must not pile them up (each map has its own order of
 * home slots). */
static void test_copy_in_walk_order(void) {
        struct hmap a = HMAP_INIT, b = HMAP_INIT;
        const char *k;
        for (int i = 0; i < N; i++) {
                snprintf(keys[i], sizeof keys[i], "KUBE-SEP-%08dX", i * 7919);
                hmap_put(&a, keys[i], keys[i]);
        }
        /* Halfway is where a shared order hurts most: the keys so far all
         * have the first half of the homes, and the map is half the size. */
        size_t run_b = 0;
        for (size_t i = 0; hmap_next(&a, &i, &k, NULL);) {
                CHECK(hmap_put(&b, k, (void *) k) == NULL);
                if (b.len == N / 2)
                        run_b = longest_run(&b);
        }
        CHECK(b.len == N);
        size_t run_a = longest_run(&a);
        printf("longest runs: %zu filled in order, %zu half copied in walk order\n", run_a, run_b);
        CHECK(run_b < 200);
        hmap_done(&a);
        hmap_done(&b);
}

int main(void) {
        TEST_RUN(test_against_array);
        TEST_RUN(test_multi);
        TEST_RUN(test_keyed);
        TEST_RUN(test_copy_in_walk_order);
        TEST_DONE();
}
