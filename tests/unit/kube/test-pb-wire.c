/* SPDX-License-Identifier: Apache-2.0 */
/* The wire reader: each wire type read back as written, groups stepped
 * over whole, and every malformed input refused with its reason, never
 * read past its end. */
#include <errno.h>
#include <string.h>

#include "kube/pb-wire.h"
#include "pb-build.h"
#include "test.h"

static int one(const void *data, size_t len, struct pb_field *f, const char **why) {
        struct pb_reader r = pb_reader_of(data, len);
        *why = NULL;
        return pb_next(&r, f, why);
}

static void test_types(void) {
        struct pbb p = {.n = 0};
        struct pb_field f;
        const char *why = NULL;

        pbb_int(&p, 1, 0);
        pbb_int(&p, 2, 300);
        pbb_int(&p, 3, UINT64_MAX);
        pbb_str(&p, 536870911, "abc");          /* the largest field number */
        pbb_tag(&p, 5, 5);
        pbb_byte(&p, 0x78), pbb_byte(&p, 0x56), pbb_byte(&p, 0x34), pbb_byte(&p, 0x12);
        pbb_tag(&p, 6, 1);
        for (int i = 0; i < 8; i++)
                pbb_byte(&p, (uint8_t) (i + 1));

        struct pb_reader r = pb_reader_of(p.b, p.n);
        CHECK(pb_next(&r, &f, &why) == 1 && f.number == 1 && f.wire == PB_WIRE_VARINT && f.value == 0);
        CHECK(pb_next(&r, &f, &why) == 1 && f.number == 2 && f.value == 300);
        CHECK(pb_next(&r, &f, &why) == 1 && f.number == 3 && f.value == UINT64_MAX);
        CHECK(pb_next(&r, &f, &why) == 1 && f.number == 536870911 && f.wire == PB_WIRE_LEN && f.len == 3 &&
              memcmp(f.data, "abc", 3) == 0);
        CHECK(pb_next(&r, &f, &why) == 1 && f.number == 5 && f.wire == PB_WIRE_I32 && f.value == 0x12345678);
        CHECK(pb_next(&r, &f, &why) == 1 && f.number == 6 && f.wire == PB_WIRE_I64 &&
              f.value == 0x0807060504030201ull);
        CHECK(pb_next(&r, &f, &why) == 0);
        CHECK(pb_next(&r, &f, &why) == 0);      /* and stays at the end */
}

static void test_groups(void) {
        struct pbb p = {.n = 0};
        struct pb_field f;
        const char *why;

        /* group 7 { 1: 5, group 8 { 2: "x" } } then field 9 */
        pbb_tag(&p, 7, 3);
        pbb_int(&p, 1, 5);
        pbb_tag(&p, 8, 3);
        pbb_str(&p, 2, "x");
        pbb_tag(&p, 8, 4);
        pbb_tag(&p, 7, 4);
        pbb_int(&p, 9, 1);
        struct pb_reader r = pb_reader_of(p.b, p.n);
        CHECK(pb_next(&r, &f, &why) == 1 && f.number == 7 && f.wire == PB_WIRE_SGROUP && f.len == 2 + 1 + 3 + 1);
        CHECK(pb_next(&r, &f, &why) == 1 && f.number == 9 && f.value == 1);

        /* Ended by another group's end, not ended, an end alone. */
        p.n = 0;
        pbb_tag(&p, 7, 3);
        pbb_tag(&p, 8, 4);
        CHECK(one(p.b, p.n, &f, &why) == -EINVAL && strcmp(why, "group ended by another's end") == 0);
        p.n = 0;
        pbb_tag(&p, 7, 3);
        pbb_int(&p, 1, 1);
        CHECK(one(p.b, p.n, &f, &why) == -EINVAL && strcmp(why, "group without its end") == 0);
        p.n = 0;
        pbb_tag(&p, 7, 4);
        CHECK(one(p.b, p.n, &f, &why) == -EINVAL && strcmp(why, "group end outside a group") == 0);

        /* Deeper than 16 groups: refused, not a deep recursion. */
        p.n = 0;
        for (int i = 0; i < 40; i++)
                pbb_tag(&p, 7, 3);
        for (int i = 0; i < 40; i++)
                pbb_tag(&p, 7, 4);
        CHECK(one(p.b, p.n, &f, &why) == -EINVAL && strcmp(why, "groups nested too deep") == 0);
}

static void test_malformed(void) {
        struct pb_field f;
        const char *why;
        static const uint8_t long_varint[] = {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
        static const uint8_t over64[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
        static const uint8_t cut_varint[] = {0x08, 0x80};
        static const uint8_t cut_tag[] = {0x80};
        static const uint8_t zero_field[] = {0x00, 0x01};
        static const uint8_t big_field[] = {0xf8, 0xff, 0xff, 0xff, 0x7f, 0x00};     /* number 2^32 - 1 */
        static const uint8_t past_end[] = {0x0a, 0x05, 'a', 'b'};
        static const uint8_t huge_len[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
        static const uint8_t cut_i32[] = {0x0d, 1, 2, 3};
        static const uint8_t cut_i64[] = {0x09, 1, 2, 3, 4, 5, 6, 7};
        static const uint8_t wire6[] = {0x0e, 0x00};

        CHECK(one(long_varint, sizeof long_varint, &f, &why) == -EINVAL && strcmp(why, "varint over 64 bits") == 0);
        CHECK(one(over64, sizeof over64, &f, &why) == -EINVAL && strcmp(why, "varint over 64 bits") == 0);
        CHECK(one(cut_varint, sizeof cut_varint, &f, &why) == -EINVAL && strcmp(why, "truncated varint") == 0);
        CHECK(one(cut_tag, sizeof cut_tag, &f, &why) == -EINVAL && strcmp(why, "truncated varint") == 0);
        CHECK(one(zero_field, sizeof zero_field, &f, &why) == -EINVAL && strcmp(why, "field number out of range") == 0);
        CHECK(one(big_field, sizeof big_field, &f, &why) == -EINVAL && strcmp(why, "field number out of range") == 0);
        CHECK(one(past_end, sizeof past_end, &f, &why) == -EINVAL && strcmp(why, "length past the end") == 0);
        CHECK(one(huge_len, sizeof huge_len, &f, &why) == -EINVAL && strcmp(why, "length past the end") == 0);
        CHECK(one(cut_i32, sizeof cut_i32, &f, &why) == -EINVAL && strcmp(why, "truncated fixed-width value") == 0);
        CHECK(one(cut_i64, sizeof cut_i64, &f, &why) == -EINVAL && strcmp(why, "truncated fixed-width value") == 0);
        CHECK(one(wire6, sizeof wire6, &f, &why) == -EINVAL && strcmp(why, "unknown wire type") == 0);
        CHECK(one(NULL, 0, &f, &why) == 0);
}

int main(void) {
        TEST_RUN(test_types);
        TEST_RUN(test_groups);
        TEST_RUN(test_malformed);
        TEST_DONE();
}
