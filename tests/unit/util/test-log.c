/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The log's two formats, read back as written: klog's text lines with
 * structured values, component-base's JSON (parsed with jansson, so every
 * line must be one valid object), escaping of untrusted text, Go duration
 * strings, and -vmodule.
 */
#include <errno.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/intake.h"
#include "test.h"
#include "util/cleanup.h"
#include "util/log.h"

/* Runs fn with stderr going to a temporary file, returns what it wrote. */
static char *capture(void (*fn)(void)) {
        static char out[16384];
        FILE *tmp = tmpfile();
        int saved = dup(STDERR_FILENO);
        fflush(stderr);
        dup2(fileno(tmp), STDERR_FILENO);
        fn();
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        rewind(tmp);
        size_t n = fread(out, 1, sizeof out - 1, tmp);
        out[n] = '\0';
        fclose(tmp);
        return out;
}

static void emit_structured(void) {
        log_v_kv(2, "SyncProxyRules complete", KV_STR("ipFamily", "IPv4"), KV_SECONDS("elapsed", 0.0123456),
                 KV_INT("numServices", 42), KV_BOOL("fullSync", 1));
        log_error_kv(-ENOENT, "Failed to read", KV_STR("name", "a\"b\nc\\d\x01"));
        log_warning("plain %s", "warning");
        log_error_errno(-EACCES, "plain error");
        log_v(5, "not shown at -v=2");
}

static void test_text(void) {
        log_set_format(LOG_FORMAT_TEXT);
        log_set_verbosity(2);
        char *out = capture(emit_structured);
        CHECK(strstr(out, "] \"SyncProxyRules complete\" ipFamily=\"IPv4\" elapsed=\"12.346ms\" numServices=42 "
                          "fullSync=true\n"));
        CHECK(out[0] == 'I');
        /* ErrorS: err first; a value cannot break the line. */
        CHECK(strstr(out, "] \"Failed to read\" err=\"No such file or directory\" name=\"a\\\"b\\nc\\\\d\\u0001\"\n"));
        CHECK(strstr(out, "\nW") && strstr(out, "] plain warning\n"));
        CHECK(strstr(out, "] plain error: Permission denied\n"));
        CHECK(!strstr(out, "not shown"));
        size_t lines = 0;
        for (char *p = out; *p; p++)
                lines += *p == '\n';
        CHECK(lines == 4);
}

static void test_json(void) {
        log_set_format(LOG_FORMAT_JSON);
        log_set_verbosity(2);
        char *out = capture(emit_structured);
        log_set_format(LOG_FORMAT_TEXT);
        json_t *lines[4] = {NULL};
        size_t n = 0;
        for (char *p = out; *p && n < 4;) {
                char *nl = strchr(p, '\n');
                CHECK(nl);
                if (!nl)
                        break;
                *nl = '\0';
                lines[n] = json_loads(p, 0, NULL);
                CHECK(lines[n]);
                n++;
                p = nl + 1;
        }
        CHECK(n == 4);
        if (n < 4)
                goto out;
        /* Info: ts (Unix milliseconds), caller (dir/file:line), msg, v, then the pairs. */
        CHECK(json_is_real(json_object_get(lines[0], "ts")) &&
              json_real_value(json_object_get(lines[0], "ts")) > 1.6e12);
        CHECK(strncmp(json_string_value(json_object_get(lines[0], "caller")), "util/test-log.c:", 16) == 0);
        CHECK_STREQ(json_string_value(json_object_get(lines[0], "msg")), "SyncProxyRules complete");
        CHECK(json_integer_value(json_object_get(lines[0], "v")) == 2);
        CHECK_STREQ(json_string_value(json_object_get(lines[0], "ipFamily")), "IPv4");
        CHECK_STREQ(json_string_value(json_object_get(lines[0], "elapsed")), "12.346ms");
        CHECK(json_integer_value(json_object_get(lines[0], "numServices")) == 42);
        CHECK(json_is_true(json_object_get(lines[0], "fullSync")));
        /* Error: "err", no "v"; the escaped value reads back exactly. */
        CHECK(!json_object_get(lines[1], "v"));
        CHECK_STREQ(json_string_value(json_object_get(lines[1], "err")), "No such file or directory");
        CHECK_STREQ(json_string_value(json_object_get(lines[1], "name")), "a\"b\nc\\d\x01");
        /* A warning is klog's Info at V(0) there; printf-style errors keep errno in "err". */
        CHECK(json_integer_value(json_object_get(lines[2], "v")) == 0);
        CHECK_STREQ(json_string_value(json_object_get(lines[2], "msg")), "plain warning");
        CHECK_STREQ(json_string_value(json_object_get(lines[3], "msg")), "plain error");
        CHECK_STREQ(json_string_value(json_object_get(lines[3], "err")), "Permission denied");
out:
        for (size_t i = 0; i < 4; i++)
                json_decref(lines[i]);
}

