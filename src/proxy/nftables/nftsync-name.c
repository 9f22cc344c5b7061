/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the names' code: a record keeps its service's chain and set
 * names without what they repeat. "<prefix><8 characters>-<key><rest>" is
 * kept as a code for the prefix and the rest: the 8 characters are the
 * renderer's hash of "<key><rest>" (render/nft.c, upstream's
 * hashAndTruncate()), derived again when the name is needed whole; a name
 * cut short (240 characters and "...") keeps them. Other names are kept
 * whole, as their rest. And a rest is kept as the lengths of what its start
 * and its end share with the rest before it, then what is between: a
 * service's endpoint chains differ from one another in a few characters of
 * an address. Each name is
 *
 *   [code][shared start][shared end][8 characters if kept][between]\0
 *
 * code 0: kept whole; 1 + k: prefix k, hash derived; 1 + NAME_PREFIXES
 * + k: prefix k, hash kept. Together they were two thirds of the records'
 * memory at 10k services × 10 endpoints.
 */
#include "proxy/nftables/nftsync-name.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "render/chain.h"
#include "util/strb.h"

static const char *const name_prefixes[] = {"service-", "local-", "external-", "firewall-", "endpoint-",
                                            "affinity-"};
#define NAME_PREFIXES (sizeof name_prefixes / sizeof *name_prefixes)
#define NAME_BODY_CUT 240       /* the renderer's bodies: this long when cut */
#define NAME_CODES (2 * NAME_PREFIXES)

/* The renderer's 8 characters for key and rest, in out[9]. */
static void name_hash(const char *key, const char *rest, char out[9]) {
        char base[NFTSYNC_NAME_MAX];
        struct strb b = strb_init(base, sizeof base);
        strb_puts(&b, key);
        strb_puts(&b, rest);
        chain_hash_str(base, 8, out);
}

/* Splits name (key: the record's) into its code, its 8 characters when
 * kept (*ret_hash, else NULL) and its rest (*ret_rest, in name). */
static unsigned name_split(const char *key, const char *name, const char **ret_hash, const char **ret_rest) {
        size_t kl = strlen(key), n = strlen(name);
        *ret_hash = NULL;
        *ret_rest = name;
        for (size_t k = 0; k < NAME_PREFIXES && n < NFTSYNC_NAME_MAX; k++) {
                size_t pl = strlen(name_prefixes[k]);
                const char *h = name + pl;
                if (strncmp(name, name_prefixes[k], pl) != 0 || strnlen(h, 9) < 9 || h[8] != '-' ||
                    strncmp(h + 9, key, kl) != 0)
                        continue;
                *ret_rest = h + 9 + kl;
                if (n - pl < NAME_BODY_CUT) {
#ifdef __SANITIZE_ADDRESS__
                        /* The sanitizer build of the tests checks that the hash is
                         * the derived one; elsewhere the SHA-256 per name would
                         * add 10% to kproxy's CPU in a cold full sync (measured). */
                        char want[9];
                        name_hash(key, *ret_rest, want);
                        assert(memcmp(h, want, 8) == 0);
#endif
                        return (unsigned) (1 + k);
                }
                *ret_hash = h;
                return (unsigned) (1 + NAME_PREFIXES + k);
        }
        return 0;
}

/* The coded form of name after a name whose rest was prev ("" for the
 * first), at out; returns its size, NUL included.
 * *ret_rest: name's rest, the next name's prev. */
