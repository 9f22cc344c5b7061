/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Shared copies of strings that many objects hold: the node name of every
 * endpoint is one of a few thousand, and half a million private copies of
 * them cost 16 MB at 50k services. One allocation per distinct string,
 * with a count of references; single-threaded, as the daemon is.
 */
#include <stddef.h>

/* A shared copy of s, referenced once more. Aborts on OOM (as xstrdup). */
const char *intern(const char *s);
/* Drops a reference intern() gave; the last one frees the copy. NULL: nothing. */
void intern_release(const char *s);
/* Distinct strings held (for tests). */
size_t intern_count(void);
