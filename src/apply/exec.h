/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Running the netfilter tools: fork/exec with an argv array (never a shell),
 * stdin fed from a buffer, stdout and stderr captured. Blocking: a restore
 * is one transaction that the sync loop waits for, as upstream does.
 */
#include <stdbool.h>
#include <stddef.h>

struct buf;

/* Runs argv[0] (searched in PATH) with input on stdin (may be NULL).
 * Captures stdout into out and stderr into err (either may be NULL: then
 * discarded). Returns the exit status (0..255), or -errno if it could not
 * be run (-ENOENT: not installed), or -EINTR if killed by a signal. */
int exec_run(const char *const argv[], const char *input, size_t len, struct buf *out, struct buf *err);

/* Whether name is an executable file in one of PATH's directories (the
 * default search path when PATH is unset), as posix_spawnp() would find it.
 * No process is run. */
bool exec_installed(const char *name);
