/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Go's time.Duration at the edges, milliseconds inside: flags and files
 * spell durations as time.ParseDuration reads them, --write-config-to and
 * messages as time.Duration.String() prints them. Parts below a millisecond
 * are cut, which no kube-proxy setting needs.
 */
#include "config/config-duration.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "config/config-defaults.h"
#include "config/config-value.h"
#include "util/cleanup.h"

static const struct {
        const char *name;
        uint64_t ns;
} duration_units[] = {
        { "ns", UINT64_C(1) },
        { "us", UINT64_C(1000) },
        { "\xc2\xb5s", UINT64_C(1000) },        /* U+00B5 MICRO SIGN */
        { "\xce\xbcs", UINT64_C(1000) },        /* U+03BC GREEK SMALL LETTER MU */
        { "ms", UINT64_C(1000000) },
        { "s", UINT64_C(1000000000) },
        { "m", UINT64_C(60000000000) },
        { "h", UINT64_C(3600000000000) },
};

/* time.ParseDuration, to signed nanoseconds: "0", or a sign and one or more
 * decimal numbers (fraction allowed) each with a unit, as in "1h2m0.5s".
 * -EINVAL for bad syntax, -ERANGE beyond int64 nanoseconds (~292 years). */
int config_duration_parse_ns(const char *s, int64_t *ret) {
        const uint64_t limit = UINT64_C(1) << 63;
        uint64_t d = 0;
        bool neg = false;

        if (*s == '-' || *s == '+') {
                neg = *s == '-';
                s++;
        }
        if (streq(s, "0")) {
                *ret = 0;
                return 0;
        }
        if (!*s)
                return -EINVAL;
        while (*s) {
                uint64_t v = 0, f = 0, unit = 0;
                double scale = 1;
                bool pre = false, post = false, overflow = false;
                size_t ulen = 0;

                if (*s != '.' && (*s < '0' || *s > '9'))
                        return -EINVAL;
                for (; *s >= '0' && *s <= '9'; s++) {
                        if (v > limit / 10)
                                return -ERANGE;
                        v = v * 10 + (uint64_t) (*s - '0');
                        if (v > limit)
                                return -ERANGE;
                        pre = true;
                }
                if (*s == '.') {
                        /* Like Go, digits beyond int64 precision are read
                         * and dropped rather than refused. */
                        for (s++; *s >= '0' && *s <= '9'; s++) {
                                post = true;
                                if (overflow || f > (uint64_t) (INT64_MAX - 9) / 10) {
                                        overflow = true;
                                        continue;
                                }
                                f = f * 10 + (uint64_t) (*s - '0');
                                scale *= 10;
                        }
                }
                if (!pre && !post)
                        return -EINVAL;
                while (s[ulen] && s[ulen] != '.' && (s[ulen] < '0' || s[ulen] > '9'))
                        ulen++;
                for (size_t i = 0; i < ELEMENTSOF(duration_units); i++)
                        if (strlen(duration_units[i].name) == ulen &&
                            strncmp(s, duration_units[i].name, ulen) == 0)
                                unit = duration_units[i].ns;
                if (unit == 0)
                        return -EINVAL;
                s += ulen;
                if (v > limit / unit)
                        return -ERANGE;
                v *= unit;
                if (f > 0) {
                        v += (uint64_t) ((double) f * ((double) unit / scale));
                        if (v > limit)
                                return -ERANGE;
                }
                d += v;
                if (d > limit)
                        return -ERANGE;
        }
        if (neg) {
                *ret = d == limit ? INT64_MIN : -(int64_t) d;
                return 0;
        }
        if (d > limit - 1)
                return -ERANGE;
        *ret = (int64_t) d;
        return 0;
}

int config_parse_duration(const char *s, uint64_t *ret_ms) {
        int64_t ns;
        int r;

        assert(s);
        assert(ret_ms);

        r = config_duration_parse_ns(s, &ns);
        if (r < 0)
                return r;
        if (ns < 0)
                return -ERANGE;
        *ret_ms = (uint64_t) ns / 1000000;
        return 0;
}

void config_format_duration(uint64_t ms, char *out, size_t outlen) {
        uint64_t h = ms / MS_HOUR, m = ms / MS_MINUTE % 60, s = ms / MS_SECOND % 60;
        unsigned frac = (unsigned) (ms % MS_SECOND);
        char fraction[8] = "";

        assert(out || outlen == 0);

        /* time.Duration.String(): below a second the largest fitting unit,
         * else h, m and s with the s part's fraction trimmed of zeros. */
        if (ms == 0) {
                snprintf(out, outlen, "0s");
                return;
        }
        if (ms < MS_SECOND) {
                snprintf(out, outlen, "%" PRIu64 "ms", ms);
                return;
        }
        if (frac > 0) {
                size_t n;

                snprintf(fraction, sizeof fraction, ".%03u", frac % 1000u);
                for (n = strlen(fraction); fraction[n - 1] == '0'; n--)
                        fraction[n - 1] = '\0';
        }
        if (h > 0)
                snprintf(out, outlen, "%" PRIu64 "h%" PRIu64 "m%" PRIu64 "%ss", h, m, s, fraction);
        else if (m > 0)
                snprintf(out, outlen, "%" PRIu64 "m%" PRIu64 "%ss", m, s, fraction);
        else
                snprintf(out, outlen, "%" PRIu64 "%ss", s, fraction);
}
