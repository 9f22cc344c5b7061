/* SPDX-License-Identifier: Apache-2.0 */
/* kube/watch-stream: a watch body cut into lines whatever the chunks, and
 * each line read as one event. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

#include "kube/watch-stream.h"
#include "test.h"
#include "util/buf.h"

struct lines {
        char got[16][64];
        size_t n;
        size_t stop_at;         /* return false for this line (1-based); 0: never */
};

static bool collect(void *userdata, const char *line, size_t len) {
        struct lines *l = userdata;

        if (l->n < 16)
                snprintf(l->got[l->n], sizeof l->got[0], "%.*s", (int) len, line);
        l->n++;
        return l->n != l->stop_at;
}

/* Feeds text in chunks of every size from 1 to its length and checks that
 * the lines come out the same each time. */
static void test_lines_any_chunking(void) {
        static const char text[] = "{\"a\":1}\n\n{\"b\":\"x\\ny\"}\n{\"c\":3}\npartial";

        for (size_t chunk = 1; chunk <= sizeof text - 1; chunk++) {
                struct buf b = BUF_INIT;
                struct lines l = {0};

                for (size_t off = 0; off < sizeof text - 1; off += chunk) {
                        size_t n = sizeof text - 1 - off < chunk ? sizeof text - 1 - off : chunk;

                        buf_put(&b, text + off, n);
                        CHECK(kube_watch_stream_lines(&b, collect, &l));
                }
                /* The empty line is skipped; the last, unterminated line waits. */
                CHECK(l.n == 3);
                CHECK_STREQ(l.got[0], "{\"a\":1}");
                CHECK_STREQ(l.got[1], "{\"b\":\"x\\ny\"}");
                CHECK_STREQ(l.got[2], "{\"c\":3}");
                CHECK(b.len == 7 && memcmp(b.data, "partial", 7) == 0);
                buf_put(&b, "\n", 1);
                CHECK(kube_watch_stream_lines(&b, collect, &l));
                CHECK(l.n == 4);
                CHECK_STREQ(l.got[3], "partial");
                CHECK(b.len == 0);
                buf_done(&b);
        }
}

static void test_lines_stop(void) {
        struct buf b = BUF_INIT;
        struct lines l = {.stop_at = 2};

        buf_puts(&b, "one\ntwo\nthree\nfou");
        CHECK(!kube_watch_stream_lines(&b, collect, &l));
        CHECK(l.n == 2);                /* nothing after the stop */
        CHECK_STREQ(l.got[1], "two");
        /* The stopping line is consumed; what follows is kept. */
        CHECK(b.len == strlen("three\nfou") && memcmp(b.data, "three\nfou", b.len) == 0);
        buf_done(&b);
}

static int parse(const char *line, struct kube_watch_event *e) {
        char why[128] = "";

        return kube_watch_event_parse(line, strlen(line), e, why, sizeof why);
}

static void test_events(void) {
        struct kube_watch_event e;

        CHECK(parse("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"7\"}}}", &e) ==
              0);
        CHECK(e.type == KUBE_WATCH_ADDED && e.object && e.rv && strcmp(e.rv, "7") == 0);
        CHECK_STREQ(json_string_value(json_object_get(json_object_get(e.object, "metadata"), "name")), "a");
        kube_watch_event_done(&e);
        CHECK(e.root == NULL);

        CHECK(parse("{\"type\":\"MODIFIED\",\"object\":{}}", &e) == 0);
        CHECK(e.type == KUBE_WATCH_MODIFIED && e.object && e.rv == NULL);
        kube_watch_event_done(&e);
        CHECK(parse("{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}", &e) == 0);
        CHECK(e.type == KUBE_WATCH_DELETED && strcmp(e.rv, "9") == 0);
        kube_watch_event_done(&e);
        CHECK(parse("{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}", &e) == 0);
        CHECK(e.type == KUBE_WATCH_BOOKMARK && strcmp(e.rv, "12") == 0);
        kube_watch_event_done(&e);

        /* An ERROR carries a Status. */
        CHECK(parse("{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"message\":\"too old\"}}", &e) ==
              0);
        CHECK(e.type == KUBE_WATCH_ERROR && e.code == 410 && strcmp(e.message, "too old") == 0);
        kube_watch_event_done(&e);
        CHECK(parse("{\"type\":\"ERROR\",\"object\":{}}", &e) == 0);
        CHECK(e.type == KUBE_WATCH_ERROR && e.code == 0 && e.message == NULL);
        kube_watch_event_done(&e);

        /* Types are case-sensitive; an unknown one keeps its name. */
        CHECK(parse("{\"type\":\"added\",\"object\":{}}", &e) == 0);
        CHECK(e.type == KUBE_WATCH_UNKNOWN && strcmp(e.type_name, "added") == 0);
        kube_watch_event_done(&e);
        /* No type, or an object that is not one: incomplete, but a
         * resourceVersion that came is still read. */
        CHECK(parse("{\"object\":{\"metadata\":{\"resourceVersion\":\"5\"}}}", &e) == 0);
        CHECK(e.type == KUBE_WATCH_INCOMPLETE && e.type_name == NULL && strcmp(e.rv, "5") == 0);
        kube_watch_event_done(&e);
        CHECK(parse("{\"type\":\"ADDED\",\"object\":[1]}", &e) == 0);
        CHECK(e.type == KUBE_WATCH_INCOMPLETE && e.object == NULL && e.rv == NULL);
        kube_watch_event_done(&e);
        CHECK(parse("{\"type\":7,\"object\":{}}", &e) == 0);
        CHECK(e.type == KUBE_WATCH_INCOMPLETE);
        kube_watch_event_done(&e);
}

static void test_malformed(void) {
        struct kube_watch_event e = {.type = KUBE_WATCH_BOOKMARK};
        char why[128] = "";

        CHECK(kube_watch_event_parse("[1,2]", 5, &e, why, sizeof why) == -EINVAL);
        CHECK_STREQ(why, "not an object");
        CHECK(e.type == KUBE_WATCH_BOOKMARK && e.root == NULL);         /* untouched */
        CHECK(kube_watch_event_parse("{\"type\":", 8, &e, why, sizeof why) == -EINVAL);
        CHECK(why[0] != '\0');
        /* Only len bytes count: a complete object followed by more. */
        CHECK(kube_watch_event_parse("{\"type\":\"ADDED\",\"object\":{}}garbage", 28, &e, why, sizeof why) == 0);
        CHECK(e.type == KUBE_WATCH_ADDED);
        kube_watch_event_done(&e);
}

int main(void) {
        TEST_RUN(test_lines_any_chunking);
        TEST_RUN(test_lines_stop);
        TEST_RUN(test_events);
        TEST_RUN(test_malformed);
        TEST_DONE();
}
