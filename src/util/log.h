/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Logging in klog's text format, the one every kube-proxy operator greps:
 *
 *   I1122 02:45:00.123456   12345 sync.c:123] message
 *
 * Severity letter, month and day, wall time with microseconds, thread id
 * (kproxy is single-threaded, so the pid), file:line, then the message.
 * log_v(N, ...) prints only at verbosity >= N, like klog's V(N).Info.
 * The _errno variants append ": <strerror(-r)>" and return r (always < 0),
 * so an error path can be `return log_error_errno(r, "Failed to …");`.
 * render/, model/ and util/ (but this file) never log.
 */
#include <stdarg.h>

enum log_severity {
        LOG_SEV_INFO,
        LOG_SEV_WARNING,
        LOG_SEV_ERROR,
        LOG_SEV_FATAL,
};

/* The only globals kproxy has: verbosity and output stream (stderr). */
extern int log_verbosity;

void log_set_verbosity(int v);
void log_internal(enum log_severity sev, int err, const char *file, int line, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
int log_internal_errno(enum log_severity sev, int r, const char *file, int line, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

#define log_info(...) log_internal(LOG_SEV_INFO, 0, __FILE__, __LINE__, __VA_ARGS__)
#define log_warning(...) log_internal(LOG_SEV_WARNING, 0, __FILE__, __LINE__, __VA_ARGS__)
#define log_error(...) log_internal(LOG_SEV_ERROR, 0, __FILE__, __LINE__, __VA_ARGS__)
#define log_v(n, ...)                                                                \
        do {                                                                         \
                if (log_verbosity >= (n))                                            \
                        log_internal(LOG_SEV_INFO, 0, __FILE__, __LINE__, __VA_ARGS__); \
        } while (0)
#define log_warning_errno(r, ...) log_internal_errno(LOG_SEV_WARNING, (r), __FILE__, __LINE__, __VA_ARGS__)
#define log_error_errno(r, ...) log_internal_errno(LOG_SEV_ERROR, (r), __FILE__, __LINE__, __VA_ARGS__)
