/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * kproxy's one policy for running out of memory: the process aborts.
 * A node proxy that cannot get a few kilobytes cannot go on usefully, and
 * need not: what it wrote stays in the kernel and keeps serving, and the
 * kubelet or systemd starts it again, whose first sync repairs whatever
 * the last one left half done. So nothing checks for a failed
 * allocation: these abort instead (as util/buf.h's writers do), and a
 * constructor that only allocates cannot fail and returns its object.
 * Failures that are not the allocator's (a kernel refusing, a bad input)
 * are returned as -errno, as everywhere else.
 */
#include <stdlib.h>
#include <string.h>

static inline void *xmalloc(size_t n) {
        void *p = malloc(n ? n : 1);
        if (!p)
                abort();
        return p;
}

static inline void *xcalloc(size_t n, size_t size) {
        void *p = calloc(n ? n : 1, size ? size : 1);
        if (!p)
                abort();
        return p;
}

static inline void *xrealloc(void *p, size_t n) {
        void *q = realloc(p, n ? n : 1);
        if (!q)
                abort();
        return q;
}

static inline char *xstrdup(const char *s) {
        char *p = strdup(s);
        if (!p)
                abort();
        return p;
}

static inline char *xstrndup(const char *s, size_t n) {
        char *p = strndup(s, n);
        if (!p)
                abort();
        return p;
}

/* Makes room in *p (*cap elements of size bytes) for element n, doubling. */
static inline void xgrow(void **p, size_t *cap, size_t n, size_t size) {
        if (n < *cap)
                return;
        *cap = *cap ? *cap * 2 : 16;
        while (*cap <= n)
                *cap *= 2;
        *p = xrealloc(*p, *cap * size);
}
