/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of Go-exact values. kproxy reads flag and file values as
 * kube-proxy's Go code does (strconv, net, k8s.io/utils/net, go-yaml v2),
 * so that a value it takes is one kube-proxy takes, and one it refuses is
 * one kube-proxy refuses: a drop-in replacement must not be stricter or
 * looser than what it replaces.
 *
 * That is why the address checks here do not use util/inet.h. Their
 * semantics differ from inet_addr_parse() and inet_cidr_parse() in ways a
 * configuration can show: an IPv4 part may carry any number of leading
 * zeros here ("0001.2.3.4", as k8s.io/utils/net's ParseIPSloppy allows),
 * where inet takes at most three digits; IPv4-mapped IPv6 counts as IPv4
 * here (Go's To4()), as IPv6 there; and a CIDR with blanks around it is
 * refused here but trimmed there. Only the family matters to the config,
 * which keeps addresses as the text it was given.
 */
#include "config/config-value.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

/* ---- strings and numbers --------------------------------------------------- */

/* NULL and "" both store NULL: see config.h. */
int config_value_str_set(char **p, const char *s) {
        char *n = NULL;

        if (s && *s) {
                n = strdup(s);
                if (!n)
                        return -ENOMEM;
        }
        free(*p);
        *p = n;
        return 0;
}

void config_value_strv_free(char **v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

int config_value_strv_push(char ***v, size_t *n, const char *s, size_t len) {
        char **nv = reallocarray(*v, *n + 1, sizeof(char *));

        if (!nv)
                return -ENOMEM;
        *v = nv;
        nv[*n] = strndup(s, len);
        if (!nv[*n])
                return -ENOMEM;
        (*n)++;
        return 0;
}

/* strconv.ParseBool. */
int config_value_parse_bool(const char *s, bool *ret) {
        static const char *const yes[] = { "1", "t", "T", "TRUE", "true", "True" };
        static const char *const no[] = { "0", "f", "F", "FALSE", "false", "False" };

        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (streq(s, yes[i])) {
                        *ret = true;
                        return 0;
                }
                if (streq(s, no[i])) {
                        *ret = false;
                        return 0;
                }
        }
        return -EINVAL;
}

/* strconv.ParseInt(s, 0, 64), which pflag's integer flags use: a sign, then
 * 0x, 0o, 0b or a bare leading 0 (octal) select the base. Go's digit
 * separators ("1_000") are not taken. */
int config_value_parse_int(const char *s, int64_t *ret) {
        const char *p = s;
        unsigned base = 10;
        uint64_t v = 0;
        bool neg = false;

        if (*p == '+' || *p == '-') {
                neg = *p == '-';
                p++;
        }
        if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
                base = 16, p += 2;
        else if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O'))
                base = 8, p += 2;
        else if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B'))
                base = 2, p += 2;
        else if (p[0] == '0' && p[1])
                base = 8, p += 1;
        if (!*p)
                return -EINVAL;
        for (; *p; p++) {
                unsigned d;

                if (*p >= '0' && *p <= '9')
                        d = (unsigned) (*p - '0');
                else if (*p >= 'a' && *p <= 'f')
                        d = (unsigned) (*p - 'a' + 10);
                else if (*p >= 'A' && *p <= 'F')
                        d = (unsigned) (*p - 'A' + 10);
                else
                        return -EINVAL;
                if (d >= base)
                        return -EINVAL;
                if (v > (UINT64_MAX - d) / base)
                        return -ERANGE;
                v = v * base + d;
        }
        if (v > (uint64_t) INT64_MAX + neg)
                return -ERANGE;
        *ret = neg ? (v == 0 ? 0 : -(int64_t) (v - 1) - 1) : (int64_t) v;
        return 0;
}

/* strconv.ParseUint(s, 10, ...) bounded by max: digits only. */
int config_value_parse_decimal(const char *s, uint64_t max, uint64_t *ret) {
        uint64_t v = 0;

        if (!*s)
                return -EINVAL;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return -EINVAL;
                if (v > (max - (uint64_t) (*s - '0')) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t) (*s - '0');
        }
        *ret = v;
        return 0;
}

/* strconv.Atoi: an optional sign, then decimal digits. */
static int parse_atoi(const char *s, int64_t *ret) {
        uint64_t v;
        bool neg = false;
        int r;

        if (*s == '+' || *s == '-') {
                neg = *s == '-';
                s++;
        }
        r = config_value_parse_decimal(s, INT64_MAX, &v);
        if (r < 0)
                return r;
        *ret = neg ? -(int64_t) v : (int64_t) v;
        return 0;
}

/* strconv.ParseFloat(s, 32). strtod() also skips leading blanks, Go does not. */
int config_value_parse_float32(const char *s, float *ret) {
        char *end;
        double d;

        if (!*s || isspace((unsigned char) *s))
                return -EINVAL;
        d = strtod(s, &end);
        if (*end)
                return -EINVAL;
        if (isfinite(d) && (d > FLT_MAX || d < -FLT_MAX))
                return -ERANGE;
        *ret = (float) d;
        return 0;
}

/* For comma-separated lists such as vmodule. */
int config_value_str_append(char **p, const char *v) {
        char *n;

        if (!*p)
                return config_value_str_set(p, v);
        if (asprintf(&n, "%s,%s", *p, v) < 0)
                return -ENOMEM;
        free(*p);
        *p = n;
        return 0;
}

/* Blanks as isspace() has them, at both ends. */
void config_value_trim(const char **s, size_t *len) {
        while (*len > 0 && isspace((unsigned char) **s))
                (*s)++, (*len)--;
        while (*len > 0 && isspace((unsigned char) (*s)[*len - 1]))
                (*len)--;
}

/* ---- addresses ----------------------------------------------------------------- */

/* k8s.io/utils/net.ParseIPSloppy: dotted quads may have leading zeros.
 * Returns AF_INET (also for IPv4-mapped IPv6, which Go's To4() counts as
 * IPv4), AF_INET6, or 0 when s is no IP address. */
int config_value_ip_family(const char *s) {
        struct in6_addr a6;
        unsigned parts = 0;

        if (strchr(s, ':')) {
                if (inet_pton(AF_INET6, s, &a6) != 1)
                        return 0;
                return IN6_IS_ADDR_V4MAPPED(&a6) ? AF_INET : AF_INET6;
        }
        for (const char *p = s;;) {
                unsigned v = 0;
                size_t digits = 0;

                for (; *p >= '0' && *p <= '9'; p++, digits++) {
                        v = v * 10 + (unsigned) (*p - '0');
                        if (v > 255)
                                return 0;
                }
                if (digits == 0)
                        return 0;
                parts++;
                if (*p == '\0')
                        break;
                if (*p != '.' || parts == 4)
                        return 0;
                p++;
        }
        return parts == 4 ? AF_INET : 0;
}

/* net.ParseCIDR (sloppy IPv4). Returns the family as config_value_ip_family()
 * does, or 0. */
int config_value_cidr_family(const char *s) {
        const char *slash = strchr(s, '/');
        char ip[INET6_ADDRSTRLEN + 8];
        unsigned bits = 0, max;
        int family;

        if (!slash || (size_t) (slash - s) >= sizeof ip || !slash[1])
                return 0;
        memcpy(ip, s, (size_t) (slash - s));
        ip[slash - s] = '\0';
        family = config_value_ip_family(ip);
        if (family == 0)
                return 0;
        max = strchr(ip, ':') ? 128 : 32;
        for (const char *p = slash + 1; *p; p++) {
                if (*p < '0' || *p > '9')
                        return 0;
                bits = bits * 10 + (unsigned) (*p - '0');
                if (bits > max)
                        return 0;
        }
        return family;
}

/* net.SplitHostPort: "host:port" or "[host]:port". The host is copied to
 * host (hostlen bytes), *ret_port points into s. The port is not checked. */
int config_value_split_host_port(const char *s, char *host, size_t hostlen, const char **ret_port) {
        const char *h, *colon;
        size_t hl;

        if (s[0] == '[') {
                const char *end = strchr(s, ']');

                if (!end || end[1] != ':')
                        return -EINVAL;
                h = s + 1;
                hl = (size_t) (end - h);
                colon = end + 1;
        } else {
                colon = strrchr(s, ':');
                if (!colon)
                        return -EINVAL;
                h = s;
                hl = (size_t) (colon - s);
                if (memchr(h, ':', hl))
                        return -EINVAL;
        }
        if (memchr(h, '[', hl) || memchr(h, ']', hl) || strpbrk(colon + 1, "[]:"))
                return -EINVAL;
        if (hl >= hostlen)
                return -EINVAL;
        memcpy(host, h, hl);
        host[hl] = '\0';
        *ret_port = colon + 1;
        return 0;
}

/* Upstream's validateHostPort(): NULL if s is IP:port, else what is wrong. */
const char *config_value_host_port_problem(const char *s) {
        char host[INET6_ADDRSTRLEN + 8];
        const char *port;
        int64_t p;

        if (config_value_split_host_port(s, host, sizeof host, &port) < 0)
                return "must be IP:port";
        if (config_value_ip_family(host) == 0)
                return "must be a valid IP";
        if (parse_atoi(port, &p) < 0 || p < 1 || p > 65535)
                return "must be a valid port";
        return NULL;
}

/* proxyutil.AppendPortIfNeeded: a bare IP gets the port, anything else
 * (already IP:port, or garbage for validation to report) is left alone. */
int config_value_append_port(char **addr, unsigned port) {
        char host[INET6_ADDRSTRLEN + 8], *n;
        const char *p;
        int family;

        if (!*addr || config_value_split_host_port(*addr, host, sizeof host, &p) == 0)
                return 0;
        family = config_value_ip_family(*addr);
        if (family == 0)
                return 0;
        if (asprintf(&n, family == AF_INET ? "%s:%u" : "[%s]:%u", *addr, port) < 0)
                return -ENOMEM;
        free(*addr);
        *addr = n;
        return 0;
}

/* resource.Quantity, loosely: a number with an optional SI or binary suffix. */
bool config_value_quantity_valid(const char *s) {
        static const char *const suffixes[] = { "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
                                                "n", "u", "m", "k", "M", "G", "T", "P", "E" };
        char *end;

        if (!*s || isspace((unsigned char) *s))
                return false;
        (void) strtod(s, &end);
        if (end == s)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++)
                if (streq(end, suffixes[i]))
                        return true;
        return false;
}

