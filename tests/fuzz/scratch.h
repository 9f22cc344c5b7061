/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A scratch directory for the harnesses that go through files: in memory
 * (/dev/shm) where the machine has it, as a disk's writeback would
 * otherwise take most of each execution; /tmp if not.
 */
#ifndef KPROXY_FUZZ_SCRATCH_H
#define KPROXY_FUZZ_SCRATCH_H

#include <stddef.h>

/* Creates a fresh directory named after the harness into out (cap bytes)
 * or aborts. */
void fuzz_scratch_dir(const char *harness, char *out, size_t cap);

#endif
