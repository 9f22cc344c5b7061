/* SPDX-License-Identifier: Apache-2.0 */
#include "util/inet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_ipv4(const char *s, uint8_t out[4]) {
        for (int i = 0; i < 4; i++) {
                unsigned v = 0;
                int digits = 0;
                while (*s >= '0' && *s <= '9') {
                        v = v * 10 + (unsigned) (*s - '0');
                        if (v > 255 || ++digits > 3)
                                return -EINVAL;
                        s++;
                }
                if (digits == 0)
                        return -EINVAL;
                out[i] = (uint8_t) v;
                if (i < 3 && *s++ != '.')
                        return -EINVAL;
        }
        return *s == '\0' ? 0 : -EINVAL;
}

int inet_addr_parse(const char *s, struct inet_addr *ret) {
        struct inet_addr a = {0};

        if (!s || !*s || strlen(s) >= INET_ADDR_STRLEN)
                return -EINVAL;
        if (strchr(s, ':')) {
                /* Zones ("fe80::1%eth0") are not addresses a Service can carry. */
                if (inet_pton(AF_INET6, s, a.bytes) != 1)
                        return -EINVAL;
                a.family = 6;
        } else {
                if (parse_ipv4(s, a.bytes) < 0)
                        return -EINVAL;
                a.family = 4;
        }
        *ret = a;
        return 0;
}

int inet_cidr_parse(const char *s, struct inet_cidr *ret) {
        char tmp[INET_CIDR_STRLEN + 16];
        struct inet_cidr c = {0};

        if (!s)
                return -EINVAL;
        while (*s == ' ' || *s == '\t')
                s++;
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
                n--;
        if (n == 0 || n >= sizeof tmp)
                return -EINVAL;
        memcpy(tmp, s, n);
        tmp[n] = '\0';

        char *slash = strchr(tmp, '/');
        if (!slash)
                return -EINVAL;
        *slash = '\0';
        const char *p = slash + 1;
        if (*p < '0' || *p > '9' || strlen(p) > 3)
                return -EINVAL;
        char *end;
        unsigned long prefix = strtoul(p, &end, 10);
        if (*end != '\0')
                return -EINVAL;
        if (inet_addr_parse(tmp, &c.addr) < 0)
                return -EINVAL;
        if (prefix > (c.addr.family == 4 ? 32u : 128u))
                return -EINVAL;
        c.prefix = (uint8_t) prefix;
        for (unsigned bit = c.prefix; bit < 128; bit++)
                c.addr.bytes[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));
        *ret = c;
        return 0;
}

const char *inet_addr_format(const struct inet_addr *a, char *out) {
        if (a->family == 4) {
                char *p = out;
                for (int i = 0; i < 4; i++) {
                        unsigned v = a->bytes[i];
                        if (i)
                                *p++ = '.';
                        if (v >= 100)
                                *p++ = (char) ('0' + v / 100);
                        if (v >= 10)
                                *p++ = (char) ('0' + v / 10 % 10);
                        *p++ = (char) ('0' + v % 10);
                }
                *p = '\0';
        } else if (!inet_ntop(AF_INET6, a->bytes, out, INET_ADDR_STRLEN))
                snprintf(out, INET_ADDR_STRLEN, "::");
        return out;
}

const char *inet_cidr_format(const struct inet_cidr *c, char *out) {
        char a[INET_ADDR_STRLEN];
        snprintf(out, INET_CIDR_STRLEN, "%s/%u", inet_addr_format(&c->addr, a), c->prefix);
        return out;
}

bool inet_addr_equal(const struct inet_addr *a, const struct inet_addr *b) {
        return a->family == b->family && memcmp(a->bytes, b->bytes, a->family == 4 ? 4 : 16) == 0;
}

bool inet_addr_in(const struct inet_addr *a, const struct inet_addr *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (inet_addr_equal(a, &v[i]))
                        return true;
        return false;
}

bool inet_cidr_contains(const struct inet_cidr *c, const struct inet_addr *a) {
        if (c->addr.family != a->family)
                return false;
        unsigned full = c->prefix / 8, rest = c->prefix % 8;
        if (memcmp(c->addr.bytes, a->bytes, full) != 0)
                return false;
        if (rest == 0)
                return true;
        uint8_t mask = (uint8_t) (0xffu << (8 - rest));
        return (a->bytes[full] & mask) == c->addr.bytes[full];
}

bool inet_addr_is_loopback(const struct inet_addr *a) {
        static const uint8_t v6lo[16] = {[15] = 1};
        if (a->family == 4)
                return a->bytes[0] == 127;
        return memcmp(a->bytes, v6lo, 16) == 0;
}

bool inet_addr_is_unspecified(const struct inet_addr *a) {
        static const uint8_t zero[16];
        return memcmp(a->bytes, zero, a->family == 4 ? 4 : 16) == 0;
}
