/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One table's sync state (proxy/nftables/nftsync-table.c): a new one is
 * named for its index and takes the family of the batch it shares, with
 * no record; after a full sync of the table it holds a record per service
 * and the owners of their map keys, and forgetting lets go of all of them
 * and leaves the table usable for the next full sync, which records the
 * same again.
 */
#include "nftsync-part.h"
#include "proxy/nftables/nftsync-full.h"
#include "proxy/nftables/nftsync-rec.h"
#include "test.h"

static void test_new_names_the_table(void) {
        struct part w;
        part_init(&w);
        CHECK_STREQ(w.s->tname, "kube-proxy");
        CHECK(w.s->family == 4 && w.s->table == 0 && w.s->recs.len == 0 && w.s->batch == &w.b);

        struct nftsync_table *shard = nftsync_table_new(3, w.nl, &w.b);
        CHECK_STREQ(shard->tname, "kube-proxy-3");
        CHECK(shard->table == 3 && shard->family == 4 && shard->nl == w.nl);
        CHECK(nftsync_table_free(shard) == NULL);
        CHECK(nftsync_table_free(NULL) == NULL);
        part_done(&w);
}

/* An element id some record of the table holds, copied; NULL if none. */
static char *some_owned_id(const struct nftsync_table *s) {
        const char *k;
        void *v;
        for (size_t i = 0; hmap_next(&s->recs, &i, &k, &v);) {
                const char *id = nftsync_rec_first_id(v);
                if (id)
                        return strdup(id);
        }
        return NULL;
}

static void test_forget_lets_go_of_records_and_owners(void) {
        struct part w;
        part_init(&w);
        part_pass(&w);
        CHECK(nftsync_full_table(w.s, &w.ps, false, &w.st) == 0 && part_send(&w) == 0);
        CHECK(w.s->recs.len == 6);
        char *id = some_owned_id(w.s);
        CHECK(id && nftsync_owner_of(&w.s->owners, id) != NULL);

        nftsync_table_forget(w.s);
        CHECK(w.s->recs.len == 0 && w.s->owners.ids.len == 0);
        CHECK(id && nftsync_owner_of(&w.s->owners, id) == NULL);

        /* The next full sync finds the table as written and records it all again. */
        part_pass_done(&w);
        part_pass(&w);
        CHECK(nftsync_full_table(w.s, &w.ps, false, &w.st) == 0 && part_send(&w) == 0);
        CHECK(w.s->recs.len == 6 && w.st.chains_written == 0 && w.st.chains_kept > 10);
        CHECK(id && nftsync_owner_of(&w.s->owners, id) != NULL);
        free(id);
        part_pass_done(&w);
        part_done(&w);
}

int main(void) {
        TEST_RUN(test_new_names_the_table);
        TEST_RUN(test_forget_lets_go_of_records_and_owners);
        TEST_DONE();
}
