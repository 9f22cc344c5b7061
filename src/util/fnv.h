/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * FNV-1a, 64 bits: the digest of rendered rules, rule messages and restore
 * input. Not for adversarial input (a hash table keyed by attacker-chosen
 * strings would want a keyed hash); kproxy digests what it rendered or
 * what the kernel holds.
 */
#include <stddef.h>
#include <stdint.h>

#define FNV64_INIT 14695981039346656037ull     /* the offset basis, 0xcbf29ce484222325 */

/* h with the n bytes at p folded in (start from FNV64_INIT). */
static inline uint64_t fnv64(uint64_t h, const void *p, size_t n) {
        const unsigned char *b = p;
        for (size_t i = 0; i < n; i++) {
                h ^= b[i];
                h *= 1099511628211ull;
        }
        return h;
}
