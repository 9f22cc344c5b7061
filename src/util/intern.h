/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Shared copies of strings that many objects hold: the node name of every
 * endpoint is one of a few thousand, and half a million private copies of
 * them cost 16 MB at 50k services. One allocation per distinct string,
 * with a count of references, known by a small number (an endpoint keeps
 * 4 bytes, not a pointer); single-threaded, as the daemon is.
 */
#include <stddef.h>
#include <stdint.h>

/* The number of a shared copy of s, referenced once more: never 0. Aborts
 * on OOM (as xstrdup). */
uint32_t intern(const char *s);
/* The string of number id, or NULL for 0. */
const char *interned(uint32_t id);
/* Drops a reference intern() gave; the last one frees the copy (its
 * number is used again). 0: nothing. */
void intern_release(uint32_t id);
/* Distinct strings held (for tests). */
size_t intern_count(void);
