/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Building short strings into a fixed array without printf: the names of
 * a full sync's chains are built half a million times at 50k services, and
 * snprintf() cost a fifth of the render (perf). A strb truncates as
 * snprintf() does: what fits in size - 1 bytes, always NUL-terminated.
 */
#include <stddef.h>
#include <string.h>

struct strb {
        char *p, *end;          /* next byte; the last byte, kept for the NUL */
};

static inline struct strb strb_init(char *out, size_t size) {
        struct strb b = {out, out + size - 1};
        *out = '\0';
        return b;
}

static inline void strb_putn(struct strb *b, const char *s, size_t n) {
        size_t room = (size_t) (b->end - b->p);
        if (n > room)
                n = room;
        memcpy(b->p, s, n);
        b->p += n;
        *b->p = '\0';
}

static inline void strb_puts(struct strb *b, const char *s) {
        strb_putn(b, s, strlen(s));
}

static inline void strb_putu(struct strb *b, unsigned long v) {
        char d[24], *q = d + sizeof d;
        do
                *--q = (char) ('0' + v % 10);
        while (v /= 10);
        strb_putn(b, q, (size_t) (d + sizeof d - q));
}

/* Bytes as lower-case hex, two digits each. */
static inline void strb_puthex(struct strb *b, const unsigned char *bytes, size_t n) {
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n && b->end - b->p >= 2; i++) {
                b->p[0] = digits[bytes[i] >> 4];
                b->p[1] = digits[bytes[i] & 15];
                b->p += 2;
        }
        *b->p = '\0';
}
