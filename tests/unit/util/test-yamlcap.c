/* SPDX-License-Identifier: Apache-2.0 */
/* The YAML caps on libyaml's events: depth, and what aliases expand to,
 * each at its exact limit and one past it; aliases that refer to
 * themselves or to nothing; anchors per document, totals per stream. */
#include <errno.h>
#include <yaml.h>

#include "test.h"
#include "util/buf.h"
#include "util/yamlcap.h"

static char problem[256];

/* Feeds text's events to a fresh counter until one fails or the stream
 * ends; returns that failure or 0 (-EIO: libyaml could not parse it). */
static int run(const char *text, size_t len) {
        struct yamlcap *c = yamlcap_new();
        yaml_parser_t p;
        int r = 0;

        problem[0] = '\0';
        if (!c || !yaml_parser_initialize(&p))
                abort();
        yaml_parser_set_input_string(&p, (const unsigned char *) text, len);
        for (;;) {
                yaml_event_t ev;
                if (!yaml_parser_parse(&p, &ev)) {
                        r = -EIO;
                        break;
                }
                yaml_event_type_t type = ev.type;
                r = yamlcap_event(c, &ev);
                yaml_event_delete(&ev);
                if (r < 0 || type == YAML_STREAM_END_EVENT)
                        break;
        }
        snprintf(problem, sizeof problem, "%s", yamlcap_problem(c));
        yaml_parser_delete(&p);
        yamlcap_free(c);
        return r;
}

static int run_buf(const struct buf *b) {
        return run(b->data, b->len);
}

/* depth flow sequences, one inside the other, under a key. */
static void nested(struct buf *b, size_t depth, char open, char close) {
        buf_clear(b);
        buf_puts(b, "a: ");
        for (size_t i = 0; i < depth; i++) {
                buf_putc(b, open);
                if (open == '{')
                        buf_puts(b, "k: ");
        }
        buf_puts(b, open == '{' ? "1" : "");
        for (size_t i = 0; i < depth; i++)
                buf_putc(b, close);
        buf_putc(b, '\n');
}

static void test_depth(void) {
        struct buf b = BUF_INIT;

        /* The document's own mapping is a level: 63 more fit. */
        nested(&b, YAMLCAP_MAX_DEPTH - 1, '[', ']');
        CHECK(run_buf(&b) == 0);
        nested(&b, YAMLCAP_MAX_DEPTH, '[', ']');
        CHECK(run_buf(&b) == -E2BIG);
        CHECK_STREQ(problem, "collections nest deeper than 64 levels (the YAML depth cap)");
        nested(&b, YAMLCAP_MAX_DEPTH, '{', '}');
        CHECK(run_buf(&b) == -E2BIG);
        /* Block style counts the same. */
        buf_clear(&b);
        for (size_t i = 0; i < YAMLCAP_MAX_DEPTH + 1; i++)
                buf_puts(&b, "- ");
        buf_puts(&b, "x\n");
        CHECK(run_buf(&b) == -E2BIG);
        /* A deep document stops at the cap, whatever follows. */
        nested(&b, 100000, '[', ']');
        CHECK(run_buf(&b) == -E2BIG);
        /* Depth is per open collection: many siblings are fine. */
        buf_clear(&b);
        buf_puts(&b, "a:\n");
        for (size_t i = 0; i < 1000; i++)
                buf_puts(&b, "- [[[1]]]\n");
        CHECK(run_buf(&b) == 0);
        buf_done(&b);
}

/* An anchor of 10 nodes (a sequence of 9), then n aliases of it. */
static void aliases(struct buf *b, size_t n) {
        buf_clear(b);
        buf_puts(b, "a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9]\nb: [");
        for (size_t i = 0; i < n; i++)
                buf_puts(b, i ? ", *a" : "*a");
        buf_puts(b, "]\n");
}

static void test_alias_nodes(void) {
        struct buf b = BUF_INIT;

        aliases(&b, YAMLCAP_MAX_ALIAS_NODES / 10);
        CHECK(run_buf(&b) == 0);
        aliases(&b, YAMLCAP_MAX_ALIAS_NODES / 10 + 1);
        CHECK(run_buf(&b) == -E2BIG);
        CHECK_STREQ(problem, "aliases expand to more than 100000 nodes (the YAML alias expansion cap)");
        buf_done(&b);
}

