/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A service's record (proxy/nftables/nftsync-rec.c), pure: one allocation
 * holding digests, timeouts, the coded names (nftsync-name.h) and the
 * elements; names come back whole, chains then sets; each element id leads
 * back to its record; a record of nothing but its key works too.
 */
#include <stdlib.h>
#include <string.h>

#include "proxy/nftables/nftsync-name.h"
#include "proxy/nftables/nftsync-rec.h"
#include "test.h"

static void test_record(void) {
        const char *key = "ns/web";
        /* Names the renderer does not make are kept whole (nftsync-name.c
         * derives the others' hashes, which test-nftsync-name checks). */
        const char *names[] = {"chain-ns/web/tcp/http__10.0.0.1/80", "chain-ns/web/tcp/http__10.0.0.2/80",
                               "set-ns/web/tcp/http__10.0.0.2/80"};
        char coded[3 * (NFTSYNC_NAME_MAX + NFTSYNC_NAME_CODED_EXTRA)];
        size_t len = 0;
        const char *prev = "", *rest;
        for (size_t i = 0; i < 3; i++) {
                len += nftsync_name_pack(key, names[i], prev, coded + len, &rest);
                prev = rest;
        }
        const char *ids[] = {"service-ips/AAAA", "service-nodeports/BBBB"};
        char *end;
        struct nftsync_rec *r = nftsync_rec_new(key, 2, 1, coded, len, 2, strlen(ids[0]) + strlen(ids[1]) + 2, &end);
        CHECK(r && strcmp(r->key, key) == 0 && r->n_chains == 2 && r->n_sets == 1 && r->n_elems == 0);
        nftsync_rec_hashes(r)[0] = 11;
        nftsync_rec_hashes(r)[1] = 22;
        nftsync_rec_timeouts(r)[0] = 10800;
        const char *id0 = nftsync_rec_add_elem(r, &end, ids[0], 100);
        const char *id1 = nftsync_rec_add_elem(r, &end, ids[1], 200);
        CHECK(r->n_elems == 2 && strcmp(id0, ids[0]) == 0 && strcmp(id1, ids[1]) == 0);
        CHECK(nftsync_rec_of_id(id0) == r && nftsync_rec_of_id(id1) == r);
        CHECK(nftsync_rec_first_id(r) == id0 && nftsync_rec_next_id(id0) == id1);
        CHECK(nftsync_rec_values(r)[0] == 100 && nftsync_rec_values(r)[1] == 200);
        /* What was filled in is still there after the elements went in. */
        CHECK(nftsync_rec_hashes(r)[1] == 22 && nftsync_rec_timeouts(r)[0] == 10800);

        char **whole = nftsync_rec_names(r);
        for (size_t i = 0; i < 3; i++)
                CHECK(whole[i] && strcmp(whole[i], names[i]) == 0);
        CHECK(whole[3] == NULL);
        free(whole);
        CHECK(nftsync_rec_free(r) == NULL);
}

static void test_empty_record(void) {
        char *end;
        struct nftsync_rec *r = nftsync_rec_new("ns/none", 0, 0, "", 0, 0, 0, &end);
        CHECK(r && r->n_chains == 0 && r->n_elems == 0 && nftsync_rec_first_id(r) == NULL);
        char **whole = nftsync_rec_names(r);
        CHECK(whole && whole[0] == NULL);
        free(whole);
        nftsync_rec_free(r);
        CHECK(nftsync_rec_first_id(NULL) == NULL);
        CHECK(nftsync_rec_free(NULL) == NULL);
}

int main(void) {
        TEST_RUN(test_record);
        TEST_RUN(test_empty_record);
        TEST_DONE();
}
