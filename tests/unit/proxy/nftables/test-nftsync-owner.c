/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Map keys and their owners (proxy/nftables/nftsync-owner.c), on their
 * own: the first service to claim a key owns it; a second claimant is
 * refused, counted, and waits for it; a key let go of passes to the one
 * waiting, once; a value that changed is deleted and added; forgetting
 * forgets all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/nftables/nftsync-elemid.h"
#include "proxy/nftables/nftsync-owner.h"
#include "proxy/nftables/nftsync-rec.h"
#include "proxy/nftables/nftsync-stats.h"
#include "proxy/nftables/nftsync-txn.h"
#include "proxy/nftables/nftsync-unit.h"
#include "test.h"
#include "util/hmap.h"

/* The id of 10.96.0.k in service-ips. */
static char ids[8][NFTSYNC_ELEMID_MAX];
static const char *id(unsigned k) {
        uint8_t key[4] = {10, 96, 0, (uint8_t) k};
        nftsync_elemid("service-ips", key, sizeof key, ids[k]);
        return ids[k];
}

/* A unit holding only elements (ids and values; no bytes), as a render
 * would leave one for the owners to claim. */
static void unit_with(struct nftsync_unit *u, struct nftmsg *set_ids, const unsigned *keys, const uint64_t *values,
                      size_t n) {
        nftsync_unit_init(u, 4, 0, set_ids);
        u->el = calloc(n, sizeof *u->el);
        u->n_el = u->cap_el = n;
        for (size_t i = 0; i < n; i++) {
                snprintf(u->el[i].id, sizeof u->el[i].id, "%s", id(keys[i]));
                u->el[i].value = values[i];
        }
}

/* A record of key with room for the unit's elements, claimed. */
static struct nftsync_rec *claim(struct nftsync_owners *o, const char *key, const struct nftsync_unit *u,
                                 struct nftsync_txn *t, const struct hmap *old, struct nftsync_stats *st) {
        size_t bytes = 0;
        char *end;
        for (size_t i = 0; i < u->n_el; i++)
                bytes += strlen(u->el[i].id) + 1;
        struct nftsync_rec *r = nftsync_rec_new(key, 0, 0, "", 0, u->n_el, bytes, &end);
        nftsync_owner_claim(o, r, end, u, t, old, st);
        return r;
}

static void test_first_claim_wins_and_the_other_waits(void) {
        struct nftsync_batch b;
        struct nftsync_txn t;
        struct nftsync_owners o;
        struct nftsync_stats st = {0};
        struct nftsync_unit ua, ub;
        static const unsigned ka[] = {1, 2}, kb[] = {2, 3, 3};
        static const uint64_t va[] = {1, 2}, vb[] = {20, 3, 3};

        nftsync_batch_init(&b, 4, NULL, 0);
        nftsync_txn_init(&t, &b, 0);
        nftsync_owners_init(&o);
        unit_with(&ua, &b.ids, ka, va, 2);
        unit_with(&ub, &b.ids, kb, vb, 3);

        struct nftsync_rec *a = claim(&o, "ns/a", &ua, &t, NULL, &st);
        CHECK(st.conflicts == 0 && st.elements_added == 2);
        struct nftsync_rec *bb = claim(&o, "ns/b", &ub, &t, NULL, &st);
        /* k2 stays a's; k3 is b's, once though the unit has it twice. */
        CHECK(st.conflicts == 1 && st.elements_added == 3);
        CHECK(nftsync_owner_of(&o, id(1)) == a && nftsync_owner_of(&o, id(2)) == a);
        CHECK(nftsync_owner_of(&o, id(3)) == bb && nftsync_owner_of(&o, id(4)) == NULL);

        /* a lets go of k2: b is the one waiting, once. */
        nftsync_owner_release(&o, id(2));
        CHECK(nftsync_owner_of(&o, id(2)) == NULL);
        char *w = nftsync_owner_take_waiter(&o, id(2));
        CHECK(w && strcmp(w, "ns/b") == 0);
        free(w);
        CHECK(nftsync_owner_take_waiter(&o, id(2)) == NULL);
        CHECK(nftsync_owner_take_waiter(&o, id(1)) == NULL);

        nftsync_owners_forget(&o);
        CHECK(nftsync_owner_of(&o, id(1)) == NULL && nftsync_owner_of(&o, id(3)) == NULL);
        nftsync_rec_free(a);
        nftsync_rec_free(bb);
        nftsync_unit_done(&ua);
        nftsync_unit_done(&ub);
        nftsync_txn_done(&t);
        nftsync_batch_done(&b);
}

/* A service claiming again (a diff): a key with the value it had is
 * neither deleted nor added; a changed value is both. */
static void test_a_changed_value_is_replaced(void) {
        struct nftsync_batch b;
        struct nftsync_txn t;
        struct nftsync_owners o;
        struct nftsync_stats st = {0};
        struct nftsync_unit u;
        struct hmap old = HMAP_INIT;
        static const unsigned k[] = {1, 2};
        static const uint64_t v[] = {1, 5};
        uint64_t was1 = 1, was2 = 2;

        nftsync_batch_init(&b, 4, NULL, 0);
        nftsync_txn_init(&t, &b, 0);
        nftsync_owners_init(&o);
        unit_with(&u, &b.ids, k, v, 2);
        hmap_put(&old, id(1), &was1);
        hmap_put(&old, id(2), &was2);
        struct nftsync_rec *r = claim(&o, "ns/a", &u, &t, &old, &st);
        CHECK(st.elements_added == 1);          /* k2 only */
        CHECK(t.del_el.n == 1 && t.add_el.n == 0);      /* the unit has no bytes: only the deletion is a message */
        CHECK(nftsync_owner_of(&o, id(1)) == r && nftsync_owner_of(&o, id(2)) == r);

        hmap_done(&old);
        nftsync_owners_forget(&o);
        nftsync_rec_free(r);
        nftsync_unit_done(&u);
        nftsync_txn_done(&t);
        nftsync_batch_done(&b);
}

int main(void) {
        TEST_RUN(test_first_claim_wins_and_the_other_waits);
        TEST_RUN(test_a_changed_value_is_replaced);
        TEST_DONE();
}