size_t nftsync_name_pack(const char *key, const char *name, const char *prev, char *out, const char **ret_rest) {
        const char *hash, *rest;
        unsigned code = name_split(key, name, &hash, &rest);
        size_t rl = strlen(rest), pl = strlen(prev), shared = 0, suffix = 0;
        while (shared < 255 && rest[shared] && rest[shared] == prev[shared])
                shared++;
        while (suffix < 255 && suffix < rl - shared && suffix < pl - shared &&
               rest[rl - 1 - suffix] == prev[pl - 1 - suffix])
                suffix++;
        size_t middle = rl - shared - suffix, size = 3 + (hash ? 8 : 0) + middle + 1;
        *ret_rest = rest;
        assert(rl < NFTSYNC_NAME_REST_MAX);
        out[0] = (char) code;
        out[1] = (char) shared;
        out[2] = (char) suffix;
        if (hash)
                memcpy(out + 3, hash, 8);
        memcpy(out + size - middle - 1, rest + shared, middle);
        out[size - 1] = '\0';
        return size;
}

void nftsync_name_it_init(struct nftsync_name_it *it, const char *coded) {
        it->p = coded;
        it->prefix = it->hash = NULL;
        it->rest[0] = '\0';
        it->len = 0;
}

/* Moves to the next name (the first after nftsync_name_it_init()). */
void nftsync_name_next(struct nftsync_name_it *it) {
        unsigned code = (unsigned char) it->p[0];
        size_t shared = (unsigned char) it->p[1], suffix = (unsigned char) it->p[2];
        const char *q = it->p + 3;
        it->prefix = it->hash = NULL;
        if (code >= 1 && code <= NAME_PREFIXES) {
                it->prefix = name_prefixes[code - 1];
        } else if (code > NAME_PREFIXES && code <= NAME_CODES) {
                it->prefix = name_prefixes[code - 1 - NAME_PREFIXES];
                it->hash = q;
                q += 8;
        }
        size_t middle = strlen(q);
        it->p = q + middle + 1;
        /* nftsync_name_pack() never codes more than the name before has, nor a
         * longer name than the buffer holds; the bounds keep a bad record
         * in the buffer. */
        if (shared > it->len)
                shared = it->len;
        if (suffix > it->len - shared)
                suffix = it->len - shared;
        if (shared + suffix + middle >= sizeof it->rest)
                middle = sizeof it->rest - 1 - shared - suffix;
        /* The shared end first: the middle may be written over it. */
        memmove(it->rest + shared + middle, it->rest + it->len - suffix, suffix);
        memcpy(it->rest + shared, q, middle);
        it->len = shared + middle + suffix;
        it->rest[it->len] = '\0';
}

/* The length of the current name, whole. */
size_t nftsync_name_len(const struct nftsync_name_it *it, const char *key) {
        if (!it->prefix)
                return strlen(it->rest);
        return strlen(it->prefix) + 9 + strlen(key) + strlen(it->rest);
}

/* The current name, whole, in out (size bytes: nftsync_name_len() + 1 suffice).
 * Returns out. */
const char *nftsync_name_unpack(const struct nftsync_name_it *it, const char *key, char *out, size_t size) {
        struct strb b = strb_init(out, size);
        char h[9];
        if (!it->prefix) {
                strb_puts(&b, it->rest);
                return out;
        }
        const char *hash = it->hash;
        if (!hash) {
                name_hash(key, it->rest, h);
                hash = h;
        }
        strb_puts(&b, it->prefix);
        strb_putn(&b, hash, 8);
        strb_putn(&b, "-", 1);
        strb_puts(&b, key);
        strb_puts(&b, it->rest);
        return out;
}

/* Whether the current name is name, without making it whole. name is the
 * renderer's: when its prefix, key and rest are the current name's, so is
 * its hash (derived from them), which is then not compared. */
bool nftsync_name_equal(const struct nftsync_name_it *it, const char *key, const char *name) {
        if (!it->prefix)
                return strcmp(it->rest, name) == 0;
        size_t pl = strlen(it->prefix), kl = strlen(key);
        return strncmp(name, it->prefix, pl) == 0 && strnlen(name + pl, 9) == 9 &&
               (!it->hash || memcmp(name + pl, it->hash, 8) == 0) && name[pl + 8] == '-' &&
               strncmp(name + pl + 9, key, kl) == 0 && strcmp(name + pl + 9 + kl, it->rest) == 0;
}
