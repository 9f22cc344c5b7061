/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: a watch response's body, delivered in chunks that cut
 * it anywhere (a PRNG seeded from the first four bytes picks the cuts),
 * through the framer (kube/watch-stream.c), the event parser and the
 * intake (every object decoded, stored, deleted). Checks the framer's
 * contract against a one-pass split of the whole body: the same non-empty
 * lines, in order, whatever the cuts and however often the consumer stops
 * it; the rest kept for the next chunk. And each event is what its
 * fields say.
 */
#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/intake.h"
#include "kube/watch-stream.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct run {
        struct buf seen;        /* every line delivered, each with a newline */
        struct intake *intake;
        uint32_t stop_every;    /* the consumer stops after every Nth line (0: never) */
        uint32_t n_lines;
};

static const char *const type_names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

static void check_event(const struct kube_watch_event *e) {
        assert(e->root && json_is_object(e->root));
        assert(!e->object || json_is_object(e->object));
        if (!e->type_name || !e->object) {
                assert(e->type == KUBE_WATCH_INCOMPLETE);
                return;
        }
        if (e->type <= KUBE_WATCH_ERROR)
                assert(strcmp(e->type_name, type_names[e->type]) == 0);
        else
                for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
                        assert(strcmp(e->type_name, type_names[i]) != 0);
        if (e->type != KUBE_WATCH_ERROR)
                assert(e->code == 0 && !e->message);
}

/* What the reflector does with an event's object, minus the I/O. */
static void take(struct intake *in, const struct kube_watch_event *e) {
        static const char *const kinds[_INTAKE_SOURCE_MAX] = {"Service", "EndpointSlice", "Node", "ServiceCIDR"};
        const json_t *meta = json_object_get(e->object, "metadata");
        const char *kind = json_string_value(json_object_get(e->object, "kind"));
        const char *ns = json_string_value(json_object_get(meta, "namespace"));
        const char *name = json_string_value(json_object_get(meta, "name"));
        char key[512];

        if (!kind || !name || (e->type != KUBE_WATCH_ADDED && e->type != KUBE_WATCH_MODIFIED &&
                               e->type != KUBE_WATCH_DELETED))
                return;
        snprintf(key, sizeof key, "%s%s%s", ns ? ns : "", ns ? "/" : "", name);
        for (int src = 0; src < _INTAKE_SOURCE_MAX; src++)
                if (strcmp(kind, kinds[src]) == 0)
                        intake_object(in, (enum intake_source) src, key,
                                      e->type == KUBE_WATCH_DELETED ? NULL : e->object);
}

static bool on_line(void *userdata, const char *line, size_t len) {
        struct run *r = userdata;
        struct kube_watch_event e;
        char why[256];

        assert(len > 0 && !memchr(line, '\n', len));
        buf_put(&r->seen, line, len);
        buf_putc(&r->seen, '\n');
        if (kube_watch_event_parse(line, len, &e, why, sizeof why) == 0) {
                check_event(&e);
                take(r->intake, &e);
                kube_watch_event_done(&e);
        } else {
                assert(why[0] != '\0');
        }
        r->n_lines++;
        return !r->stop_every || r->n_lines % r->stop_every != 0;
}

static uint32_t next_rand(uint32_t *s) {
        *s ^= *s << 13;
        *s ^= *s >> 17;
        *s ^= *s << 5;
        return *s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct run r = {.seen = BUF_INIT};
        struct buf b = BUF_INIT, want = BUF_INIT;
        uint32_t seed;

        if (size < 5)
                return 0;
        memcpy(&seed, data, 4);
        seed |= 1;
        r.stop_every = data[4] % 8;
        data += 5;
        size -= 5;
        if (intake_new("node-1", NULL, &r.intake) < 0)
                abort();

        for (size_t off = 0; off < size;) {
                size_t n = 1 + next_rand(&seed) % (seed & 0x100 ? 4096 : 16);
                if (n > size - off)
                        n = size - off;
                buf_put(&b, (const char *) data + off, n);
                off += n;
                /* A consumer that stopped is called again for the rest
                 * before more comes in. */
                while (!kube_watch_stream_lines(&b, on_line, &r))
                        ;
        }

        /* The reference: the body split in one pass. */
        size_t start = 0;
        for (size_t i = 0; i < size; i++) {
                if (data[i] != '\n')
                        continue;
                if (i > start) {
                        buf_put(&want, (const char *) data + start, i - start);
                        buf_putc(&want, '\n');
                }
                start = i + 1;
        }
        assert(r.seen.len == want.len && (want.len == 0 || memcmp(r.seen.data, want.data, want.len) == 0));
        assert(b.len == size - start && (b.len == 0 || memcmp(b.data, data + start, b.len) == 0));

        intake_free(r.intake);
        buf_done(&r.seen);
        buf_done(&want);
        buf_done(&b);
        return 0;
}
