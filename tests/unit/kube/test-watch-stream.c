/* SPDX-License-Identifier: Apache-2.0 */
/* kube/watch-stream: a watch body cut into lines whatever the chunks, in
 * time proportional to its bytes, an over-long line skipped and named, and
 * each line read as one event. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <time.h>

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

/* The framer gives the same lines as the one-shot reader for every chunk
 * size, and keeps only the unfinished line. */
static void test_feed_any_chunking(void) {
        static const char text[] = "{\"a\":1}\n\n{\"b\":\"x\\ny\"}\n{\"c\":3}\npartial";
        static const struct kube_watch_stream_ops ops = {.line = collect};

        for (size_t chunk = 1; chunk <= sizeof text - 1; chunk++) {
                struct kube_watch_stream s = {0};
                struct lines l = {0};

                for (size_t off = 0; off < sizeof text - 1; off += chunk) {
                        size_t n = sizeof text - 1 - off < chunk ? sizeof text - 1 - off : chunk;
                        CHECK(kube_watch_stream_feed(&s, text + off, n, &ops, &l));
                }
                CHECK(l.n == 3);
                CHECK_STREQ(l.got[0], "{\"a\":1}");
                CHECK_STREQ(l.got[1], "{\"b\":\"x\\ny\"}");
                CHECK_STREQ(l.got[2], "{\"c\":3}");
                CHECK(s.line.len == 7 && memcmp(s.line.data, "partial", 7) == 0);
                CHECK(kube_watch_stream_feed(&s, "\n", 1, &ops, &l));
                CHECK(l.n == 4);
                CHECK_STREQ(l.got[3], "partial");
                CHECK(s.line.len == 0);
                kube_watch_stream_reset(&s);
        }
}

static void test_feed_stop(void) {
        static const struct kube_watch_stream_ops ops = {.line = collect};
        struct kube_watch_stream s = {0};
        struct lines l = {.stop_at = 2};

        CHECK(kube_watch_stream_feed(&s, "one\ntw", 6, &ops, &l));
        CHECK(!kube_watch_stream_feed(&s, "o\nthree\n", 8, &ops, &l));
        CHECK(l.n == 2);                /* nothing after the stop */
        CHECK_STREQ(l.got[1], "two");
        kube_watch_stream_reset(&s);
}

struct big {
        size_t lines, oversize, len;
        char head[KUBE_WATCH_HEAD + 1];
        char last[32];
};

static bool big_line(void *userdata, const char *line, size_t len) {
        struct big *b = userdata;
        b->lines++;
        snprintf(b->last, sizeof b->last, "%.*s", (int) len, line);
        return true;
}

static void big_oversize(void *userdata, size_t len, const char *head, size_t head_len) {
        struct big *b = userdata;
        b->oversize++;
        b->len = len;
        snprintf(b->head, sizeof b->head, "%.*s", (int) head_len, head);
}

/* A line over the cap is counted, not kept, however it is chunked (it
 * ends in the chunk it began in, or many chunks later), and the stream
 * goes on with the next line. */
static void test_feed_oversize(void) {
        static const struct kube_watch_stream_ops ops = {.line = big_line, .oversize = big_oversize};
        const char *event = "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Service\",\"metadata\":{\"name\":\"big\","
                            "\"namespace\":\"ns\"},\"x\":\"";

        for (size_t chunk = 1; chunk <= 70; chunk += 23) {
                struct kube_watch_stream s = {.max = 64};
                struct big b = {0};
                struct buf text = BUF_INIT;

                buf_puts(&text, "{\"small\":1}\n");
                buf_puts(&text, event);
                for (int i = 0; i < 10; i++)
                        buf_puts(&text, "0123456789");
                buf_puts(&text, "\"}}\n{\"ok\":2}\n");
                for (size_t off = 0; off < text.len; off += chunk) {
                        size_t n = text.len - off < chunk ? text.len - off : chunk;
                        CHECK(kube_watch_stream_feed(&s, text.data + off, n, &ops, &b));
                        CHECK(s.line.len <= 64);
                }
                CHECK(b.lines == 2 && b.oversize == 1);
                CHECK_STREQ(b.last, "{\"ok\":2}");
                CHECK(b.len == strlen(event) + 100 + 3);
                CHECK(strncmp(b.head, event, strlen(event)) == 0);
                char what[128];
                CHECK_STREQ(kube_watch_event_describe(b.head, strlen(b.head), what, sizeof what), "Service ns/big");
                CHECK(s.dropping == 0 && s.line.len == 0);
                kube_watch_stream_reset(&s);
                buf_done(&text);
        }
}

