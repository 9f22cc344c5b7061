/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the log: one line per message, written with one call, in
 * klog's text or component-base's JSON. Untrusted text (API objects' names
 * end up in messages) is escaped everywhere it lands: in structured values
 * and every JSON string, and in the text format's free-text messages too
 * (where klog writes them as they are), so that nothing a message holds
 * can start a line of its own. A message meant to span lines reads with
 * its newlines as \n.
 */
#include "util/log.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int log_verbosity = 0;
static enum log_format log_format = LOG_FORMAT_TEXT;
static bool log_split;
static bool log_buffered;

#define VMODULE_MAX 16
static struct {
        char pattern[64];
        int v;
} log_vmodule[VMODULE_MAX];
static size_t log_n_vmodule;

void log_set_verbosity(int v) {
        log_verbosity = v;
}

void log_set_format(enum log_format f) {
        log_format = f;
}

void log_set_split_stream(int split, unsigned long info_buffer) {
        log_split = split != 0;
        log_buffered = log_split && info_buffer > 0;
        if (log_buffered)
                setvbuf(stdout, NULL, _IOFBF, info_buffer);
}

void log_flush(void) {
        fflush(stdout);
}

int log_set_vmodule(const char *spec) {
        typeof(log_vmodule) parsed;
        size_t n = 0;

        for (const char *p = spec; p && *p;) {
                size_t len = strcspn(p, ",");
                const char *eq = memchr(p, '=', len);
                char *end;
                if (!eq || eq == p || (size_t) (eq - p) >= sizeof parsed[0].pattern || n == VMODULE_MAX)
                        return -EINVAL;
                errno = 0;
                long v = strtol(eq + 1, &end, 10);
                if (end != p + len || end == eq + 1 || errno != 0 || v < 0 || v > 1000)
                        return -EINVAL;
                memcpy(parsed[n].pattern, p, (size_t) (eq - p));
                parsed[n].pattern[eq - p] = '\0';
                parsed[n++].v = (int) v;
                p += len + (p[len] == ',');
        }
        memcpy(log_vmodule, parsed, n * sizeof parsed[0]);
        log_n_vmodule = n;
        return 0;
}

/* klog's rule: a pattern with a slash matches the path without ".c", one
 * without matches the base name without ".c"; the first match decides. */
int log_v_enabled(const char *file, int v) {
        char name[256];

        if (log_n_vmodule == 0)
                return 0;
        const char *base = strrchr(file, '/');
        base = base ? base + 1 : file;
        for (size_t i = 0; i < log_n_vmodule; i++) {
                const char *subject = strchr(log_vmodule[i].pattern, '/') ? file : base;
                size_t len = strlen(subject);
                if (len >= 2 && strcmp(subject + len - 2, ".c") == 0)
                        len -= 2;
                if (len >= sizeof name)
                        continue;
                memcpy(name, subject, len);
                name[len] = '\0';
                if (fnmatch(log_vmodule[i].pattern, name, 0) == 0)
                        return log_vmodule[i].v >= v;
        }
        return 0;
}

/* --- the line being built: a fixed buffer, cut (never overrun) when full --- */

#define LINE_MAX_BYTES 8192

struct line {
        char b[LINE_MAX_BYTES];
        size_t len;
};

static void put(struct line *l, const char *s, size_t n) {
        size_t room = sizeof l->b - 1 - l->len;
        if (n > room)
                n = room;
        memcpy(l->b + l->len, s, n);
        l->len += n;
}

static void puts_(struct line *l, const char *s) {
        put(l, s, strlen(s));
}

static void putf(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct line *l, const char *fmt, ...) {
        va_list ap;
        size_t room = sizeof l->b - 1 - l->len;
        va_start(ap, fmt);
        int n = vsnprintf(l->b + l->len, room + 1, fmt, ap);
        va_end(ap);
        if (n > 0)
                l->len += (size_t) n < room ? (size_t) n : room;
}

/* The length of the valid UTF-8 sequence at s (1-4), or 0 if invalid:
 * overlong forms, surrogates and code points past U+10FFFF are invalid, as
 * Go's decoder has them. */
static size_t utf8_len(const unsigned char *s) {
        unsigned char lo = 0x80, hi = 0xbf;
        size_t n;

        if (s[0] < 0x80)
                return 1;
        if (s[0] >= 0xc2 && s[0] <= 0xdf)
                n = 2;
        else if (s[0] >= 0xe0 && s[0] <= 0xef)
                n = 3, lo = s[0] == 0xe0 ? 0xa0 : 0x80, hi = s[0] == 0xed ? 0x9f : 0xbf;
        else if (s[0] >= 0xf0 && s[0] <= 0xf4)
                n = 4, lo = s[0] == 0xf0 ? 0x90 : 0x80, hi = s[0] == 0xf4 ? 0x8f : 0xbf;
        else
                return 0;
        if (s[1] < lo || s[1] > hi)
                return 0;
        for (size_t i = 2; i < n; i++)
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
        return n;
}

