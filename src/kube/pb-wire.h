/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The protobuf wire format, read (pb-wire.c): the fields of one message,
 * in order, each a number, a wire type and its value; nested messages are
 * read by a reader over a field's bytes. Every length is checked against
 * what is left, so no input reads past its end. Unknown fields are the
 * caller's to skip: pb_next() has already stepped over them (groups
 * included). Pure.
 */
#include <stddef.h>
#include <stdint.h>

enum pb_wire {
        PB_WIRE_VARINT = 0,
        PB_WIRE_I64 = 1,
        PB_WIRE_LEN = 2,
        PB_WIRE_SGROUP = 3,     /* proto2 groups: only ever skipped */
        PB_WIRE_EGROUP = 4,
        PB_WIRE_I32 = 5,
};

struct pb_reader {
        const uint8_t *p, *end;
};

struct pb_field {
        uint32_t number;
        enum pb_wire wire;
        uint64_t value;         /* VARINT, I64, I32 */
        const uint8_t *data;    /* LEN: the bytes; a group: its contents */
        size_t len;
};

/* A reader of data[0..len); NULL data (a field never sent) reads as empty. */
static inline struct pb_reader pb_reader_of(const void *data, size_t len) {
        const uint8_t *p = data;
        return (struct pb_reader) {p, p ? p + len : p};
}

/* One varint at r into *ret. Returns 0, or -EINVAL (*why: "truncated
 * varint", "varint over 64 bits"). */
int pb_varint(struct pb_reader *r, uint64_t *ret, const char **why);

/* The next field into *f. Returns 1, 0 at the message's end, or -EINVAL on
 * a malformed field (*why says what: "truncated", "varint too long", ...).
 * A group is returned whole (SGROUP, data..len up to its EGROUP). */
int pb_next(struct pb_reader *r, struct pb_field *f, const char **why);