/* Protobuf frames (a 4-byte big-endian length each): the same events
 * whatever the chunks, an empty frame skipped, one over the cap skipped
 * with its head kept, and a stop honoured mid-chunk. */
static void test_frames_any_chunking(void) {
        static const struct kube_watch_stream_ops ops = {.line = big_line, .oversize = big_oversize};
        struct buf text = BUF_INIT;
        char big[100];

        memset(big, 'x', sizeof big);
        buf_put(&text, "\0\0\0\3one", 7);
        buf_put(&text, "\0\0\0\0", 4);             /* empty */
        buf_put(&text, "\0\0\0\x64", 4);            /* 100 bytes: over the cap of 64 */
        buf_put(&text, big, sizeof big);
        buf_put(&text, "\0\0\0\5three", 9);
        buf_put(&text, "\0\0\0\4pa", 6);            /* cut: waits */
        for (size_t chunk = 1; chunk <= text.len; chunk++) {
                struct kube_watch_stream s = {.max = 64};
                struct big b = {0};
                s.framed = true;
                for (size_t off = 0; off < text.len; off += chunk) {
                        size_t n = text.len - off < chunk ? text.len - off : chunk;
                        CHECK(kube_watch_stream_feed(&s, text.data + off, n, &ops, &b));
                        CHECK(s.line.len <= 64);
                }
                CHECK(b.lines == 2 && b.oversize == 1 && b.len == 100);
                CHECK_STREQ(b.last, "three");
                CHECK(strlen(b.head) == 100 || strlen(b.head) == KUBE_WATCH_HEAD);
                CHECK(kube_watch_stream_feed(&s, "rt", 2, &ops, &b));
                CHECK(b.lines == 3);
                CHECK_STREQ(b.last, "part");
                kube_watch_stream_reset(&s);
                CHECK(!s.framed);               /* lines again until told */
        }
        buf_done(&text);

        /* A stop in the middle of a chunk: nothing after it is read. */
        static const struct kube_watch_stream_ops stop_ops = {.line = collect};
        struct kube_watch_stream s = {.framed = true};
        struct lines l = {.stop_at = 1};
        CHECK(!kube_watch_stream_feed(&s, "\0\0\0\1a\0\0\0\1b", 10, &stop_ops, &l));
        CHECK(l.n == 1);
        kube_watch_stream_reset(&s);

        /* The largest length a frame can say (4 GiB - 1): skipped by count. */
        struct big b = {0};
        s = (struct kube_watch_stream) {.framed = true};
        CHECK(kube_watch_stream_feed(&s, "\xff\xff\xff\xff" "abc", 7, &ops, &b));
        CHECK(b.lines == 0 && s.skip_left == 0xffffffffu - 3 && s.line.len == 0);
        kube_watch_stream_reset(&s);
}

/* The cost is in the bytes: a 16 MB event in 16 KB chunks (as libcurl hands
 * them) is framed in about the time of one pass over it, and skipped; before,
 * each chunk rescanned the whole line (3.3 s). */
