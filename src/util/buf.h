/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A growable byte buffer, always NUL-terminated. Out of memory aborts: a node
 * proxy that cannot allocate a few kilobytes has no useful way to go on, and
 * checking every append would hide the logic of the renderers.
 */
#include <stdarg.h>
#include <stddef.h>

struct buf {
        char *data;
        size_t len;
        size_t cap;
};

#define BUF_INIT {NULL, 0, 0}

void buf_reserve(struct buf *b, size_t extra);
void buf_put(struct buf *b, const char *s, size_t n);
void buf_puts(struct buf *b, const char *s);
void buf_putc(struct buf *b, char c);
/* Decimal text of v, without printf (the renderers' hot path). */
void buf_put_uint(struct buf *b, unsigned long v);
void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_vprintf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Append one iptables-restore argument, with a separating space. A value that
 * holds a space is wrapped in double quotes as iptables-save prints it. The
 * value must already be validated: quotes, backslashes and control characters
 * are a programmer error (asserted), because no validated Kubernetes name or
 * kproxy-made comment contains them. */
void buf_arg(struct buf *b, const char *s);
/* Inserts n bytes of s at offset at (<= len), moving what follows. */
void buf_insert(struct buf *b, size_t at, const char *s, size_t n);
void buf_truncate(struct buf *b, size_t len);
void buf_clear(struct buf *b);
/* Returns the contents (owned by the caller) and resets the buffer. */
char *buf_steal(struct buf *b);
void buf_done(struct buf *b);
