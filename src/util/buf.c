/* SPDX-License-Identifier: Apache-2.0 */
#include "util/buf.h"
#include "util/alloc.h"

#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_reserve(struct buf *b, size_t extra) {
        size_t need = b->len + extra + 1;
        if (need <= b->cap)
                return;
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need)
                cap *= 2;
        char *p = xrealloc(b->data, cap);
        b->data = p;
        b->cap = cap;
}

void buf_put(struct buf *b, const char *s, size_t n) {
        if (n == 0)
                return;         /* s may be an empty buffer's NULL */
        buf_reserve(b, n);
        memcpy(b->data + b->len, s, n);
        b->len += n;
        b->data[b->len] = '\0';
}

void buf_insert(struct buf *b, size_t at, const char *s, size_t n) {
        assert(at <= b->len);
        if (n == 0)
                return;
        buf_reserve(b, n);
        memmove(b->data + at + n, b->data + at, b->len - at);
        memcpy(b->data + at, s, n);
        b->len += n;
        b->data[b->len] = '\0';
}

void buf_puts(struct buf *b, const char *s) {
        buf_put(b, s, strlen(s));
}

void buf_putc(struct buf *b, char c) {
        buf_reserve(b, 1);
        b->data[b->len++] = c;
        b->data[b->len] = '\0';
}

void buf_put_uint(struct buf *b, unsigned long v) {
        char tmp[24];
        size_t i = sizeof tmp;
        do {
                tmp[--i] = (char) ('0' + v % 10);
                v /= 10;
        } while (v);
        buf_put(b, tmp + i, sizeof tmp - i);
}

void buf_vprintf(struct buf *b, const char *fmt, va_list ap) {
        va_list aq;
        va_copy(aq, ap);
        int n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? b->cap - b->len : 0, fmt, aq);
        va_end(aq);
        assert(n >= 0);
        if (b->data && (size_t) n < b->cap - b->len) {
                b->len += (size_t) n;
                return;
        }
        buf_reserve(b, (size_t) n);
        vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        b->len += (size_t) n;
}

void buf_printf(struct buf *b, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        buf_vprintf(b, fmt, ap);
        va_end(ap);
}

void buf_arg(struct buf *b, const char *s) {
        bool quote = false;
        for (const char *p = s; *p; p++) {
                assert(*p != '"' && *p != '\\' && (unsigned char) *p >= 0x20 && *p != 0x7f);
                if (*p == ' ')
                        quote = true;
        }
        if (b->len > 0 && b->data[b->len - 1] != '\n')
                buf_putc(b, ' ');
        if (quote)
                buf_putc(b, '"');
        buf_puts(b, s);
        if (quote)
                buf_putc(b, '"');
}

void buf_truncate(struct buf *b, size_t len) {
        assert(len <= b->len);
        b->len = len;
        if (b->data)
                b->data[len] = '\0';
}

void buf_clear(struct buf *b) {
        buf_truncate(b, 0);
}

char *buf_steal(struct buf *b) {
        char *p = b->data;
        if (!p)
                p = xcalloc(1, 1);
        *b = (struct buf) BUF_INIT;
        return p;
}

void buf_done(struct buf *b) {
        free(b->data);
        *b = (struct buf) BUF_INIT;
}
