/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A resync of one table (proxy/nftables/nftsync-resync.c), on its own,
 * after a full sync made the records: with nothing changed it sends
 * nothing and lists nothing (the kernel's count of chains agrees with the
 * records); a chain someone added makes the count differ, the table is
 * listed and the stray removed; a service changed behind the change
 * tracking's back is diffed and written.
 */
#include "nftsync-part.h"
#include "proxy/nftables/nftsync-full.h"
#include "proxy/nftables/nftsync-resync.h"
#include "render/nftmsg.h"
#include "test.h"

static int resync(struct part *w) {
        part_pass(w);
        int r = nftsync_resync_table(w->s, &w->ps, &w->st);
        if (r == 0)
                r = part_send(w);
        part_pass_done(w);
        return r;
}

static void test_resync(void) {
        struct part w;
        char err[256];
        part_init(&w);
        part_pass(&w);
        CHECK(nftsync_full_table(w.s, &w.ps, false, &w.st) == 0 && part_send(&w) == 0);
        part_pass_done(&w);
        uint32_t gen = nft_fake_genid(w.k);

        CHECK(resync(&w) == 0);
        CHECK(w.st.messages == 0 && w.st.chains_written == 0 && !w.st.listed_chains);
        CHECK(nft_fake_genid(w.k) == gen);

        /* A chain of someone else's in kproxy's table. */
        struct nftmsg m;
        struct nftir_chain stray = {.name = {.prefix = "someone-elses"}};
        nftmsg_init(&m, 4, 100);
        nftmsg_batch_begin(&m);
        nftmsg_chain(&m, &stray);
        nftmsg_batch_end(&m);
        CHECK(nftables_commit(w.nl, &m, err, sizeof err) == 0);
        nftmsg_done(&m);
        nft_fake_journal_clear(w.k);
        CHECK(resync(&w) == 0);
        CHECK(w.st.listed_chains && w.st.chains_deleted == 1 && w.st.chains_written == 0);
        CHECK(nft_fake_journal_count(w.k, "delete chain ip kube-proxy someone-elses") == 1);

        /* The model changed without the change being tracked. */
        cluster_endpoints(w.m, "svc-a", 1, 3);
        nft_fake_journal_clear(w.k);
        CHECK(resync(&w) == 0);
        CHECK(w.st.chains_written == 2 && nft_fake_journal_count(w.k, "add chain") == 1);
        part_done(&w);
}

int main(void) {
        TEST_RUN(test_resync);
        TEST_DONE();
}
