/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A full sync of one table (proxy/nftables/nftsync-full.c), on its own: on
 * an empty kernel it writes every chain and records every service; over a
 * table that already holds the same it reads the chains back and writes
 * none; a chain someone else emptied is the one written again; a rebuild
 * deletes the table and writes it all in one transaction.
 */
#include "nftsync-part.h"
#include "proxy/nftables/nftsync-full.h"
#include "proxy/nftables/nftsync-rec.h"
#include "render/nftmsg.h"
#include "util/hmap.h"
#include "test.h"

static void test_cold_then_kept(void) {
        struct part w;
        part_init(&w);
        part_pass(&w);
        CHECK(nftsync_full_table(w.s, &w.ps, false, &w.st) == 0 && part_send(&w) == 0);
        size_t written = w.st.chains_written;
        CHECK(written > 10 && w.st.chains_kept == 0 && w.st.transactions == 1);
        CHECK(nft_fake_journal_count(w.k, "add chain") == written);
        CHECK(w.s->recs.len == 6);      /* svc-a..svc-e and the fixed part */

        /* The same model again: every chain read back, none written. */
        nft_fake_journal_clear(w.k);
        part_pass_done(&w);
        part_pass(&w);
        CHECK(nftsync_full_table(w.s, &w.ps, false, &w.st) == 0 && part_send(&w) == 0);
        CHECK(w.st.chains_written == 0 && w.st.chains_kept == written);
        CHECK(nft_fake_journal_count(w.k, "add chain") == 0 && nft_fake_journal_count(w.k, "add rule") == 0);
        part_pass_done(&w);
        part_done(&w);
}

/* Someone empties one of a service's chains: the full sync finds it by its
 * rules' digest and writes that one again, only. */
static void test_emptied_chain(void) {
        struct part w;
        char err[256];
        part_init(&w);
        part_pass(&w);
        CHECK(nftsync_full_table(w.s, &w.ps, false, &w.st) == 0 && part_send(&w) == 0);
        size_t written = w.st.chains_written;
        char **names = nftsync_rec_names(hmap_get(&w.s->recs, "ns/svc-a"));
        struct nftmsg m;
        nftmsg_init(&m, 4, 100);
        nftmsg_batch_begin(&m);
        nftmsg_chain_flush(&m, names[0]);
        nftmsg_batch_end(&m);
        CHECK(nftables_commit(w.nl, &m, err, sizeof err) == 0);
        nftmsg_done(&m);

        nft_fake_journal_clear(w.k);
        part_pass_done(&w);
        part_pass(&w);
        CHECK(nftsync_full_table(w.s, &w.ps, false, &w.st) == 0 && part_send(&w) == 0);
        CHECK(w.st.chains_written == 1 && w.st.chains_kept == written - 1);
        CHECK(nft_fake_journal_count(w.k, names[0]) >= 1);
        free(names);
        part_pass_done(&w);
        part_done(&w);
}

static void test_rebuild(void) {
        struct part w;
        part_init(&w);
        part_pass(&w);
        CHECK(nftsync_full_table(w.s, &w.ps, false, &w.st) == 0 && part_send(&w) == 0);
        size_t written = w.st.chains_written;
        nft_fake_journal_clear(w.k);
        part_pass_done(&w);
        part_pass(&w);
        CHECK(nftsync_full_table(w.s, &w.ps, true, &w.st) == 0 && part_send(&w) == 0);
        CHECK(w.st.chains_written == written && w.st.chains_kept == 0 && w.st.transactions == 1);
        CHECK(nft_fake_journal_count(w.k, "delete table") == 1);
        part_pass_done(&w);
        part_done(&w);
}

int main(void) {
        TEST_RUN(test_cold_then_kept);
        TEST_RUN(test_emptied_chain);
        TEST_RUN(test_rebuild);
        TEST_DONE();
}
