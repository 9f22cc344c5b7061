/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: untrusted text in log messages (util/log.c), in both
 * formats, as a free-text message and as a structured value. Whatever the
 * bytes, each message is exactly one line: in text, the klog header and
 * nothing after the line's only newline; in JSON, one object that reads
 * back with the text as it was logged (invalid UTF-8 as U+FFFD), within
 * the line's length cap.
 */
#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static int out_fd = -1, saved_fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        (void) argc, (void) argv;
        out_fd = memfd_create("log", MFD_CLOEXEC);
        saved_fd = dup(STDERR_FILENO);
        return out_fd < 0 || saved_fd < 0 ? -1 : 0;
}

/* What the call wrote to stderr, NUL-terminated, into out. */
static size_t capture(void (*fn)(const char *text), const char *text, char *out, size_t cap) {
        fflush(stderr);
        if (ftruncate(out_fd, 0) < 0 || lseek(out_fd, 0, SEEK_SET) < 0)
                abort();
        dup2(out_fd, STDERR_FILENO);
        fn(text);
        fflush(stderr);
        dup2(saved_fd, STDERR_FILENO);
        ssize_t n = pread(out_fd, out, cap - 1, 0);
        assert(n > 0);
        out[n] = '\0';
        return (size_t) n;
}

static void emit_text(const char *text) {
        log_warning("Invalid Service %s: bad name", text);
}

static void emit_kv(const char *text) {
        log_info_kv("Forged", KV_STR("name", text), KV_INT("n", 1));
}

static void one_line(const char *out, size_t n) {
        assert(n >= 2 && out[n - 1] == '\n' && memchr(out, '\n', n) == out + n - 1);
        assert(strlen(out) == n);       /* no NUL inside */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static char out[16384];
        char *text = malloc(size + 1);
        size_t n;

        if (!text)
                abort();
        memcpy(text, data, size);
        text[size] = '\0';

        log_set_format(LOG_FORMAT_TEXT);
        n = capture(emit_text, text, out, sizeof out);
        one_line(out, n);
        assert(out[0] == 'W' && strstr(out, "] Invalid Service "));
        /* No byte that can end or hide a line survives. */
        for (size_t i = 0; i + 1 < n; i++)
                assert((unsigned char) out[i] >= 0x20 && out[i] != 0x7f);
        n = capture(emit_kv, text, out, sizeof out);
        one_line(out, n);

        log_set_format(LOG_FORMAT_JSON);
        for (int kv = 0; kv <= 1; kv++) {
                n = capture(kv ? emit_kv : emit_text, text, out, sizeof out);
                one_line(out, n);
                json_error_t e;
                json_t *j = json_loads(out, JSON_DISABLE_EOF_CHECK, &e);
                /* A line cut at the cap is not an object any more. */
                if (n < 8000) {
                        assert(j);
                        assert(!strstr(out, "\xe2\x80\xa8") && !strstr(out, "\xe2\x80\xa9"));
                        const char *got = json_string_value(json_object_get(j, kv ? "name" : "msg"));
                        assert(got);
                        if (!kv)
                                assert(strncmp(got, "Invalid Service ", 16) == 0);
                        /* Valid UTF-8 (jansson's rules are Go's) reads back
                         * as it was logged. */
                        json_t *probe = json_string(text);
                        if (probe && kv)
                                assert(strcmp(got, text) == 0);
                        json_decref(probe);
                }
                json_decref(j);
        }
        log_set_format(LOG_FORMAT_TEXT);
        free(text);
        return 0;
}
