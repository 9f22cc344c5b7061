/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The kernel's settings files: sysctls under /proc/sys (most of them are
 * the current network namespace's) and module parameters under /sys.
 *
 * Every path is absolute ("/proc/sys/net/netfilter/nf_conntrack_max") and
 * read under a root directory: NULL or "" for the machine itself, or a
 * scratch directory holding the same tree, which is how the tests exercise
 * settings that are machine-wide (the conntrack hash size) without ever
 * writing them. kproxy takes the root from $KPROXY_SYSROOT, which only the
 * tests set (sysctl_root()).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* $KPROXY_SYSROOT, or NULL. */
const char *sysctl_root(void);

/* Reads a decimal value (the first number in the file). Returns 0, -errno,
 * or -EINVAL when the file holds no number. */
int sysctl_read_u64(const char *root, const char *path, uint64_t *ret);

/* Reads the first word of the file into out (len bytes, NUL-terminated;
 * a longer word is cut). Returns 0, -errno, or -EINVAL when it is empty. */
int sysctl_read_word(const char *root, const char *path, char *out, size_t len);

/* Writes value, as `echo value > path` would. Returns 0 or -errno. */
int sysctl_write(const char *root, const char *path, const char *value);
int sysctl_write_u64(const char *root, const char *path, uint64_t v);

/* Whether -errno r means "this process may not change that here" (a
 * read-only /sys or /proc/sys in a container, a machine-wide setting seen
 * from a network namespace) rather than a real failure. */
bool sysctl_not_permitted(int r);
