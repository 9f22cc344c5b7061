/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The records of nftables mode's sync and the code of their names: every
 * name packed comes back whole and in order, compare equal to itself and
 * to nothing else, and takes less room than it did; a record gives back
 * its names, digests, timeouts and elements, and each element's id leads
 * back to it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/nftables/nftsync-name.h"
#include "proxy/nftables/nftsync-rec.h"
#include "render/chain.h"
#include "test.h"

#define KEY "a-namespace/a-service"

/* A name as the renderer makes it: prefix, the 8 characters hashed from
 * key and rest, "-", key, rest. */
static char *made(const char *prefix, const char *rest) {
        char base[512], hash[9], *out = malloc(1024);
        snprintf(base, sizeof base, "%s%s", KEY, rest);
        chain_hash_str(base, 8, hash);
        snprintf(out, 1024, "%s%s-%s%s", prefix, hash, KEY, rest);
        return out;
}

/* A rest that makes a body as long as the renderer cuts one to (240
 * characters, ending in "..."), in out. */
static const char *cut_rest(char fill, char out[300]) {
        size_t len = 240 - 9 - strlen(KEY);
        memset(out, fill, len - 3);
        memcpy(out + len - 3, "...", 4);
        return out;
}

/* Packs names one after the other; returns the coded bytes (free()). */
static char *pack_all(char *const *names, size_t n, size_t *ret_len) {
        size_t bound = 1, len = 0;
        for (size_t i = 0; i < n; i++)
                bound += strlen(names[i]) + NFTSYNC_NAME_CODED_EXTRA;
        char *coded = malloc(bound);
        const char *prev = "";
        for (size_t i = 0; i < n; i++)
                len += nftsync_name_pack(KEY, names[i], prev, coded + len, &prev);
        *ret_len = len;
        return coded;
}

/* A service's names as a record has them: chains, then sets, some with
 * the 8 characters derived, some kept (a cut name), some whole. */
static size_t service_names(char **v) {
        size_t n = 0;
        char long_rest[300];
        cut_rest('x', long_rest);
        v[n++] = made("service-", "/tcp/http");
        v[n++] = made("external-", "/tcp/http");
        for (int i = 0; i < 12; i++) {
                char rest[64];
                snprintf(rest, sizeof rest, "/tcp/http__10.244.%d.%d/8080", i / 5, 10 + i);
                v[n++] = made("endpoint-", rest);
        }
        /* As long as the renderer cuts them: the 8 characters are kept. */
        v[n++] = made("endpoint-", long_rest);
        v[n++] = strdup("nat-prerouting");              /* no prefix: whole */
        v[n++] = strdup("service-not-of-this-key");     /* a prefix, not the shape */
        v[n++] = made("affinity-", "/tcp/http__10.244.0.10/8080");
        v[n++] = made("firewall-", "/tcp/http");
        v[n++] = made("local-", "/tcp/http");
        return n;
}

static void test_names_round_trip(void) {
        char *names[32];
        size_t n = service_names(names), coded_len, plain = 0;
        char *coded = pack_all(names, n, &coded_len);
        struct nftsync_name_it it;

        nftsync_name_it_init(&it, coded);
        for (size_t i = 0; i < n; i++) {
                char out[NFTSYNC_NAME_REST_MAX + 64];
                nftsync_name_next(&it);
                CHECK(nftsync_name_len(&it, KEY) == strlen(names[i]));
                CHECK_STREQ(nftsync_name_unpack(&it, KEY, out, sizeof out), names[i]);
                CHECK(nftsync_name_equal(&it, KEY, names[i]));
                /* Not equal to its neighbours, nor to itself a character off. */
                CHECK(!nftsync_name_equal(&it, KEY, names[(i + 1) % n]));
                char other[1024];
                snprintf(other, sizeof other, "%s", names[i]);
                other[strlen(other) - 1] ^= 1;
                CHECK(!nftsync_name_equal(&it, KEY, other));
                plain += strlen(names[i]) + 1;
        }
        CHECK(it.p == coded + coded_len);
        /* The service's endpoint chains share nearly everything. */
        CHECK(coded_len * 3 < plain);
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(coded);
}

