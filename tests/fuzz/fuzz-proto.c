/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: any bytes as the API server's protobuf (kube/proto.c,
 * kube/pb-json.c, kube/pb-wire.c), read the ways the client reads it: as
 * a list body, one object (a Status), or a watch stream of frames cut
 * anywhere (a PRNG seeded from the input picks the cuts) whose events go
 * through the intake's decoders, as the reflector's would. The first byte
 * picks the reader. Each read either succeeds with objects in hand or is
 * refused with a reason; a frame stream gives the same frames however it
 * is cut; a description holds only name characters.
 */
#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/intake.h"
#include "kube/proto.h"
#include "kube/watch-stream.h"
#include "util/buf.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const kinds[_INTAKE_SOURCE_MAX] = {"Service", "EndpointSlice", "Node", "ServiceCIDR"};

struct run {
        struct intake *intake;
        enum intake_source source;      /* a list's items are of this source */
        size_t n_items;
        struct buf seen;                /* each frame delivered, length first */
};

static void on_item(void *userdata, const json_t *item) {
        struct run *r = userdata;
        char key[512];
        const json_t *md = json_object_get(item, "metadata");
        const char *ns = json_string_value(json_object_get(md, "namespace"));
        const char *name = json_string_value(json_object_get(md, "name"));

        assert(json_is_object(item));
        /* The first objects of an input go on into the intake; after
         * them, thousands of two-byte items would be the decoders' test
         * (fuzz-decode's), at a thousandth of this harness's speed. */
        if (r->n_items++ >= 64 || !name)
                return;
        snprintf(key, sizeof key, "%s%s%s", ns ? ns : "", ns ? "/" : "", name);
        intake_object(r->intake, r->source, key, item);
}

static bool on_frame(void *userdata, const char *frame, size_t len) {
        struct run *r = userdata;
        struct kube_watch_event e;
        char why[256];
        uint8_t be[4] = {(uint8_t) (len >> 24), (uint8_t) (len >> 16), (uint8_t) (len >> 8), (uint8_t) len};

        assert(len > 0);
        buf_put(&r->seen, (const char *) be, 4);
        buf_put(&r->seen, frame, len);
        if (kube_proto_watch_event(frame, len, &e, why, sizeof why) < 0) {
                assert(why[0] != '\0');
                return true;
        }
        assert(json_is_object(e.root));
        const char *kind = json_string_value(json_object_get(e.object, "kind"));
        if (kind && (e.type == KUBE_WATCH_ADDED || e.type == KUBE_WATCH_MODIFIED))
                for (int s = 0; s < _INTAKE_SOURCE_MAX; s++)
                        if (strcmp(kind, kinds[s]) == 0) {
                                r->source = (enum intake_source) s;
                                on_item(r, e.object);
                        }
        kube_watch_event_done(&e);
        return true;
}

static void on_oversize(void *userdata, size_t len, const char *head, size_t head_len) {
        char what[400];
        (void) userdata;
        assert(len > 64 && head_len <= KUBE_WATCH_HEAD);
        kube_proto_event_describe(head, head_len, what, sizeof what);
        for (const char *p = what; *p; p++)
                assert(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-./ ", *p));
}

static uint32_t next_rand(uint32_t *s) {
        *s ^= *s << 13;
        *s ^= *s >> 17;
        *s ^= *s << 5;
        return *s;
}

/* The frames of the whole stream, split in one pass: what any cutting must
 * deliver (frames over max are skipped). */
static void reference(const uint8_t *data, size_t size, size_t max, struct buf *want) {
        size_t off = 0;
        while (size - off >= 4) {
                size_t len = (size_t) data[off] << 24 | (size_t) data[off + 1] << 16 | (size_t) data[off + 2] << 8 |
                             data[off + 3];
                if (len > size - off - 4)
                        return;
                if (len > 0 && len <= max)
                        buf_put(want, (const char *) data + off, 4 + len);
                off += 4 + len;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct run r = {.seen = BUF_INIT};
        char why[256], what[400];
        json_t *obj = NULL;

        static bool quiet;
        if (!quiet) {
                /* The intake's warnings about the objects it refuses, which
                 * this harness does not check, to stdout and away: written,
                 * they were nine tenths of the time. stderr keeps libFuzzer's
                 * and the sanitizers' reports. */
                log_set_split_stream(1, 0);
                if (!freopen("/dev/null", "w", stdout))
                        abort();
                quiet = true;
        }
        if (size < 2)
                return 0;
        uint8_t mode = data[0];
        data++;
        size--;
        if (intake_new("node-1", NULL, &r.intake) < 0)
                abort();
        r.source = (enum intake_source) (mode >> 4) % _INTAKE_SOURCE_MAX;
        switch (mode & 3) {
        case 0: {
                json_t *md = NULL;
                if (kube_proto_list(data, size, &md, on_item, &r, why, sizeof why) == 0)
                        assert(json_is_object(md));
                else
                        assert(why[0] != '\0' && md == NULL);
                assert(r.n_items <= size / 2);
                json_decref(md);
                break;
        }
        case 1:
                if (kube_proto_object(data, size, &obj, why, sizeof why) == 0) {
                        assert(json_is_object(obj));
                        json_decref(obj);
                } else {
                        assert(why[0] != '\0');
                }
                break;
        case 2: {
                static const struct kube_watch_stream_ops ops = {.line = on_frame, .oversize = on_oversize};
                struct kube_watch_stream s = {.max = 4096};
                struct buf want = BUF_INIT;
                uint32_t seed = 0x9e3779b9u ^ (uint32_t) size;
                s.framed = true;
                for (size_t off = 0; off < size;) {
                        size_t n = 1 + next_rand(&seed) % (seed & 0x100 ? 4096 : 16);
                        if (n > size - off)
                                n = size - off;
                        assert(kube_watch_stream_feed(&s, (const char *) data + off, n, &ops, &r));
                        off += n;
                }
                reference(data, size, s.max, &want);
                assert(r.seen.len == want.len && (!want.len || memcmp(r.seen.data, want.data, want.len) == 0));
                kube_watch_stream_reset(&s);
                buf_done(&want);
                break;
        }
        default:
                kube_proto_event_describe(data, size, what, sizeof what);
                for (const char *p = what; *p; p++)
                        assert(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-./ ", *p));
                break;
        }
        intake_free(r.intake);
        buf_done(&r.seen);
        return 0;
}
