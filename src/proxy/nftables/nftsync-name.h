/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The chain and set names of a service's record, kept without what they
 * repeat (nftsync-name.c says how), and read back in order. Pure.
 */
#include <stdbool.h>
#include <stddef.h>

#define NFTSYNC_NAME_MAX 256            /* NFT_NAME_MAXLEN, NUL included */
#define NFTSYNC_NAME_REST_MAX (2 * NFTSYNC_NAME_MAX)
/* A coded name is at most this much longer than the name. */
#define NFTSYNC_NAME_CODED_EXTRA 12

/* The coded form of name (a name of the service key's) after a name whose
 * rest was prev ("" for the first), at out (strlen(name) +
 * NFTSYNC_NAME_CODED_EXTRA bytes suffice); returns its size, NUL included.
 * *ret_rest: name's rest, the next name's prev (it points into name). */
size_t nftsync_name_pack(const char *key, const char *name, const char *prev, char *out, const char **ret_rest);

/* Reads coded names in order. */
struct nftsync_name_it {
        const char *p;                  /* the next coded name */
        const char *prefix;             /* the current name's, NULL: kept whole (in rest) */
        const char *hash;               /* its 8 characters when kept, else NULL (derived) */
        size_t len;                     /* of rest */
        char rest[NFTSYNC_NAME_REST_MAX];
};

/* Before the first of the names packed one after another at coded. */
void nftsync_name_it_init(struct nftsync_name_it *it, const char *coded);
/* Moves to the next name (the first after nftsync_name_it_init()). */
void nftsync_name_next(struct nftsync_name_it *it);
/* The length of the current name, whole (key: the service's). */
size_t nftsync_name_len(const struct nftsync_name_it *it, const char *key);
/* The current name, whole, in out (size bytes: nftsync_name_len() + 1
 * suffice). Returns out. */
const char *nftsync_name_unpack(const struct nftsync_name_it *it, const char *key, char *out, size_t size);
/* Whether the current name is name (the renderer's), without making it
 * whole. */
bool nftsync_name_equal(const struct nftsync_name_it *it, const char *key, const char *name);