/* Whether the sequence of n bytes at s is a character that can end or
 * hide a line: a C0 or C1 control, DEL, or U+2028/U+2029 (line and
 * paragraph separators, which some viewers break lines at). */
static bool breaks_line(const unsigned char *s, size_t n) {
        if (n == 1)
                return s[0] < 0x20 || s[0] == 0x7f;
        if (n == 2)
                return s[0] == 0xc2 && s[1] < 0xa0;
        return n == 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9);
}

/* Untrusted text (API objects' names end up in messages) kept on its line:
 * a character that could break it escaped (\n, \t, \r, else \uXXXX),
 * invalid UTF-8 as \ufffd, as Go's encoders write them; within quotes
 * also the quote and the backslash. So a name cannot forge a line. */
static void put_escaped(struct line *l, const char *s, bool quoted) {
        for (const unsigned char *p = (const unsigned char *) s; *p;) {
                size_t n = utf8_len(p);
                if (n > 0 && !breaks_line(p, n) && !(quoted && (*p == '"' || *p == '\\'))) {
                        put(l, (const char *) p, n);
                        p += n;
                        continue;
                }
                if (n == 0)
                        puts_(l, "\\ufffd");
                else if (*p == '"' || *p == '\\')
                        put(l, (const char[]) {'\\', (char) *p}, 2);
                else if (*p == '\n')
                        puts_(l, "\\n");
                else if (*p == '\t')
                        puts_(l, "\\t");
                else if (*p == '\r')
                        puts_(l, "\\r");
                else if (n == 1)
                        putf(l, "\\u%04x", *p);
                else if (n == 2)
                        putf(l, "\\u%04x", p[1]);    /* C1: U+0080..U+009F */
                else
                        putf(l, "\\u%04x", 0x2000 + (p[2] & 0x3f));
                p += n ? n : 1;
        }
}

/* A quoted string: JSON's escapes (also right for klog's text values). */
static void put_quoted(struct line *l, const char *s) {
        put(l, "\"", 1);
        put_escaped(l, s, true);
        put(l, "\"", 1);
}

/* Go's time.Duration.String() of s seconds, to the microsecond. */
static void put_duration(struct line *l, double s) {
        long long us = (long long) (s * 1e6 + (s >= 0 ? 0.5 : -0.5));
        char tmp[64];
        size_t n = 0;
        bool neg = us < 0;

        if (neg)
                us = -us;
        if (us == 0) {
                puts_(l, "0s");
                return;
        }
        if (us < 1000) {
                putf(l, "%s%lldµs", neg ? "-" : "", us);
                return;
        }
        if (us < 1000000) {
                n = (size_t) snprintf(tmp, sizeof tmp, "%lld.%03lld", us / 1000, us % 1000);
                while (tmp[n - 1] == '0')
                        tmp[--n] = '\0';
                if (tmp[n - 1] == '.')
                        tmp[--n] = '\0';
                putf(l, "%s%sms", neg ? "-" : "", tmp);
                return;
        }
        long long h = us / 3600000000LL, m = us / 60000000LL % 60, sec = us / 1000000 % 60, frac = us % 1000000;
        n = (size_t) snprintf(tmp, sizeof tmp, "%lld.%06lld", sec, frac);
        while (tmp[n - 1] == '0')
                tmp[--n] = '\0';
        if (tmp[n - 1] == '.')
                tmp[--n] = '\0';
        putf(l, "%s", neg ? "-" : "");
        if (h > 0)
                putf(l, "%lldh", h);
        if (h > 0 || m > 0)
                putf(l, "%lldm", m);
        putf(l, "%ss", tmp);
}

static void put_header(struct line *l, enum log_severity sev, int v, int err, const char *file, int line,
                       const char *msg_text) {
        static const char letters[] = {
                [LOG_SEV_INFO] = 'I',
                [LOG_SEV_WARNING] = 'W',
                [LOG_SEV_ERROR] = 'E',
                [LOG_SEV_FATAL] = 'F',
        };
        struct timeval tv;
        struct tm tm;

        gettimeofday(&tv, NULL);
        if (log_format == LOG_FORMAT_JSON) {
                /* The caller as zap's short form: the last directory and the file. */
                const char *caller = file + strlen(file);
                for (int slashes = 0; caller > file; caller--)
                        if (caller[-1] == '/' && ++slashes == 2)
                                break;
                putf(l, "{\"ts\":%.3f,\"caller\":", (double) tv.tv_sec * 1000 + (double) tv.tv_usec / 1000);
                char where[320];
                snprintf(where, sizeof where, "%s:%d", caller, line);
                put_quoted(l, where);
                puts_(l, ",\"msg\":");
                put_quoted(l, msg_text);
                if (sev == LOG_SEV_ERROR || sev == LOG_SEV_FATAL) {
                        if (err) {
                                puts_(l, ",\"err\":");
                                put_quoted(l, strerror(err));
                        }
                } else {
                        putf(l, ",\"v\":%d", v);
                }
                return;
        }
        gmtime_r(&tv.tv_sec, &tm);
        const char *base = strrchr(file, '/');
        base = base ? base + 1 : file;
        putf(l, "%c%02d%02d %02d:%02d:%02d.%06ld %7d %s:%d] ", letters[sev], tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (long) tv.tv_usec, (int) getpid(), base, line);
}