static void test_feed_large_is_linear(void) {
        static const struct kube_watch_stream_ops ops = {.line = big_line, .oversize = big_oversize};
        size_t size = 16u << 20;
        char *chunk = malloc(16384);
        struct kube_watch_stream s = {0};
        struct big b = {0};
        struct timespec t0, t1;

        CHECK(chunk != NULL);
        if (!chunk)
                return;
        memset(chunk, 'x', 16384);
        const char *start = "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Service\",\"metadata\":{\"name\":\"huge\",";
        memcpy(chunk, start, strlen(start));
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (size_t off = 0; off < size; off += 16384) {
                kube_watch_stream_feed(&s, chunk, 16384, &ops, &b);
                chunk[0] = 'x';
        }
        kube_watch_stream_feed(&s, "\n", 1, &ops, &b);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double) (t1.tv_sec - t0.tv_sec) * 1e3 + (double) (t1.tv_nsec - t0.tv_nsec) / 1e6;
        CHECK(b.oversize == 1 && b.len == size && b.lines == 0);
        char what[128];
        CHECK_STREQ(kube_watch_event_describe(b.head, strlen(b.head), what, sizeof what), "Service huge");
        /* Under ASan too; quadratic framing took seconds. */
        if (ms > 500)
                fprintf(stderr, "framing 16 MB took %.0f ms\n", ms);
        CHECK(ms < 500);
        CHECK(s.line.cap == 0);         /* nothing of it kept */
        kube_watch_stream_reset(&s);
        free(chunk);
}

static void test_describe(void) {
        char out[64];
        const char *h = "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"EndpointSlice\",\"apiVersion\":\"v1\","
                        "\"metadata\":{\"name\":\"web-1\",\"generateName\":\"web-\",\"namespace\":\"shop\"";

        CHECK_STREQ(kube_watch_event_describe(h, strlen(h), out, sizeof out), "EndpointSlice shop/web-1");
        /* Cut before the namespace; a kind alone; nothing. */
        CHECK_STREQ(kube_watch_event_describe(h, strstr(h, ",\"gen") - h, out, sizeof out), "EndpointSlice web-1");
        CHECK_STREQ(kube_watch_event_describe(h, 60, out, sizeof out), "EndpointSlice");
        CHECK_STREQ(kube_watch_event_describe("", 0, out, sizeof out), "");
        /* Untrusted bytes: a name with a newline or a quote is not copied. */
        h = "{\"object\":{\"kind\":\"Ser\\nvice\",\"metadata\":{\"name\":\"a\nE0101 forged\"}}}";
        CHECK_STREQ(kube_watch_event_describe(h, strlen(h), out, sizeof out), "");
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

        /* A resourceVersion is opaque text, kept as sent; one that is no
         * usable version (empty, not a string, over 1024 bytes) is none. */
        CHECK(parse("{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"abc/def+1\"}}}", &e) == 0);
        CHECK_STREQ(e.rv, "abc/def+1");
        kube_watch_event_done(&e);
        static const char *const unusable[] = {"\"\"", "12", "null", "{}", "[\"1\"]"};
        for (size_t i = 0; i < sizeof unusable / sizeof unusable[0]; i++) {
                char line[128];
                snprintf(line, sizeof line, "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":%s}}}",
                         unusable[i]);
                CHECK(parse(line, &e) == 0);
                CHECK(e.type == KUBE_WATCH_BOOKMARK && e.rv == NULL);
                kube_watch_event_done(&e);
        }
        struct buf longrv = BUF_INIT;
        buf_puts(&longrv, "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"");
        for (int i = 0; i < 1025; i++)
                buf_putc(&longrv, '7');
        buf_puts(&longrv, "\"}}}");
        CHECK(parse(longrv.data, &e) == 0 && e.rv == NULL);
        kube_watch_event_done(&e);
        buf_done(&longrv);

        /* An ERROR's reason is read too (Expired, Invalid, ...). */
        CHECK(parse("{\"type\":\"ERROR\",\"object\":{\"code\":422,\"reason\":\"Invalid\"}}", &e) == 0);
        CHECK(e.code == 422 && strcmp(e.reason, "Invalid") == 0);
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
        TEST_RUN(test_feed_any_chunking);
        TEST_RUN(test_feed_stop);
        TEST_RUN(test_feed_oversize);
        TEST_RUN(test_feed_large_is_linear);
        TEST_RUN(test_frames_any_chunking);
        TEST_RUN(test_describe);
        TEST_RUN(test_events);
        TEST_RUN(test_malformed);
        TEST_DONE();
}