int config_value_parse_quantity(const char *s, uint64_t *ret) {
        static const struct {
                const char *suffix;
                double mult;
        } units[] = {
                {"", 1}, {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
                {"Pi", 1125899906842624.0}, {"Ei", 1152921504606846976.0}, {"n", 1e-9}, {"u", 1e-6}, {"m", 1e-3},
                {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18},
        };
        char *end;

        if (!config_value_quantity_valid(s))
                return -EINVAL;
        double v = strtod(s, &end);
        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (streq(end, units[i].suffix)) {
                        double bytes = ceil(v * units[i].mult);
                        if (v < 0 || !isfinite(bytes) || bytes > 9.2e18)
                                return -ERANGE;
                        *ret = (uint64_t) bytes;
                        return 0;
                }
        return -EINVAL;
}

void config_value_format_quantity(uint64_t v, char *out, size_t len) {
        static const char *const suffixes[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
        size_t i = 0;
        while (v != 0 && v % 1024 == 0 && i + 1 < ELEMENTSOF(suffixes)) {
                v /= 1024;
                i++;
        }
        snprintf(out, len, "%" PRIu64 "%s", v, suffixes[i]);
}

bool config_value_logging_format_valid(const char *v) {
        return v && (streq(v, "text") || streq(v, "json"));
}

/* ---- YAML scalars ------------------------------------------------------------ */

/* ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$ */
static bool yaml_float_syntax(const char *p) {
        if (*p == '+' || *p == '-')
                p++;
        if (*p == '.') {
                if (!isdigit((unsigned char) *++p))
                        return false;
        } else {
                if (!isdigit((unsigned char) *p))
                        return false;
                while (isdigit((unsigned char) *p))
                        p++;
                if (*p == '.')
                        p++;
        }
        while (isdigit((unsigned char) *p))
                p++;
        if (*p == 'e' || *p == 'E') {
                p++;
                if (*p == '+' || *p == '-')
                        p++;
                if (!isdigit((unsigned char) *p))
                        return false;
                while (isdigit((unsigned char) *p))
                        p++;
        }
        return *p == '\0';
}

static bool str_in(const char *s, const char *const *list, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (streq(s, list[i]))
                        return true;
        return false;
}

/* Types an untagged plain scalar the way go-yaml v2 (behind upstream's
 * sigs.k8s.io/yaml) does before the JSON decoder sees it: YAML 1.1 null
 * and boolean words, Go integer syntax, YAML float syntax; anything else is
 * a string. So "yes" is a boolean and 1.30 a number, as upstream. */
void config_value_yaml_resolve(const char *s, struct config_scalar *ret) {
        static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };
        static const char *const trues[] = { "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE",
                                             "on", "On", "ON" };
        static const char *const falses[] = { "n", "N", "no", "No", "NO", "false", "False", "FALSE",
                                              "off", "Off", "OFF" };
        static const char *const infs[] = { ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF" };
        static const char *const ninfs[] = { "-.inf", "-.Inf", "-.INF" };
        static const char *const nans[] = { ".nan", ".NaN", ".NAN" };
        char plain[64];
        size_t n = 0;

        *ret = (struct config_scalar) { .kind = CONFIG_SCALAR_STRING, .text = s };
        if (str_in(s, nulls, ELEMENTSOF(nulls)))
                ret->kind = CONFIG_SCALAR_NULL;
        else if (str_in(s, trues, ELEMENTSOF(trues)))
                ret->kind = CONFIG_SCALAR_BOOL, ret->b = true;
        else if (str_in(s, falses, ELEMENTSOF(falses)))
                ret->kind = CONFIG_SCALAR_BOOL, ret->b = false;
        else if (str_in(s, infs, ELEMENTSOF(infs)))
                ret->kind = CONFIG_SCALAR_FLOAT, ret->f = INFINITY;
        else if (str_in(s, ninfs, ELEMENTSOF(ninfs)))
                ret->kind = CONFIG_SCALAR_FLOAT, ret->f = -INFINITY;
        else if (str_in(s, nans, ELEMENTSOF(nans)))
                ret->kind = CONFIG_SCALAR_FLOAT, ret->f = NAN;
        if (ret->kind != CONFIG_SCALAR_STRING || !strchr("+-.0123456789", s[0]))
                return;

        /* go-yaml drops "_" digit separators before parsing numbers. */
        for (const char *p = s; *p; p++) {
                if (*p == '_')
                        continue;
                if (n + 1 >= sizeof plain)
                        return;
                plain[n++] = *p;
        }
        plain[n] = '\0';
        if (config_value_parse_int(plain, &ret->i) == 0)
                ret->kind = CONFIG_SCALAR_INT;
        else if (yaml_float_syntax(plain))
                ret->kind = CONFIG_SCALAR_FLOAT, ret->f = strtod(plain, NULL);
}
