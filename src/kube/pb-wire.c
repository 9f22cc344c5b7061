/* SPDX-License-Identifier: Apache-2.0 */
#include "kube/pb-wire.h"

#include <errno.h>
#include <stdbool.h>

/* Groups inside groups deeper than this are no message of the API's. */
#define GROUP_DEPTH 16

int pb_varint(struct pb_reader *r, uint64_t *ret, const char **why) {
        uint64_t v = 0;

        for (unsigned shift = 0; shift < 70; shift += 7) {
                if (r->p >= r->end) {
                        *why = "truncated varint";
                        return -EINVAL;
                }
                uint8_t b = *r->p++;
                if (shift == 63 && b > 1) {
                        *why = "varint over 64 bits";
                        return -EINVAL;
                }
                v |= (uint64_t) (b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return 0;
                }
        }
        *why = "varint over 64 bits";
        return -EINVAL;
}

static int fixed(struct pb_reader *r, unsigned n, uint64_t *ret, const char **why) {
        uint64_t v = 0;

        if ((size_t) (r->end - r->p) < n) {
                *why = "truncated fixed-width value";
                return -EINVAL;
        }
        for (unsigned i = 0; i < n; i++)
                v |= (uint64_t) r->p[i] << (8 * i);
        r->p += n;
        *ret = v;
        return 0;
}

static int next(struct pb_reader *r, struct pb_field *f, unsigned depth, const char **why);

/* Past a group's fields to its EGROUP of the same number. */
static int group(struct pb_reader *r, struct pb_field *f, unsigned depth, const char **why) {
        struct pb_field inner;
        const uint8_t *start = r->p;

        if (depth >= GROUP_DEPTH) {
                *why = "groups nested too deep";
                return -EINVAL;
        }
        for (;;) {
                const uint8_t *at = r->p;
                int k = next(r, &inner, depth + 1, why);
                if (k < 0)
                        return k;
                if (k == 0) {
                        *why = "group without its end";
                        return -EINVAL;
                }
                if (inner.wire == PB_WIRE_EGROUP) {
                        if (inner.number != f->number) {
                                *why = "group ended by another's end";
                                return -EINVAL;
                        }
                        f->data = start;
                        f->len = (size_t) (at - start);
                        return 1;
                }
        }
}

static int next(struct pb_reader *r, struct pb_field *f, unsigned depth, const char **why) {
        uint64_t tag, len;

        if (r->p >= r->end)
                return 0;
        if (pb_varint(r, &tag, why) < 0)
                return -EINVAL;
        if (tag >> 3 == 0 || tag >> 3 > 0x1fffffff) {
                *why = "field number out of range";
                return -EINVAL;
        }
        *f = (struct pb_field) {.number = (uint32_t) (tag >> 3), .wire = (enum pb_wire) (tag & 7)};
        switch (f->wire) {
        case PB_WIRE_VARINT:
                return pb_varint(r, &f->value, why) < 0 ? -EINVAL : 1;
        case PB_WIRE_I64:
                return fixed(r, 8, &f->value, why) < 0 ? -EINVAL : 1;
        case PB_WIRE_I32:
                return fixed(r, 4, &f->value, why) < 0 ? -EINVAL : 1;
        case PB_WIRE_LEN:
                if (pb_varint(r, &len, why) < 0)
                        return -EINVAL;
                if (len > (uint64_t) (r->end - r->p)) {
                        *why = "length past the end";
                        return -EINVAL;
                }
                f->data = r->p;
                f->len = (size_t) len;
                r->p += len;
                return 1;
        case PB_WIRE_SGROUP:
                return group(r, f, depth, why);
        case PB_WIRE_EGROUP:
                if (depth == 0) {
                        *why = "group end outside a group";
                        return -EINVAL;
                }
                return 1;
        default:
                *why = "unknown wire type";
                return -EINVAL;
        }
}

int pb_next(struct pb_reader *r, struct pb_field *f, const char **why) {
        return next(r, f, 0, why);
}
