/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Upstream's chain names: a prefix and the first 16 characters of the
 * RFC 4648 base32 encoding of SHA-256(service-port-name + protocol
 * [+ endpoint]). The same cluster gives the same names as kube-proxy, so
 * operators' `iptables-save | grep KUBE-SVC-…` habits carry over.
 */
#include <stdbool.h>

#define CHAIN_HASH_LEN 16
#define CHAIN_NAME_MAX 29       /* iptables allows 28 characters, plus NUL */

/* out receives 16 characters and a NUL. ep may be NULL (service chains). */
void chain_hash(const char *spn, const char *proto, const char *ep, char out[CHAIN_HASH_LEN + 1]);

/* The first n (<= 16) base32 characters of SHA-256(s): nftables mode's
 * 8-character names. out holds n + 1 bytes. */
void chain_hash_str(const char *s, unsigned n, char *out);

/* nftables mode's name body of a service port ("ns/name/tcp/port") or an
 * endpoint ("...__10.0.0.1/80"): upstream's hashAndTruncate(), "<8 base32
 * characters of SHA-256>-<base>", cut to 237 characters and "..." beyond
 * 240. Returns whether the 8 characters follow from the rest (the body was
 * not cut); with unhashed they are then "********". */
#define CHAIN_NFT_BODY_MAX 241
bool chain_nft_body(const char *base, bool unhashed, char out[CHAIN_NFT_BODY_MAX]);

/* base32 (RFC 4648, upper case, no padding) of n bytes into out, which must
 * hold (n * 8 + 4) / 5 + 1 bytes. Exposed for tests. */
void chain_base32(const unsigned char *in, unsigned n, char *out);
