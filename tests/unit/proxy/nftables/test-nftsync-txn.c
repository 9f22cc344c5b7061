/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Transactions and the family's batch (proxy/nftables/nftsync-txn.c), on
 * their own against the in-memory kernel: a table's sections queue whole
 * and go out only at the size bound or when sent; a send is one
 * transaction of everything queued, counted, followed by the after-commit
 * call; the kernel's refusal comes back as an error with the batch
 * emptied; the size bound of a large table grows with it.
 */
#include <errno.h>
#include <stdlib.h>

#include "apply/nftables.h"
#include "nft-fake.h"
#include "proxy/nftables/nftsync-stats.h"
#include "proxy/nftables/nftsync-txn.h"
#include "render/nftmsg.h"
#include "test.h"

struct world {
        struct nft_fake *k;
        struct nftables *nl;
        struct nftsync_batch b;
        unsigned commits_seen;
};

static void after_commit(void *ud) {
        ((struct world *) ud)->commits_seen++;
}

static void world_init(struct world *w, size_t chunk) {
        w->k = nft_fake_new();
        w->commits_seen = 0;
        if (nftables_open_on(nft_fake_open, w->k, &w->nl) < 0)
                abort();
        nftsync_batch_init(&w->b, 4, w->nl, chunk);
        w->b.after_commit = after_commit;
        w->b.after_commit_ud = w;
}

static void world_done(struct world *w) {
        nftsync_batch_done(&w->b);
        nftables_close(w->nl);
        nft_fake_free(w->k);
}

/* A table's part: the table in head, and n more messages ("add table"
 * again, which the kernel takes as it is) in its body. */
static void piece(struct nftsync_txn *t, unsigned n) {
        nftmsg_table(&t->head);
        for (unsigned i = 0; i < n; i++)
                nftmsg_table(&t->body);
}

static void test_queue_then_send(void) {
        struct world w;
        struct nftsync_txn t;
        struct nftsync_stats st = {0};

        world_init(&w, 0);
        nftsync_txn_init(&t, &w.b, 0);
        piece(&t, 0);
        CHECK(nftsync_txn_size(&t) == 1);
        CHECK(nftsync_txn_queue(&w.b, &t, 0, &st) == 0);
        CHECK(nftsync_txn_size(&t) == 0 && w.b.pend.n == 1);   /* queued, not sent */
        CHECK(st.transactions == 0 && nft_fake_genid(w.k) == 0);
        piece(&t, 2);
        CHECK(nftsync_txn_queue(&w.b, &t, 0, &st) == 0 && w.b.pend.n == 4);
        CHECK(nftsync_txn_send(&w.b, &st) == 0);
        CHECK(st.transactions == 1 && st.messages == 4 && w.commits_seen == 1);
        CHECK(nft_fake_genid(w.k) == 1 && nft_fake_txn_messages(w.k, 0) == 4);
        CHECK(w.b.pend.n == 0);
        /* Nothing queued: nothing sent. */
        CHECK(nftsync_txn_send(&w.b, &st) == 0 && st.transactions == 1 && w.commits_seen == 1);
        nftsync_txn_done(&t);
        world_done(&w);
}

/* At the size bound the batch goes out, never splitting a table's part. */
static void test_the_bound_sends(void) {
        struct world w;
        struct nftsync_txn t;
        struct nftsync_stats st = {0};

        world_init(&w, 0);
        nftsync_txn_init(&t, &w.b, 0);
        piece(&t, 1);
        CHECK(nftsync_txn_queue(&w.b, &t, 5, &st) == 0 && st.transactions == 0);
        piece(&t, 4);           /* 2 + 5 messages: over the bound of 5, all of it goes */
        CHECK(nftsync_txn_queue(&w.b, &t, 5, &st) == 0);
        CHECK(st.transactions == 1 && nft_fake_txn_messages(w.k, 0) == 7 && w.b.pend.n == 0);
        nftsync_txn_done(&t);
        world_done(&w);
}

static void test_a_refusal_comes_back(void) {
        struct world w;
        struct nftsync_txn t;
        struct nftsync_stats st = {0};

        world_init(&w, 0);
        nftsync_txn_init(&t, &w.b, 0);
        piece(&t, 1);
        nft_fake_fail_commit(w.k, 1, -ENOSPC);
        CHECK(nftsync_txn_queue(&w.b, &t, 0, &st) == 0);
        CHECK(nftsync_txn_send(&w.b, &st) == -ENOSPC);
        CHECK(nft_fake_genid(w.k) == 0 && nft_fake_refused(w.k) == 1);
        CHECK(w.b.pend.n == 0 && st.transactions == 1);        /* tried, counted, emptied */
        CHECK(w.commits_seen == 1);
        nftsync_txn_done(&t);
        world_done(&w);
}

static void test_chunk(void) {
        struct world w;
        world_init(&w, 1000);
        CHECK(nftsync_txn_chunk(&w.b, 100) == 1000);            /* a small table: the bound */
        CHECK(nftsync_txn_chunk(&w.b, 80000) == 30000);         /* a large one: about eight pieces */
        w.b.chunk = 0;
        CHECK(nftsync_txn_chunk(&w.b, 80000) == 0);             /* one transaction */
        world_done(&w);
}

int main(void) {
        TEST_RUN(test_queue_then_send);
        TEST_RUN(test_the_bound_sends);
        TEST_RUN(test_a_refusal_comes_back);
        TEST_RUN(test_chunk);
        TEST_DONE();
}