static size_t count_lines(const char *s) {
        size_t n = 0;
        for (; *s; s++)
                n += *s == '\n';
        return n;
}

/* What a name or a tool's output may hold to break a line, in a free-text
 * message: each escaped, the valid text around it kept as it is. */
static const char forged[] = "a\nE0101 00:00:00.000000       1 forged.go:1] pwned\r\x1b[2J\xc2\x85|\xe2\x80\xa8|"
                             "\xe2\x80\xa9|\x7f|\xff|\xc0\x8a|\xed\xa0\x80|\xf4\x90\x80\x80|\t \"q\" \\ µ 日本 \xf0\x9f\x99\x82";
static const char forged_escaped[] =
        "a\\nE0101 00:00:00.000000       1 forged.go:1] pwned\\r\\u001b[2J\\u0085|\\u2028|\\u2029|\\u007f|\\ufffd|"
        "\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd\\ufffd|\\t \"q\" \\ µ 日本 \xf0\x9f\x99\x82";

static void emit_forged(void) {
        log_warning("name %s", forged);
        /* A tool's complaint, several lines that end in a newline. */
        log_error("restore failed: %s", "line 3 failed\nError occurred at line: 3\n\n");
        log_info_kv("Forged", KV_STR("name", forged));
}

static void test_text_escapes(void) {
        log_set_format(LOG_FORMAT_TEXT);
        char *out = capture(emit_forged);
        char want[512];
        snprintf(want, sizeof want, "] name %s\n", forged_escaped);
        CHECK(strstr(out, want));
        CHECK(strstr(out, "] restore failed: line 3 failed\\nError occurred at line: 3\n"));
        CHECK(strstr(out, "] \"Forged\" name=\"a\\nE0101 00:00:00.000000       1 forged.go:1] pwned\\r\\u001b[2J"
                          "\\u0085|\\u2028|\\u2029|\\u007f|\\ufffd|"));
        CHECK(strstr(out, "|\\t \\\"q\\\" \\\\ µ 日本 \xf0\x9f\x99\x82\"\n"));
        CHECK(count_lines(out) == 3);
        CHECK(out[0] == 'W' && !strstr(out, "\nE0101"));
}

static void test_json_escapes(void) {
        log_set_format(LOG_FORMAT_JSON);
        char *out = capture(emit_forged);
        log_set_format(LOG_FORMAT_TEXT);
        CHECK(count_lines(out) == 3);
        /* The separators are escaped in the raw line, as Go's encoder
         * writes them; every line reads back as the text logged, but for
         * the invalid UTF-8, which reads back as U+FFFD. */
        CHECK(!strstr(out, "\xe2\x80\xa8") && strstr(out, "\\u2028"));
        char *nl = strchr(out, '\n');
        CHECK(nl);
        if (!nl)
                return;
        *nl = '\0';
        json_t *j = json_loads(out, 0, NULL);
        CHECK(j);
        const char *msg = json_string_value(json_object_get(j, "msg"));
        CHECK(msg && strncmp(msg, "name a\nE0101 00:00:00.000000       1 forged.go:1] pwned\r\x1b[2J\xc2\x85|", 59) == 0);
        CHECK(msg && strstr(msg, "|\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|"));
        json_decref(j);
}

/* A Service named with a newline, as the API server would send it to the
 * watch: the warning about it is one line, and what follows the newline
 * stays inside it. */
static struct intake *forging_intake;

static void emit_forged_service(void) {
        static const char svc[] =
                "{\"kind\":\"Service\",\"metadata\":{\"namespace\":\"default\",\"name\":"
                "\"web\\nE0101 12:00:00.000000       1 forged.go:1] \\\"Forged\\\" pwned=\\\"yes\\\"\"},"
                "\"spec\":{\"clusterIP\":\"10.96.0.1\",\"clusterIPs\":[\"10.96.0.1\"],\"ports\":[{\"port\":80}]}}";
        json_t *obj = json_loads(svc, 0, NULL);
        const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
        char key[256];

        snprintf(key, sizeof key, "default/%s", name ? name : "");
        intake_object(forging_intake, INTAKE_SERVICES, key, obj);
        json_decref(obj);
}

