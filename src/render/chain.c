/* SPDX-License-Identifier: Apache-2.0 */
#include "render/chain.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

void chain_base32(const unsigned char *in, unsigned n, char *out) {
        static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
        unsigned buffer = 0, bits = 0;
        char *o = out;

        for (unsigned i = 0; i < n; i++) {
                buffer = (buffer << 8) | in[i];
                bits += 8;
                while (bits >= 5) {
                        *o++ = alphabet[(buffer >> (bits - 5)) & 31];
                        bits -= 5;
                }
        }
        if (bits > 0)
                *o++ = alphabet[(buffer << (5 - bits)) & 31];
        *o = '\0';
}

/* The digest and its context are fetched once and reused: OpenSSL 3's
 * one-shot SHA256() fetches the algorithm on every call, which dominated
 * rendering at 100k endpoints. kproxy is single-threaded; this is the only
 * state the renderer keeps. */
static EVP_MD_CTX *hash_ctx(void) {
        static EVP_MD *md;
        static EVP_MD_CTX *ctx;
        if (!ctx) {
                md = EVP_MD_fetch(NULL, "SHA256", NULL);
                ctx = EVP_MD_CTX_new();
                if (!md || !ctx)
                        abort();
        }
        if (!EVP_DigestInit_ex2(ctx, md, NULL))
                abort();
        return ctx;
}

void chain_hash(const char *spn, const char *proto, const char *ep, char out[CHAIN_HASH_LEN + 1]) {
        unsigned char digest[EVP_MAX_MD_SIZE];
        char b32[17];
        EVP_MD_CTX *ctx = hash_ctx();

        EVP_DigestUpdate(ctx, spn, strlen(spn));
        EVP_DigestUpdate(ctx, proto, strlen(proto));
        if (ep)
                EVP_DigestUpdate(ctx, ep, strlen(ep));
        if (!EVP_DigestFinal_ex(ctx, digest, NULL))
                abort();
        /* Only 16 characters are kept: 10 bytes encode to exactly 16. */
        chain_base32(digest, 10, b32);
        memcpy(out, b32, CHAIN_HASH_LEN);
        out[CHAIN_HASH_LEN] = '\0';
}

void chain_hash_str(const char *s, unsigned n, char *out) {
        unsigned char digest[EVP_MAX_MD_SIZE];
        char b32[17];
        EVP_MD_CTX *ctx = hash_ctx();

        EVP_DigestUpdate(ctx, s, strlen(s));
        if (!EVP_DigestFinal_ex(ctx, digest, NULL))
                abort();
        chain_base32(digest, 10, b32);
        if (n > CHAIN_HASH_LEN)
                n = CHAIN_HASH_LEN;
        memcpy(out, b32, n);
        out[n] = '\0';
}

bool chain_nft_body(const char *base, bool unhashed, char out[CHAIN_NFT_BODY_MAX]) {
        size_t n = strlen(base);
        bool derived = 9 + n <= CHAIN_NFT_BODY_MAX - 1;
        if (derived && unhashed)
                memcpy(out, "********", 8);
        else
                chain_hash_str(base, 8, out);
        out[8] = '-';
        if (!derived) {
                memcpy(out + 9, base, 237 - 9);
                memcpy(out + 237, "...", 4);
        } else {
                memcpy(out + 9, base, n + 1);
        }
        return derived;
}
