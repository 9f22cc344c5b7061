/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A partial sync of one table (proxy/nftables/nftsync-diff.c), on its own,
 * after a full one made the records: a service given one more endpoint
 * gets that endpoint's chain added and its service chain rewritten, in one
 * transaction; a service gone loses every chain and element it had; a key
 * no service has is nothing to do.
 */
#include "nftsync-part.h"
#include "proxy/nftables/nftsync-diff.h"
#include "proxy/nftables/nftsync-full.h"
#include "test.h"
#include "util/hmap.h"

static int partial(struct part *w, const char *key) {
        struct hmap changed = HMAP_INIT;
        hmap_put(&changed, key, NULL);
        memset(&w->st, 0, sizeof w->st);
        int r = nftsync_diff_partial(w->s, &w->ps, &changed, &w->st);
        hmap_done(&changed);
        return r == 0 ? part_send(w) : r;
}

static void test_partial(void) {
        struct part w;
        part_init(&w);
        part_pass(&w);
        CHECK(nftsync_full_table(w.s, &w.ps, false, &w.st) == 0 && part_send(&w) == 0);
        part_pass_done(&w);

        /* svc-a: 2 endpoints, then 3. */
        cluster_endpoints(w.m, "svc-a", 1, 3);
        nft_fake_journal_clear(w.k);
        CHECK(partial(&w, "ns/svc-a") == 0);
        CHECK(w.st.transactions == 1 && w.st.chains_written == 2 && w.st.chains_deleted == 0);
        CHECK(nft_fake_journal_count(w.k, "add chain") == 1);
        CHECK(nft_fake_journal_count(w.k, "flush chain") == 1);
        CHECK(nft_fake_journal_count(w.k, "svc-b") == 0);

        /* Nothing changed in it: nothing sent. */
        nft_fake_journal_clear(w.k);
        CHECK(partial(&w, "ns/svc-a") == 0);
        CHECK(w.st.transactions == 0 && nft_fake_journal_count(w.k, "") == 0);
        CHECK(partial(&w, "ns/nobody") == 0 && w.st.transactions == 0);

        /* svc-b goes: its chains and map elements with it. */
        CHECK(model_service_delete(w.m, "ns/svc-b") == 0);
        nft_fake_journal_clear(w.k);
        CHECK(partial(&w, "ns/svc-b") == 0);
        CHECK(w.st.chains_deleted > 0 && w.st.elements_deleted > 0 && w.st.chains_written == 0);
        CHECK(hmap_get(&w.s->recs, "ns/svc-b") == NULL);
        CHECK(nft_fake_journal_count(w.k, "delete chain") == w.st.chains_deleted);
        part_done(&w);
}

int main(void) {
        TEST_RUN(test_partial);
        TEST_DONE();
}
