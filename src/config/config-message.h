/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * How src/config/ tells the user about a bad flag, file or value: one line
 * "kproxy: ..." on stderr, control bytes replaced and long values cut, since
 * values from argv and files end up in it. Configuration is read before
 * the log is set up (the log's own settings are part of it), so these
 * write to stderr directly. Private to src/config/.
 */

/* config_error() returns -EINVAL, to be returned in turn; config_print() is
 * for warnings. */
int config_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void config_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