static void test_forged_service_name(void) {
        CHECK(intake_new("node-1", NULL, &forging_intake) == 0);
        log_set_format(LOG_FORMAT_TEXT);
        char *out = capture(emit_forged_service);
        CHECK(count_lines(out) == 1);
        CHECK(out[0] == 'W' && strstr(out, "] Invalid Service default/web\\nE0101 12:00:00.000000"));
        CHECK(!strstr(out, "\nE0101"));
        log_set_format(LOG_FORMAT_JSON);
        out = capture(emit_forged_service);
        log_set_format(LOG_FORMAT_TEXT);
        CHECK(count_lines(out) == 1);
        json_t *j = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
        CHECK(j && strstr(json_string_value(json_object_get(j, "msg")), "default/web\nE0101 12:00:00.000000"));
        json_decref(j);
        forging_intake = intake_free(forging_intake);
}

static double durations[] = {0, 0.0000004, 0.000123, 0.5, 1.5, 61.25, 3725.000001};
static const char *const want_durations[] = {"0s", "0s", "123µs", "500ms", "1.5s", "1m1.25s", "1h2m5.000001s"};
static size_t duration_i;

static void emit_duration(void) {
        log_info_kv("d", KV_SECONDS("d", durations[duration_i]));
}

static void test_durations(void) {
        log_set_format(LOG_FORMAT_TEXT);
        for (duration_i = 0; duration_i < ELEMENTSOF(durations); duration_i++) {
                char want[64];
                snprintf(want, sizeof want, " d=\"%s\"\n", want_durations[duration_i]);
                char *out = capture(emit_duration);
                if (!strstr(out, want)) {
                        fprintf(stderr, "duration %g: got %s", durations[duration_i], out);
                        CHECK(!"duration");
                }
        }
}

static void emit_v3(void) {
        log_v(3, "verbose line");
}

static void test_vmodule(void) {
        log_set_format(LOG_FORMAT_TEXT);
        log_set_verbosity(0);
        CHECK(log_set_vmodule("test-l*=3,other=1") == 0);
        CHECK(strstr(capture(emit_v3), "verbose line"));
        CHECK(log_set_vmodule("test-log=2") == 0);
        CHECK(!strstr(capture(emit_v3), "verbose line"));
        CHECK(log_set_vmodule("*/unit/util/test-log=3") == 0);  /* with a slash: the whole path */
        CHECK(strstr(capture(emit_v3), "verbose line"));
        CHECK(log_set_vmodule("unit/util/test-log=3") == 0);
        CHECK(!strstr(capture(emit_v3), "verbose line"));
        CHECK(log_set_vmodule("bad") == -EINVAL);
        CHECK(log_set_vmodule("x=-1") == -EINVAL);
        CHECK(log_set_vmodule("=3") == -EINVAL);
        CHECK(log_set_vmodule(NULL) == 0);
        CHECK(!strstr(capture(emit_v3), "verbose line"));
}

/* --log-*-split-stream: info and warnings to stdout, errors to stderr; with
 * a buffer, info waits in it until log_flush(). */
static void test_split_stream(void) {
        FILE *out = tmpfile(), *err = tmpfile();
        int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
        char text[4096];
        size_t n;

        fflush(stdout);
        fflush(stderr);
        dup2(fileno(out), STDOUT_FILENO);
        dup2(fileno(err), STDERR_FILENO);
        log_set_format(LOG_FORMAT_TEXT);
        log_set_split_stream(1, 1 << 16);
        log_info("an info line");
        log_error("an error line");
        struct stat st;
        CHECK(fstat(fileno(out), &st) == 0 && st.st_size == 0);      /* buffered */
        log_flush();
        CHECK(fstat(fileno(out), &st) == 0 && st.st_size > 0);
        log_set_split_stream(0, 0);
        fflush(stdout);
        fflush(stderr);
        dup2(saved_out, STDOUT_FILENO);
        dup2(saved_err, STDERR_FILENO);
        close(saved_out);
        close(saved_err);
        rewind(out);
        n = fread(text, 1, sizeof text - 1, out);
        text[n] = '\0';
        CHECK(strstr(text, "an info line") && !strstr(text, "an error line"));
        rewind(err);
        n = fread(text, 1, sizeof text - 1, err);
        text[n] = '\0';
        CHECK(strstr(text, "an error line") && !strstr(text, "an info line"));
        fclose(out);
        fclose(err);
}

int main(void) {
        TEST_RUN(test_text);
        TEST_RUN(test_json);
        TEST_RUN(test_text_escapes);
        TEST_RUN(test_json_escapes);
        TEST_RUN(test_forged_service_name);
        TEST_RUN(test_durations);
        TEST_RUN(test_vmodule);
        TEST_RUN(test_split_stream);
        TEST_DONE();
}
