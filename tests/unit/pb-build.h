/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Protobuf bytes written by hand for the tests of kproxy's reader: fields
 * appended to a fixed buffer, nested messages as other buffers. The wire
 * format as the protobuf documentation writes it, nothing more; the
 * stand-in API server's encoder (tests/apiserver/kapi_proto.py) is the
 * other, independent writer the readers are tested against.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct pbb {
        uint8_t b[16384];
        size_t n;
};

static inline void pbb_byte(struct pbb *p, uint8_t c) {
        if (p->n < sizeof p->b)
                p->b[p->n++] = c;
}

static inline void pbb_varint(struct pbb *p, uint64_t v) {
        do {
                pbb_byte(p, (uint8_t) ((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
                v >>= 7;
        } while (v);
}

static inline void pbb_tag(struct pbb *p, uint32_t number, unsigned wire) {
        pbb_varint(p, (uint64_t) number << 3 | wire);
}

static inline void pbb_bytes(struct pbb *p, uint32_t number, const void *data, size_t len) {
        pbb_tag(p, number, 2);
        pbb_varint(p, len);
        for (size_t i = 0; i < len; i++)
                pbb_byte(p, ((const uint8_t *) data)[i]);
}

static inline void pbb_str(struct pbb *p, uint32_t number, const char *s) {
        pbb_bytes(p, number, s, strlen(s));
}

static inline void pbb_msg(struct pbb *p, uint32_t number, const struct pbb *m) {
        pbb_bytes(p, number, m->b, m->n);
}

static inline void pbb_int(struct pbb *p, uint32_t number, uint64_t v) {
        pbb_tag(p, number, 0);
        pbb_varint(p, v);
}

/* "k8s\0" + runtime.Unknown {typeMeta {apiVersion, kind}, raw}. */
static inline void pbb_envelope(struct pbb *p, const char *api_version, const char *kind, const struct pbb *raw) {
        struct pbb tm = {.n = 0};

        pbb_str(&tm, 1, api_version);
        pbb_str(&tm, 2, kind);
        for (size_t i = 0; i < 4; i++)
                pbb_byte(p, (uint8_t) "k8s"[i]);      /* its NUL the fourth */
        pbb_msg(p, 1, &tm);
        pbb_msg(p, 2, raw);
        pbb_str(p, 3, "");
        pbb_str(p, 4, "");
}
