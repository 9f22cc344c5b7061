/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What a shell command prints, for tests that look at the kernel with its
 * own tools (nft, iptables-save, ip) in their network namespace.
 */

/* cmd's standard output, whole (malloc()ed, NUL-terminated); NULL when it
 * cannot be run. Its exit status is not looked at: a table that is not
 * there prints nothing. */
char *test_cmd_output(const char *cmd);
