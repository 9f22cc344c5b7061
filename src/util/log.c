/* SPDX-License-Identifier: Apache-2.0 */
#include "util/log.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int log_verbosity = 0;

void log_set_verbosity(int v) {
        log_verbosity = v;
}

static void log_vwrite(enum log_severity sev, int err, const char *file, int line, const char *fmt,
                       va_list ap) __attribute__((format(printf, 5, 0)));
static void log_vwrite(enum log_severity sev, int err, const char *file, int line, const char *fmt,
                       va_list ap) {
        static const char letters[] = {
                [LOG_SEV_INFO] = 'I',
                [LOG_SEV_WARNING] = 'W',
                [LOG_SEV_ERROR] = 'E',
                [LOG_SEV_FATAL] = 'F',
        };
        struct timeval tv;
        struct tm tm;
        char msg[4096];

        gettimeofday(&tv, NULL);
        gmtime_r(&tv.tv_sec, &tm);
        const char *base = strrchr(file, '/');
        base = base ? base + 1 : file;

        vsnprintf(msg, sizeof msg, fmt, ap);
        /* One fprintf per line, so concurrent writers (none today) and
         * line-buffered collectors see whole lines. */
        fprintf(stderr, "%c%02d%02d %02d:%02d:%02d.%06ld %7d %s:%d] %s%s%s\n", letters[sev],
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long) tv.tv_usec,
                (int) getpid(), base, line, msg, err ? ": " : "", err ? strerror(err) : "");
}

void log_internal(enum log_severity sev, int err, const char *file, int line, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        log_vwrite(sev, err, file, line, fmt, ap);
        va_end(ap);
}

int log_internal_errno(enum log_severity sev, int r, const char *file, int line, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        log_vwrite(sev, r < 0 ? -r : r, file, line, fmt, ap);
        va_end(ap);
        return r < 0 ? r : -r;
}