/* "Billion laughs": each anchor holds ten aliases of the one before, so an
 * alias stands for its anchor expanded, not for one node. */
static void test_laughs(void) {
        struct buf b = BUF_INIT;

        buf_puts(&b, "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for (int i = 1; i < 10; i++)
                buf_printf(&b, "l%d: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d]\n", i, i,
                           i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
        CHECK(run_buf(&b) == -E2BIG);
        CHECK(strstr(problem, "100000 nodes"));
        /* Up to l3 (11,111 nodes) it is within the cap: l4 passes it. */
        buf_truncate(&b, (size_t) (strstr(b.data, "l4:") - b.data));
        CHECK(run_buf(&b) == 0);
        buf_done(&b);
}

/* Aliases of a long scalar: cheap in nodes, dear in copies. */
static void test_alias_bytes(void) {
        struct buf b = BUF_INIT;
        const size_t mib = 1u << 20;

        for (int extra = 0; extra <= 1; extra++) {
                buf_clear(&b);
                buf_puts(&b, "a: &a ");
                for (size_t i = 0; i < mib; i++)
                        buf_putc(&b, 'x');
                buf_puts(&b, "\nb: [");
                for (size_t i = 0; i < (YAMLCAP_MAX_ALIAS_BYTES >> 20) + (size_t) extra; i++)
                        buf_puts(&b, i ? ", *a" : "*a");
                buf_puts(&b, "]\n");
                CHECK(run_buf(&b) == (extra ? -E2BIG : 0));
        }
        CHECK_STREQ(problem, "aliases expand to more than 4 MiB of text (the YAML alias expansion cap)");
        buf_done(&b);
}

static void test_bad_aliases(void) {
        static const char recursive[] = "a: &a [1, *a]\n";
        static const char inner[] = "a: &a {b: [*a]}\n";
        static const char unknown[] = "a: *nope\n";
        static const char next_doc[] = "a: &a 1\n---\nb: *a\n";

        CHECK(run(recursive, strlen(recursive)) == -ELOOP);
        CHECK_STREQ(problem, "alias *a is inside the value of its own anchor");
        CHECK(run(inner, strlen(inner)) == -ELOOP);
        CHECK(run(unknown, strlen(unknown)) == -EINVAL);
        CHECK_STREQ(problem, "alias *nope names no anchor before it");
        /* Anchors belong to their document. */
        CHECK(run(next_doc, strlen(next_doc)) == -EINVAL);
}

/* A name defined again stands for its latest value, also when the first
 * definition is still open around the second. */
static void test_redefined(void) {
        struct buf b = BUF_INIT;

        buf_puts(&b, "a: &x ");
        for (size_t i = 0; i < YAMLCAP_MAX_ALIAS_BYTES / 2; i++)
                buf_putc(&b, 'x');
        buf_puts(&b, "\nb: &x y\nc: [*x, *x, *x, *x, *x, *x]\nd: &n [&n 1, 2]\ne: [*n, *n]\n");
        CHECK(run_buf(&b) == 0);
        buf_done(&b);
}

/* What aliases add is counted over the whole stream: a thousand documents
 * each just within the cap would cost a thousand times as much. */
static void test_stream_total(void) {
        struct buf b = BUF_INIT, doc = BUF_INIT;

        aliases(&doc, YAMLCAP_MAX_ALIAS_NODES / 20);
        buf_printf(&b, "%s---\n%s", doc.data, doc.data);
        CHECK(run_buf(&b) == 0);
        buf_printf(&b, "---\n%s", doc.data);
        CHECK(run_buf(&b) == -E2BIG);
        buf_done(&b);
        buf_done(&doc);
}

int main(void) {
        TEST_RUN(test_depth);
        TEST_RUN(test_alias_nodes);
        TEST_RUN(test_laughs);
        TEST_RUN(test_alias_bytes);
        TEST_RUN(test_bad_aliases);
        TEST_RUN(test_redefined);
        TEST_RUN(test_stream_total);
        TEST_DONE();
}
