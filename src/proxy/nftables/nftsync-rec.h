/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A service's record: what it put in the kernel, in one allocation. The
 * struct, then its chains' digests (nftsync_rec_hashes()), its sets'
 * timeouts (nftsync_rec_timeouts()), the names of its chains then sets
 * (names_len bytes, each coded against the one before it:
 * proxy/nftables/nftsync-name.h), its elements' value digests
 * (nftsync_rec_values()), then its key and its elements' ids, each after
 * 4 bytes that say how far it is from the record's start
 * (nftsync_rec_of_id(): a table's owners map keeps only the id). 50k
 * services × 10 endpoints hold 600k chain names.
 *
 * The layout is here, with its accessors inline, because the sync's files
 * all read records, on their hottest paths.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct nftsync_rec {
        char *key;
        uint32_t n_chains, n_sets, n_elems, names_len;
};

#define NFTSYNC_ALIGN8(x) (((x) + 7) & ~(size_t) 7)

static inline uint64_t *nftsync_rec_hashes(const struct nftsync_rec *r) {
        return (uint64_t *) (r + 1);
}

static inline uint32_t *nftsync_rec_timeouts(const struct nftsync_rec *r) {
        return (uint32_t *) (nftsync_rec_hashes(r) + r->n_chains);
}

static inline const char *nftsync_rec_names_coded(const struct nftsync_rec *r) {
        return (const char *) (nftsync_rec_timeouts(r) + r->n_sets);
}

static inline uint64_t *nftsync_rec_values(const struct nftsync_rec *r) {
        size_t off = NFTSYNC_ALIGN8(sizeof *r + r->n_chains * sizeof(uint64_t) + r->n_sets * sizeof(uint32_t) +
                                    r->names_len);
        return (uint64_t *) (void *) ((char *) r + off);
}

/* The id of the record's first element (NULL without a record or
 * elements), and of the next after id. */
static inline const char *nftsync_rec_first_id(const struct nftsync_rec *r) {
        return r && r->n_elems ? r->key + strlen(r->key) + 1 + sizeof(uint32_t) : NULL;
}

static inline const char *nftsync_rec_next_id(const char *id) {
        return id + strlen(id) + 1 + sizeof(uint32_t);
}

/* The record that holds the id. */
static inline struct nftsync_rec *nftsync_rec_of_id(const char *id) {
        uint32_t back;
        memcpy(&back, id - sizeof back, sizeof back);
        return (struct nftsync_rec *) (void *) (id - back);
}

/* A new record of key: room for n_chains digests and n_sets timeouts
 * (the caller fills them), the names coded at coded (names_len bytes,
 * copied), and up to n_elems elements whose ids take id_bytes, their NULs
 * included. *ret_end: where the first element goes
 * (nftsync_rec_add_elem()). Aborts when out of memory. */
struct nftsync_rec *nftsync_rec_new(const char *key, size_t n_chains, size_t n_sets, const char *coded,
                                    size_t names_len, size_t n_elems, size_t id_bytes, char **ret_end);
/* Adds an element (its id and value digest) at *end, which moves past it.
 * Returns the record's copy of the id. */
const char *nftsync_rec_add_elem(struct nftsync_rec *r, char **end, const char *id, uint64_t value);
/* The record's names, whole, in one allocation (free() it): chains first,
 * then sets, then NULL. Aborts when out of memory. */
char **nftsync_rec_names(const struct nftsync_rec *r);
struct nftsync_rec *nftsync_rec_free(struct nftsync_rec *r);
