/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Scope-bound cleanup, the small subset kproxy needs (gcc/clang only).
 * A variable marked _cleanup_free_ is freed when it leaves scope; TAKE_PTR()
 * hands ownership out of such a variable, TAKE_FD() out of a
 * _cleanup_close_ one.
 */
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

/* The one way to give a type its cleanup: DEFINE_CLEANUP(struct x, x_free)
 * defines x_freep(), for _cleanup_(x_freep). x_free() accepts NULL, as
 * every destructor here does. */
#define DEFINE_CLEANUP(type, fn)                                        \
        static inline void fn##p(type **p) {                            \
                (void) fn(*p);                                          \
        }

static inline void freep(void *p) { free(*(void **)p); }
#define _cleanup_free_ _cleanup_(freep)

static inline void closep(int *fd) {
        if (*fd >= 0)
                close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

#define TAKE_PTR(p)                                  \
        ({                                           \
                __typeof__(p) _ptr_ = (p);           \
                (p) = NULL;                          \
                _ptr_;                               \
        })

#define TAKE_FD(fd)                                  \
        ({                                           \
                int _fd_ = (fd);                     \
                (fd) = -1;                           \
                _fd_;                                \
        })

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))
