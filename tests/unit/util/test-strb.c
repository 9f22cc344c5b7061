/* SPDX-License-Identifier: Apache-2.0 */
#include "util/strb.h"

#include <stdio.h>
#include <stdlib.h>

#include "util/inet.h"
#include "test.h"

/* strb builds what snprintf() would, truncation included, at every size. */
static void test_like_snprintf(void) {
        static const char *const parts[] = {"", "a", "endpoint-", "ABCDEFGH-ns/svc/tcp/p80", "__"};
        static const unsigned long nums[] = {0, 7, 80, 65535, 4294967295ul};
        static const unsigned char key[] = {0x0a, 0x00, 0xff, 0x06, 0x1f};
        char want[64], got[64];

        for (size_t size = 1; size < sizeof want; size++)
                for (size_t i = 0; i < 5; i++)
                        for (size_t j = 0; j < 5; j++) {
                                snprintf(want, size, "%s%s/%lu/%02x%02x%02x%02x%02x", parts[i], parts[j], nums[i],
                                         key[0], key[1], key[2], key[3], key[4]);
                                struct strb b = strb_init(got, size);
                                strb_puts(&b, parts[i]);
                                strb_puts(&b, parts[j]);
                                strb_putn(&b, "/", 1);
                                strb_putu(&b, nums[i]);
                                strb_putn(&b, "/", 1);
                                strb_puthex(&b, key, sizeof key);
                                if (strcmp(want, got) != 0) {
                                        /* Hex goes in whole bytes: one digit of a pair never. */
                                        size_t n = strlen(want);
                                        CHECK(strlen(got) == n - 1 && strncmp(want, got, n - 1) == 0);
                                }
                        }
}

static void test_ipv4_format(void) {
        struct inet_addr a = {.family = 4};
        char s[INET_ADDR_STRLEN], want[INET_ADDR_STRLEN];
        srand(6);
        for (int i = 0; i < 10000; i++) {
                for (int k = 0; k < 4; k++)
                        a.bytes[k] = (uint8_t) (i < 256 ? i : rand());
                snprintf(want, sizeof want, "%u.%u.%u.%u", a.bytes[0], a.bytes[1], a.bytes[2], a.bytes[3]);
                CHECK_STREQ(inet_addr_format(&a, s), want);
        }
}

int main(void) {
        TEST_RUN(test_like_snprintf);
        TEST_RUN(test_ipv4_format);
        TEST_DONE();
}