/* A kept hash is compared; a derived one follows from the rest. */
static void test_names_kept_hash(void) {
        char rest[300], *name;
        name = made("endpoint-", cut_rest('y', rest));
        char *v[1] = {name};
        size_t len;
        char *coded = pack_all(v, 1, &len);
        struct nftsync_name_it it;
        nftsync_name_it_init(&it, coded);
        nftsync_name_next(&it);
        CHECK(it.hash != NULL && memcmp(it.hash, name + strlen("endpoint-"), 8) == 0);
        name[strlen("endpoint-")] ^= 1;         /* another hash, same rest */
        CHECK(!nftsync_name_equal(&it, KEY, name));
        free(name);
        free(coded);

        name = made("service-", "/udp/dns");
        v[0] = name;
        coded = pack_all(v, 1, &len);
        nftsync_name_it_init(&it, coded);
        nftsync_name_next(&it);
        CHECK(it.hash == NULL && it.prefix != NULL);
        CHECK(len < strlen(name) / 2);
        free(name);
        free(coded);
}

/* A record that was written over (or a bug) must not take the reader
 * out of its buffer: the lengths it claims are bounded. */
static void test_names_bad_code(void) {
        /* code 0 (whole), shared start 200 and end 200 of nothing before */
        const char bad[] = {0, (char) 200, (char) 200, 'a', 'b', 'c', '\0', 1, (char) 255, (char) 255, 'd', '\0'};
        struct nftsync_name_it it;
        char out[NFTSYNC_NAME_REST_MAX + 64];
        nftsync_name_it_init(&it, bad);
        nftsync_name_next(&it);
        CHECK_STREQ(it.rest, "abc");
        nftsync_name_next(&it);
        CHECK(it.len <= 4 && strlen(it.rest) == it.len);
        CHECK(nftsync_name_len(&it, KEY) < sizeof out);
        nftsync_name_unpack(&it, KEY, out, sizeof out);
        CHECK(strncmp(out, "service-", 8) == 0);
}

static void test_record_round_trip(void) {
        char *names[32];
        size_t n = service_names(names), coded_len;
        char *coded = pack_all(names, n, &coded_len);
        const size_t n_chains = n - 3, n_sets = 3;
        const char *ids[] = {"\002ABCDEFGHIJKLMNOP", "\001CCCCCC", "my-set/QQQQ"};
        size_t id_bytes = 0;
        for (size_t i = 0; i < 3; i++)
                id_bytes += strlen(ids[i]) + 1;
        char *end;
        struct nftsync_rec *r = nftsync_rec_new(KEY, n_chains, n_sets, coded, coded_len, 3, id_bytes, &end);
        for (size_t i = 0; i < n_chains; i++)
                nftsync_rec_hashes(r)[i] = 1000 + i;
        for (size_t i = 0; i < n_sets; i++)
                nftsync_rec_timeouts(r)[i] = 600 + (uint32_t) i;
        CHECK(nftsync_rec_first_id(r) == NULL);
        const char *kept[3];
        for (size_t i = 0; i < 3; i++)
                kept[i] = nftsync_rec_add_elem(r, &end, ids[i], 77 + i);
        CHECK_STREQ(r->key, KEY);
        CHECK(r->n_chains == n_chains && r->n_sets == n_sets && r->n_elems == 3);

        char **back = nftsync_rec_names(r);
        for (size_t i = 0; i < n; i++)
                CHECK_STREQ(back[i], names[i]);
        CHECK(back[n] == NULL);
        free(back);
        for (size_t i = 0; i < n_chains; i++)
                CHECK(nftsync_rec_hashes(r)[i] == 1000 + i);
        for (size_t i = 0; i < n_sets; i++)
                CHECK(nftsync_rec_timeouts(r)[i] == 600 + i);
        const char *id = nftsync_rec_first_id(r);
        for (size_t i = 0; i < 3; i++, id = i < 3 ? nftsync_rec_next_id(id) : NULL) {
                CHECK(id == kept[i]);
                CHECK_STREQ(id, ids[i]);
                CHECK(nftsync_rec_values(r)[i] == 77 + i);
                CHECK(nftsync_rec_of_id(id) == r);
        }
        /* Everything fits where it was counted. */
        CHECK((size_t) (end - (char *) r) > sizeof *r && (size_t) (end - r->key) == strlen(KEY) + 1 + 3 * 4 + id_bytes);
        nftsync_rec_free(r);
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(coded);
}

/* A record of nothing: the fixed part of an empty table. */
static void test_record_empty(void) {
        char *end;
        struct nftsync_rec *r = nftsync_rec_new("", 0, 0, "", 0, 0, 0, &end);
        char **names = nftsync_rec_names(r);
        CHECK(names[0] == NULL && nftsync_rec_first_id(r) == NULL && *r->key == '\0');
        free(names);
        CHECK(nftsync_rec_free(r) == NULL);
}

int main(void) {
        TEST_RUN(test_names_round_trip);
        TEST_RUN(test_names_kept_hash);
        TEST_RUN(test_names_bad_code);
        TEST_RUN(test_record_round_trip);
        TEST_RUN(test_record_empty);
        TEST_DONE();
}