static void finish(struct line *l, enum log_severity sev) {
        if (log_format == LOG_FORMAT_JSON)
                put(l, "}", 1);
        /* The newline always fits: put() keeps one byte spare. */
        l->b[l->len++] = '\n';
        FILE *out = log_split && sev < LOG_SEV_ERROR ? stdout : stderr;
        fwrite(l->b, 1, l->len, out);
        if (out == stdout && !log_buffered)
                fflush(out);
}

static void log_vwrite(enum log_severity sev, int v, int err, const char *file, int line, const char *fmt,
                       va_list ap) __attribute__((format(printf, 6, 0)));
static void log_vwrite(enum log_severity sev, int v, int err, const char *file, int line, const char *fmt,
                       va_list ap) {
        struct line l = {.len = 0};
        char msg[4096];

        vsnprintf(msg, sizeof msg, fmt, ap);
        if (log_format == LOG_FORMAT_JSON) {
                /* JSON has a place for the error: it is not part of msg. A
                 * warning (klog's Warning is Info at V(0) there) keeps it
                 * in msg, as klog's Warningf would. */
                if (err && sev < LOG_SEV_ERROR) {
                        size_t n = strlen(msg);
                        snprintf(msg + n, sizeof msg - n, ": %s", strerror(err));
                }
                put_header(&l, sev, v, sev >= LOG_SEV_ERROR ? err : 0, file, line, msg);
        } else {
                /* As klog, a newline that ends the message is the line's
                 * own; any other is escaped with the rest. */
                size_t n = strlen(msg);
                while (n > 0 && msg[n - 1] == '\n')
                        msg[--n] = '\0';
                put_header(&l, sev, v, err, file, line, NULL);
                put_escaped(&l, msg, false);
                if (err) {
                        puts_(&l, ": ");
                        puts_(&l, strerror(err));
                }
        }
        finish(&l, sev);
}

void log_internal(enum log_severity sev, int v, int err, const char *file, int line, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        log_vwrite(sev, v, err, file, line, fmt, ap);
        va_end(ap);
}

int log_internal_errno(enum log_severity sev, int r, const char *file, int line, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        log_vwrite(sev, 0, r < 0 ? -r : r, file, line, fmt, ap);
        va_end(ap);
        return r < 0 ? r : -r;
}

void log_internal_kv(enum log_severity sev, int v, int err, const char *file, int line, const char *msg, ...) {
        struct line l = {.len = 0};
        bool json = log_format == LOG_FORMAT_JSON;
        va_list ap;

        put_header(&l, sev, v, err, file, line, msg);
        if (!json) {
                /* klog's InfoS/ErrorS: the quoted message, then err first. */
                put_quoted(&l, msg);
                if (err) {
                        puts_(&l, " err=");
                        put_quoted(&l, strerror(err));
                }
        }
        va_start(ap, msg);
        for (;;) {
                const char *key = va_arg(ap, const char *);
                if (!key)
                        break;
                int type = va_arg(ap, int);
                if (json) {
                        put(&l, ",", 1);
                        put_quoted(&l, key);
                        put(&l, ":", 1);
                } else {
                        putf(&l, " %s=", key);
                }
                switch (type) {
                case LOG_KV_STR: {
                        const char *s = va_arg(ap, const char *);
                        put_quoted(&l, s ? s : "");
                        break;
                }
                case LOG_KV_INT:
                        putf(&l, "%lld", va_arg(ap, long long));
                        break;
                case LOG_KV_BOOL:
                        puts_(&l, va_arg(ap, int) ? "true" : "false");
                        break;
                case LOG_KV_SECONDS:
                        put(&l, "\"", 1);
                        put_duration(&l, va_arg(ap, double));
                        put(&l, "\"", 1);
                        break;
                default:
                        /* A caller that skipped the KV_ macros: the rest cannot be read. */
                        va_end(ap);
                        finish(&l, sev);
                        return;
                }
        }
        va_end(ap);
        finish(&l, sev);
}
