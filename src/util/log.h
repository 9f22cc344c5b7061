/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Logging as kube-proxy logs, in either of its formats (--logging-format):
 *
 *   text (klog):  I1122 02:45:00.123456   12345 proxier.c:123] message
 *                 I1122 02:45:00.123456   12345 proxier.c:123] "Syncing iptables rules" ipFamily="IPv4"
 *   json:         {"ts":1732243500123.456,"caller":"proxy/proxier.c:123","msg":"Syncing iptables rules","v":2,"ipFamily":"IPv4"}
 *
 * Text: severity letter, month and day, wall time with microseconds,
 * thread id (kproxy is single-threaded, so the pid), file:line, then the
 * message. JSON: component-base's keys: ts (Unix milliseconds), caller, msg,
 * then "v" (verbosity) for info and warnings or "err" for errors, then the
 * message's key/value pairs.
 *
 * Two kinds of messages. printf-style ones (log_info, log_v, ...) are
 * klog's Infof: free text. Structured ones (the _kv variants) are klog's
 * InfoS: a constant message and key/value pairs with upstream's keys, so
 * that log queries written for kube-proxy ("Reloading service iptables
 * data" ipFamily="IPv4") match kproxy's lines in both formats:
 *
 *   log_v_kv(2, "SyncProxyRules complete", KV_STR("ipFamily", "IPv4"), KV_SECONDS("elapsed", 0.0123));
 *
 * log_v(N, ...) prints only at verbosity >= N, like klog's V(N).Info. The
 * _errno variants append ": <strerror(-r)>" (JSON: an "err" key) and
 * return r (always < 0), so an error path can be `return
 * log_error_errno(r, "Failed to …");`. render/, model/ and util/ (but this
 * file) never log.
 */
#include <stdarg.h>

enum log_severity {
        LOG_SEV_INFO,
        LOG_SEV_WARNING,
        LOG_SEV_ERROR,
        LOG_SEV_FATAL,
};

enum log_format {
        LOG_FORMAT_TEXT,
        LOG_FORMAT_JSON,
};

/* The types of structured values; use the KV_ macros. */
enum log_kv_type {
        LOG_KV_STR = 1,         /* const char *: quoted in text, a JSON string */
        LOG_KV_INT,             /* long long */
        LOG_KV_SECONDS,         /* double seconds, written as a Go duration ("12.3ms") */
        LOG_KV_BOOL,            /* int: true or false, unquoted in both formats */
};

#define KV_STR(k, v) (const char *) (k), LOG_KV_STR, (const char *) (v)
#define KV_INT(k, v) (const char *) (k), LOG_KV_INT, (long long) (v)
#define KV_SECONDS(k, v) (const char *) (k), LOG_KV_SECONDS, (double) (v)
#define KV_BOOL(k, v) (const char *) (k), LOG_KV_BOOL, (int) !!(v)

/* The only globals kproxy has: the log settings (output is stderr, and
 * with split streams info goes to stdout). */
extern int log_verbosity;

void log_set_verbosity(int v);
void log_set_format(enum log_format f);
/* Info and warnings to stdout, errors to stderr (--log-*-split-stream);
 * with info_buffer > 0 (--log-*-info-buffer-size) stdout is buffered that
 * much and written when full or at log_flush() (the daemon calls it every
 * --log-flush-frequency, and exit flushes it). Errors are never buffered. */
void log_set_split_stream(int split, unsigned long info_buffer);
void log_flush(void);
/* "pattern=N,..." as klog's -vmodule: files whose name without ".c"
 * matches a glob pattern log at verbosity N. Returns 0 or -EINVAL (nothing
 * changed). NULL clears it. */
int log_set_vmodule(const char *spec);
/* Whether V(v) messages of file are printed (the verbosity, or vmodule). */
int log_v_enabled(const char *file, int v);

void log_internal(enum log_severity sev, int v, int err, const char *file, int line, const char *fmt, ...)
        __attribute__((format(printf, 6, 7)));
int log_internal_errno(enum log_severity sev, int r, const char *file, int line, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
/* A structured message: msg, then (key, type, value) triples ending with a
 * NULL key; err is an errno (0: none). */
void log_internal_kv(enum log_severity sev, int v, int err, const char *file, int line, const char *msg, ...);

#define log_info(...) log_internal(LOG_SEV_INFO, 0, 0, __FILE__, __LINE__, __VA_ARGS__)
#define log_warning(...) log_internal(LOG_SEV_WARNING, 0, 0, __FILE__, __LINE__, __VA_ARGS__)
#define log_error(...) log_internal(LOG_SEV_ERROR, 0, 0, __FILE__, __LINE__, __VA_ARGS__)
#define log_v(n, ...)                                                                    \
        do {                                                                             \
                if (log_verbosity >= (n) || log_v_enabled(__FILE__, (n)))                \
                        log_internal(LOG_SEV_INFO, (n), 0, __FILE__, __LINE__, __VA_ARGS__); \
        } while (0)
#define log_warning_errno(r, ...) log_internal_errno(LOG_SEV_WARNING, (r), __FILE__, __LINE__, __VA_ARGS__)
#define log_error_errno(r, ...) log_internal_errno(LOG_SEV_ERROR, (r), __FILE__, __LINE__, __VA_ARGS__)

#define log_info_kv(msg, ...) \
        log_internal_kv(LOG_SEV_INFO, 0, 0, __FILE__, __LINE__, (msg), ##__VA_ARGS__, (const char *) 0)
#define log_warning_kv(msg, ...) \
        log_internal_kv(LOG_SEV_WARNING, 0, 0, __FILE__, __LINE__, (msg), ##__VA_ARGS__, (const char *) 0)
/* r: -errno, or 0 for an error without one. */
#define log_error_kv(r, msg, ...) \
        log_internal_kv(LOG_SEV_ERROR, 0, -(r), __FILE__, __LINE__, (msg), ##__VA_ARGS__, (const char *) 0)
#define log_v_kv(n, msg, ...)                                                                          \
        do {                                                                                           \
                if (log_verbosity >= (n) || log_v_enabled(__FILE__, (n)))                              \
                        log_internal_kv(LOG_SEV_INFO, (n), 0, __FILE__, __LINE__, (msg), ##__VA_ARGS__, \
                                        (const char *) 0);                                             \
        } while (0)
