/* SPDX-License-Identifier: Apache-2.0 */
/* The iptables backend's record of each service's nat chains: entries,
 * totals, and folding a render's fresh chains in after a full or a
 * partial sync. */
#include <errno.h>

#include "model/owned-chains.h"
#include "util/hmap.h"
#include "test.h"

/* names as the renderer lays them out: NUL-terminated, back to back. */
#define NAMES2(a, b) a "\0" b, sizeof(a "\0" b)

static struct owned_chains *two_services(void) {
        struct owned_chains *o = owned_chains_new();
        CHECK(o != NULL);
        CHECK(owned_chains_put(o, "ns/a", NAMES2("KUBE-SVC-AAAA", "KUBE-SEP-A1"), 2, 5) == 0);
        CHECK(owned_chains_put(o, "ns/b", NAMES2("KUBE-SVC-BBBB", "KUBE-SEP-B1"), 2, 4) == 0);
        return o;
}

static void test_entries_and_totals(void) {
        struct owned_chains *o = two_services();
        struct owned_chains_entry e;
        const char *key;

        CHECK(owned_chains_n_chains(o) == 4 && owned_chains_n_rules(o) == 9);
        CHECK(owned_chains_get(o, "ns/a", &e));
        CHECK(e.n_names == 2 && e.n_rules == 5);
        CHECK_STREQ(e.names, "KUBE-SVC-AAAA");
        CHECK_STREQ(e.names + strlen(e.names) + 1, "KUBE-SEP-A1");
        CHECK(!owned_chains_get(o, "ns/c", &e));

        /* Replacing an entry moves the totals by the difference. */
        CHECK(owned_chains_put(o, "ns/a", "KUBE-SVC-AAAA", sizeof "KUBE-SVC-AAAA", 1, 1) == 0);
        CHECK(owned_chains_n_chains(o) == 3 && owned_chains_n_rules(o) == 5);

        /* Every entry once, with its key. */
        int seen_a = 0, seen_b = 0;
        for (size_t i = 0; owned_chains_next(o, &i, &key, &e);) {
                seen_a += strcmp(key, "ns/a") == 0 && e.n_names == 1;
                seen_b += strcmp(key, "ns/b") == 0 && e.n_names == 2;
        }
        CHECK(seen_a == 1 && seen_b == 1);

        /* NULL is an empty container. */
        CHECK(owned_chains_n_chains(NULL) == 0 && owned_chains_n_rules(NULL) == 0);
        CHECK(!owned_chains_get(NULL, "ns/a", &e));
        size_t i = 0;
        CHECK(!owned_chains_next(NULL, &i, &key, &e));
        CHECK(owned_chains_free(o) == NULL);
        CHECK(owned_chains_free(NULL) == NULL);
}

/* A full sync's fresh chains replace everything. */
static void test_merge_full(void) {
        struct owned_chains *o = two_services(), *fresh = owned_chains_new();
        struct owned_chains_entry e;

        CHECK(owned_chains_put(fresh, "ns/c", "KUBE-SVC-CCCC", sizeof "KUBE-SVC-CCCC", 1, 2) == 0);
        owned_chains_merge(o, fresh, NULL);
        CHECK(!owned_chains_get(o, "ns/a", &e) && !owned_chains_get(o, "ns/b", &e));
        CHECK(owned_chains_get(o, "ns/c", &e) && e.n_rules == 2);
        CHECK(owned_chains_n_chains(o) == 1 && owned_chains_n_rules(o) == 2);
        /* Nothing to fold: unchanged. */
        owned_chains_merge(o, NULL, NULL);
        CHECK(owned_chains_n_chains(o) == 1);
        owned_chains_free(o);
}

/* A partial sync: changed services take their fresh entries; a changed
 * service without one (deleted, or left without chains) loses its entry;
 * the others keep theirs. */
static void test_merge_partial(void) {
        struct owned_chains *o = two_services(), *fresh = owned_chains_new();
        struct owned_chains_entry e;
        struct hmap changed = HMAP_INIT;

        hmap_put(&changed, "ns/a", "ns/a");
        hmap_put(&changed, "ns/new", "ns/new");
        hmap_put(&changed, "ns/gone-before", "ns/gone-before");
        CHECK(owned_chains_put(fresh, "ns/new", NAMES2("KUBE-SVC-NNNN", "KUBE-SEP-N1"), 2, 4) == 0);
        owned_chains_merge(o, fresh, &changed);
        CHECK(!owned_chains_get(o, "ns/a", &e));
        CHECK(owned_chains_get(o, "ns/b", &e) && e.n_rules == 4);
        CHECK(owned_chains_get(o, "ns/new", &e) && e.n_names == 2);
        CHECK_STREQ(e.names, "KUBE-SVC-NNNN");
        CHECK(owned_chains_n_chains(o) == 4 && owned_chains_n_rules(o) == 8);

        /* b changes: its new entry replaces the old one. */
        hmap_done(&changed);
        hmap_put(&changed, "ns/b", "ns/b");
        fresh = owned_chains_new();
        CHECK(owned_chains_put(fresh, "ns/b", "KUBE-SVC-BBBB", sizeof "KUBE-SVC-BBBB", 1, 3) == 0);
        owned_chains_merge(o, fresh, &changed);
        CHECK(owned_chains_get(o, "ns/b", &e) && e.n_names == 1 && e.n_rules == 3);
        CHECK(owned_chains_n_chains(o) == 3 && owned_chains_n_rules(o) == 7);

        /* Without a state, fresh is only freed (ASan checks). */
        fresh = owned_chains_new();
        CHECK(owned_chains_put(fresh, "ns/x", "KUBE-SVC-XXXX", sizeof "KUBE-SVC-XXXX", 1, 1) == 0);
        owned_chains_merge(NULL, fresh, &changed);
        hmap_done(&changed);
        owned_chains_free(o);
}

int main(void) {
        TEST_RUN(test_entries_and_totals);
        TEST_RUN(test_merge_full);
        TEST_RUN(test_merge_partial);
        TEST_DONE();
}
