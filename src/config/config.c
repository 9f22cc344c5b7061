/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of precedence. kproxy reads its settings the way upstream
 * kube-proxy 1.31-1.33 does, because it is dropped into DaemonSets and unit
 * files written for kube-proxy:
 *
 *   1. config_init() sets the defaults of kubeproxy.config.k8s.io/v1alpha1.
 *   2. config_parse_args() writes each flag over its field, as pflag does,
 *      and notes which flags were given.
 *   3. config_finish(), without --config, folds in the flags that upstream
 *      keeps outside its configuration (--iptables-sync-period and friends,
 *      the deprecated --healthz-port/--metrics-port). With --config, the file
 *      replaces every flag-set field: it is decoded onto a zeroed
 *      configuration, v1alpha1 defaulting fills the zero and null fields, and
 *      only --hostname-override and the logging flags (-v, --vmodule,
 *      --logging-format, --log-flush-frequency) are laid back on top.
 *   4. Platform defaults (mode, detect-local mode, nftables' "primary"
 *      NodePort addresses), then upstream's validation.
 *
 * Upstream decodes the file strictly and, when only strictness fails (an
 * unknown or repeated field), decodes it again leniently and carries on with
 * a log line. Clusters upgraded by kubeadm still carry removed fields such as
 * udpIdleTimeout, so a drop-in replacement must not refuse them: kproxy warns
 * with the field's path and line and carries on too. Type errors and invalid
 * values are fatal, as upstream.
 *
 * Durations are kept in milliseconds; finer parts of a Go duration are cut.
 */
#include "config/config.h"

#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "util/buf.h"
#include "util/cleanup.h"

#define API_VERSION "kubeproxy.config.k8s.io/v1alpha1"
#define KIND "KubeProxyConfiguration"
#define HEALTHZ_PORT 10256              /* ports.ProxyHealthzPort */
#define METRICS_PORT 10249              /* ports.ProxyStatusPort */
#define DEFAULT_OOM_SCORE_ADJ (-999)    /* qos.KubeProxyOOMScoreAdj */
#define DEFAULT_CONTENT_TYPE "application/vnd.kubernetes.protobuf"
#define DEFAULT_MASQUERADE_BIT 14
#define MAX_FILE_SIZE (4u << 20)        /* a KubeProxyConfiguration is ~2 KiB */
#define MAX_FLAGS 96

#define MS_SECOND UINT64_C(1000)
#define MS_MINUTE (60 * MS_SECOND)
#define MS_HOUR (60 * MS_MINUTE)

static bool streq(const char *a, const char *b) {
        return strcmp(a, b) == 0;
}

/* ---- messages ------------------------------------------------------------ */

static void config_vmessage(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
static void config_vmessage(const char *fmt, va_list ap) {
        struct buf b = BUF_INIT;

        buf_vprintf(&b, fmt, ap);
        /* Values from argv and files end up in messages; keep each one a
         * single, readable line whatever bytes they hold. */
        if (b.len > 480) {
                buf_truncate(&b, 480);
                buf_puts(&b, "...");
        }
        for (size_t i = 0; i < b.len; i++)
                if ((unsigned char) b.data[i] < 0x20 || b.data[i] == 0x7f)
                        b.data[i] = '?';
        fprintf(stderr, "kproxy: %s\n", b.data);
        buf_done(&b);
}

static int config_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int config_error(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        config_vmessage(fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static void config_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void config_print(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        config_vmessage(fmt, ap);
        va_end(ap);
}

/* ---- enums --------------------------------------------------------------- */

static const char *const proxy_mode_table[_PROXY_MODE_MAX] = {
        [PROXY_MODE_IPTABLES] = "iptables",
        [PROXY_MODE_NFTABLES] = "nftables",
        [PROXY_MODE_IPVS] = "ipvs",
};

static const char *const detect_local_mode_table[_DETECT_LOCAL_MAX] = {
        [DETECT_LOCAL_CLUSTER_CIDR] = "ClusterCIDR",
        [DETECT_LOCAL_NODE_CIDR] = "NodeCIDR",
        [DETECT_LOCAL_BRIDGE_INTERFACE] = "BridgeInterface",
        [DETECT_LOCAL_INTERFACE_NAME_PREFIX] = "InterfaceNamePrefix",
};

const char *proxy_mode_to_string(enum proxy_mode m) {
        if (m < 0 || m >= _PROXY_MODE_MAX)
                return NULL;
        return proxy_mode_table[m];
}

enum proxy_mode proxy_mode_from_string(const char *s) {
        if (!s)
                return _PROXY_MODE_INVALID;
        for (int i = 0; i < _PROXY_MODE_MAX; i++)
                if (streq(s, proxy_mode_table[i]))
                        return (enum proxy_mode) i;
        return _PROXY_MODE_INVALID;
}

const char *detect_local_mode_to_string(enum detect_local_mode m) {
        if (m < 0 || m >= _DETECT_LOCAL_MAX)
                return NULL;
        return detect_local_mode_table[m];
}

enum detect_local_mode detect_local_mode_from_string(const char *s) {
        if (!s)
                return _DETECT_LOCAL_INVALID;
        for (int i = 0; i < _DETECT_LOCAL_MAX; i++)
                if (streq(s, detect_local_mode_table[i]))
                        return (enum detect_local_mode) i;
        return _DETECT_LOCAL_INVALID;
}

/* ---- strings and numbers --------------------------------------------------- */

/* Replaces *p with a copy of s. NULL and "" both store NULL: see config.h. */
static int str_set(char **p, const char *s) {
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

static void strv_free(char **v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

static int strv_push(char ***v, size_t *n, const char *s, size_t len) {
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
static int parse_go_bool(const char *s, bool *ret) {
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
static int parse_go_int(const char *s, int64_t *ret) {
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
static int parse_decimal(const char *s, uint64_t max, uint64_t *ret) {
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
        r = parse_decimal(s, INT64_MAX, &v);
        if (r < 0)
                return r;
        *ret = neg ? -(int64_t) v : (int64_t) v;
        return 0;
}

/* strconv.ParseFloat(s, 32). strtod() also skips leading blanks, Go does not. */
static int parse_go_float32(const char *s, float *ret) {
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

/* ---- durations -------------------------------------------------------------- */

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
static int duration_parse_ns(const char *s, int64_t *ret) {
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

        r = duration_parse_ns(s, &ns);
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

/* ---- addresses ----------------------------------------------------------------- */

/* k8s.io/utils/net.ParseIPSloppy: dotted quads may have leading zeros.
 * Returns AF_INET (also for IPv4-mapped IPv6, which Go's To4() counts as
 * IPv4), AF_INET6, or 0 when s is no IP address. */
static int ip_family(const char *s) {
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

/* net.ParseCIDR (sloppy IPv4). Returns the family as ip_family() does, or 0. */
static int cidr_family(const char *s) {
        const char *slash = strchr(s, '/');
        char ip[INET6_ADDRSTRLEN + 8];
        unsigned bits = 0, max;
        int family;

        if (!slash || (size_t) (slash - s) >= sizeof ip || !slash[1])
                return 0;
        memcpy(ip, s, (size_t) (slash - s));
        ip[slash - s] = '\0';
        family = ip_family(ip);
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
static int split_host_port(const char *s, char *host, size_t hostlen, const char **ret_port) {
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
static const char *host_port_problem(const char *s) {
        char host[INET6_ADDRSTRLEN + 8];
        const char *port;
        int64_t p;

        if (split_host_port(s, host, sizeof host, &port) < 0)
                return "must be IP:port";
        if (ip_family(host) == 0)
                return "must be a valid IP";
        if (parse_atoi(port, &p) < 0 || p < 1 || p > 65535)
                return "must be a valid port";
        return NULL;
}

/* proxyutil.AppendPortIfNeeded: a bare IP gets the port, anything else
 * (already IP:port, or garbage for validation to report) is left alone. */
static int append_port_if_needed(char **addr, unsigned port) {
        char host[INET6_ADDRSTRLEN + 8], *n;
        const char *p;
        int family;

        if (!*addr || split_host_port(*addr, host, sizeof host, &p) == 0)
                return 0;
        family = ip_family(*addr);
        if (family == 0)
                return 0;
        if (asprintf(&n, family == AF_INET ? "%s:%u" : "[%s]:%u", *addr, port) < 0)
                return -ENOMEM;
        free(*addr);
        *addr = n;
        return 0;
}

/* utilnet.ParsePortRange: "", "port", "low-high" or "low+offset", all in
 * 0..65535. Only validated: the userspace proxy that used it is gone. */
static bool port_range_valid(const char *s) {
        const char *sep = strpbrk(s, "-+");
        char low[16];
        uint64_t lo, hi;

        if (!*s)
                return true;
        if (!sep)
                return parse_decimal(s, 65535, &lo) == 0;
        if ((size_t) (sep - s) >= sizeof low)
                return false;
        memcpy(low, s, (size_t) (sep - s));
        low[sep - s] = '\0';
        if (parse_decimal(low, 65535, &lo) < 0 || parse_decimal(sep + 1, 65535, &hi) < 0)
                return false;
        if (*sep == '+')
                hi += lo;
        return hi <= 65535 && hi >= lo;
}

/* ---- feature gates ----------------------------------------------------------------- */

/* Sets one gate, keeping the array sorted by name as upstream writes its map. */
static int feature_gate_set(struct kproxy_config *c, const char *name, bool enabled) {
        _cleanup_free_ char *copy = NULL;
        struct config_feature_gate *n;
        size_t i;

        for (i = 0; i < c->n_feature_gates; i++) {
                int d = strcmp(c->feature_gates[i].name, name);

                if (d == 0) {
                        c->feature_gates[i].enabled = enabled;
                        return 0;
                }
                if (d > 0)
                        break;
        }
        copy = strdup(name);
        if (!copy)
                return -ENOMEM;
        n = reallocarray(c->feature_gates, c->n_feature_gates + 1, sizeof *n);
        if (!n)
                return -ENOMEM;
        c->feature_gates = n;
        memmove(n + i + 1, n + i, (c->n_feature_gates - i) * sizeof *n);
        n[i] = (struct config_feature_gate) { .name = TAKE_PTR(copy), .enabled = enabled };
        c->n_feature_gates++;
        return 0;
}

static void feature_gates_clear(struct kproxy_config *c) {
        for (size_t i = 0; i < c->n_feature_gates; i++)
                free(c->feature_gates[i].name);
        free(c->feature_gates);
        c->feature_gates = NULL;
        c->n_feature_gates = 0;
}

bool config_feature_enabled(const struct kproxy_config *c, const char *gate) {
        assert(c);
        assert(gate);

        for (size_t i = 0; i < c->n_feature_gates; i++)
                if (streq(c->feature_gates[i].name, gate))
                        return c->feature_gates[i].enabled;
        return false;
}

const struct config_sync *config_mode_sync(const struct kproxy_config *c) {
        assert(c);
        return c->mode == PROXY_MODE_NFTABLES ? &c->nftables : &c->iptables;
}

/* ---- defaults ---------------------------------------------------------------------- */

struct config_cmdline {
        bool changed[MAX_FLAGS];        /* by index in flag_table, like pflag's Changed */
        /* Flags upstream binds outside its configuration (Options fields). */
        char *hostname_override;
        uint64_t iptables_sync_period_ms;
        uint64_t iptables_min_sync_period_ms;
        uint64_t ipvs_sync_period_ms;
        uint64_t ipvs_min_sync_period_ms;
        int32_t healthz_port;
        int32_t metrics_port;
};

int config_init(struct kproxy_config *c) {
        assert(c);

        /* SetDefaults_KubeProxyConfiguration applied to an empty v1alpha1
         * object, which is what upstream's flags start from. */
        *c = (struct kproxy_config) {
                .detect_local_mode = DETECT_LOCAL_CLUSTER_CIDR,
                .mode = PROXY_MODE_IPTABLES,
                .iptables = {
                        .masquerade_bit = DEFAULT_MASQUERADE_BIT,
                        .localhost_nodeports = true,
                        .sync_period_ms = 30 * MS_SECOND,
                        .min_sync_period_ms = MS_SECOND,
                },
                /* localhost NodePorts are an iptables-only feature. */
                .nftables = {
                        .masquerade_bit = DEFAULT_MASQUERADE_BIT,
                        .sync_period_ms = 30 * MS_SECOND,
                        .min_sync_period_ms = MS_SECOND,
                },
                .conntrack = {
                        .max_per_core = 32 * 1024,
                        .min = 128 * 1024,
                        .tcp_established_timeout_ms = 24 * MS_HOUR,
                        .tcp_close_wait_timeout_ms = MS_HOUR,
                },
                .qps = 5,
                .burst = 10,
                .config_sync_period_ms = 15 * MS_MINUTE,
                .has_oom_score_adj = true,
                .oom_score_adj = DEFAULT_OOM_SCORE_ADJ,
                .log_flush_frequency_ms = 5 * MS_SECOND,
        };
        c->cmdline = malloc(sizeof *c->cmdline);
        if (c->cmdline)
                *c->cmdline = (struct config_cmdline) {
                        .iptables_sync_period_ms = 30 * MS_SECOND,
                        .iptables_min_sync_period_ms = MS_SECOND,
                        .ipvs_sync_period_ms = 30 * MS_SECOND,
                        .ipvs_min_sync_period_ms = MS_SECOND,
                        .healthz_port = HEALTHZ_PORT,
                        .metrics_port = METRICS_PORT,
                };
        c->bind_address = strdup("0.0.0.0");
        c->healthz_bind_address = strdup("0.0.0.0:10256");
        c->metrics_bind_address = strdup("127.0.0.1:10249");
        c->content_type = strdup(DEFAULT_CONTENT_TYPE);
        c->logging_format = strdup("text");
        if (!c->cmdline || !c->bind_address || !c->healthz_bind_address || !c->metrics_bind_address ||
            !c->content_type || !c->logging_format) {
                config_done(c);
                return -ENOMEM;
        }
        return 0;
}

void config_done(struct kproxy_config *c) {
        if (!c)
                return;
        free(c->bind_address);
        free(c->healthz_bind_address);
        free(c->metrics_bind_address);
        free(c->hostname_override);
        free(c->cluster_cidr);
        free(c->bridge_interface);
        free(c->interface_name_prefix);
        strv_free(c->nodeport_addresses, c->n_nodeport_addresses);
        free(c->kubeconfig);
        free(c->content_type);
        free(c->accept_content_types);
        free(c->show_hidden_metrics_for_version);
        feature_gates_clear(c);
        free(c->logging_format);
        free(c->log_vmodule);
        free(c->config_file);
        free(c->write_config_to);
        free(c->master);
        if (c->cmdline)
                free(c->cmdline->hostname_override);
        free(c->cmdline);
        *c = (struct kproxy_config) {};
}

/* ---- flags -------------------------------------------------------------------------- */

struct flag;
/* Applies value to the flag's field. first is true the first time the flag
 * is given (list flags then drop their default instead of appending). On a
 * bad value, says why in *why and returns -EINVAL. */
typedef int (*flag_setter)(struct kproxy_config *c, const struct flag *f, const char *value, bool first,
                           struct buf *why);

struct flag {
        const char *name;
        char shorthand;
        bool is_bool;           /* "--flag" alone means "--flag=true" */
        bool in_cmdline;        /* offset is into struct config_cmdline */
        size_t offset;
        int32_t min, max;       /* integer flags */
        flag_setter set;
        const char *type;       /* value name in --help */
        const char *def;        /* default in --help; must match config_init() */
        const char *help;
        const char *deprecated; /* what to use instead */
};

static void *flag_target(struct kproxy_config *c, const struct flag *f) {
        return (char *) (f->in_cmdline ? (void *) c->cmdline : (void *) c) + f->offset;
}

static int flag_set_bool(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                         struct buf *why) {
        bool b;

        (void) first;
        if (parse_go_bool(v, &b) < 0) {
                buf_puts(why, "must be true or false");
                return -EINVAL;
        }
        *(bool *) flag_target(c, f) = b;
        return 0;
}

static int flag_set_string(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                           struct buf *why) {
        (void) first, (void) why;
        return str_set(flag_target(c, f), v);
}

static int flag_set_int32(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                          struct buf *why) {
        int64_t n;

        (void) first;
        if (parse_go_int(v, &n) < 0 || n < f->min || n > f->max) {
                buf_printf(why, "must be an integer in %" PRIi32 "..%" PRIi32, f->min, f->max);
                return -EINVAL;
        }
        *(int32_t *) flag_target(c, f) = (int32_t) n;
        return 0;
}

static int flag_set_float32(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                            struct buf *why) {
        (void) first;
        if (parse_go_float32(v, flag_target(c, f)) < 0) {
                buf_puts(why, "must be a number");
                return -EINVAL;
        }
        return 0;
}

static int duration_why(int r, struct buf *why) {
        if (r == -ERANGE)
                buf_puts(why, "must be a duration from 0 to 2562047h");
        else
                buf_puts(why, "must be a duration such as 300ms, 30s, 1m30s or 2h");
        return -EINVAL;
}

static int flag_set_duration(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                             struct buf *why) {
        int r;

        (void) first;
        r = config_parse_duration(v, flag_target(c, f));
        return r < 0 ? duration_why(r, why) : 0;
}

/* For the IPVS flags: kproxy has no IPVS mode, so only the syntax matters. */
static int flag_check_duration(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                               struct buf *why) {
        uint64_t ms;
        int r;

        (void) c, (void) f, (void) first;
        r = config_parse_duration(v, &ms);
        return r < 0 ? duration_why(r, why) : 0;
}

/* utilflag.IPVar: an empty value leaves the field alone. */
static int flag_set_ip(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                       struct buf *why) {
        (void) first;
        if (!*v)
                return 0;
        if (ip_family(v) == 0) {
                buf_puts(why, "must be an IP address");
                return -EINVAL;
        }
        return str_set(flag_target(c, f), v);
}

/* utilflag.IPPortVar: an IP, or IP:port with the port in 0..65535; an empty
 * value leaves the field alone. */
static int flag_set_ip_port(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                            struct buf *why) {
        char host[INET6_ADDRSTRLEN + 8];
        const char *port;
        uint64_t p;

        (void) first;
        if (!*v)
                return 0;
        if (ip_family(v) == 0 &&
            (split_host_port(v, host, sizeof host, &port) < 0 || ip_family(host) == 0 ||
             parse_decimal(port, 65535, &p) < 0)) {
                buf_puts(why, "must be IP or IP:port");
                return -EINVAL;
        }
        return str_set(flag_target(c, f), v);
}

/* pflag's StringSlice: comma-separated; the first use replaces the default,
 * later ones append. */
static int flag_set_nodeport_addresses(struct kproxy_config *c, const struct flag *f, const char *v,
                                       bool first, struct buf *why) {
        (void) f, (void) why;
        if (first) {
                strv_free(c->nodeport_addresses, c->n_nodeport_addresses);
                c->nodeport_addresses = NULL;
                c->n_nodeport_addresses = 0;
        }
        if (!*v)
                return 0;
        for (const char *p = v;;) {
                size_t len = strcspn(p, ",");
                int r = strv_push(&c->nodeport_addresses, &c->n_nodeport_addresses, p, len);

                if (r < 0)
                        return r;
                if (!p[len])
                        return 0;
                p += len + 1;
        }
}

static int flag_check_cidrs(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                            struct buf *why) {
        (void) c, (void) f, (void) first;
        if (!*v)
                return 0;
        for (const char *p = v;;) {
                size_t len = strcspn(p, ",");
                char cidr[INET6_ADDRSTRLEN + 8] = "";

                if (len < sizeof cidr)
                        memcpy(cidr, p, len);
                if (len >= sizeof cidr || cidr_family(cidr) == 0) {
                        buf_printf(why, "\"%.*s\" is not a CIDR", (int) len, p);
                        return -EINVAL;
                }
                if (!p[len])
                        return 0;
                p += len + 1;
        }
}

/* For boolean flags kproxy accepts but has no use for. */
static int flag_check_bool(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                           struct buf *why) {
        bool b;

        (void) c, (void) f, (void) first;
        if (parse_go_bool(v, &b) < 0) {
                buf_puts(why, "must be true or false");
                return -EINVAL;
        }
        return 0;
}

static int flag_accept(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                       struct buf *why) {
        (void) c, (void) f, (void) v, (void) first, (void) why;
        return 0;
}

/* resource.Quantity, loosely: a number with an optional SI or binary suffix. */
static bool quantity_valid(const char *s) {
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

static int flag_check_quantity(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                               struct buf *why) {
        (void) c, (void) f, (void) first;
        if (!quantity_valid(v)) {
                buf_puts(why, "must be a quantity such as 0, 64Ki or 1Mi");
                return -EINVAL;
        }
        return 0;
}

static void trim(const char **s, size_t *len) {
        while (*len > 0 && isspace((unsigned char) **s))
                (*s)++, (*len)--;
        while (*len > 0 && isspace((unsigned char) (*s)[*len - 1]))
                (*len)--;
}

/* cliflag.MapStringBool: "name=bool,name=bool", blanks around items ignored;
 * repeated flags merge. */
static int flag_set_feature_gates(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                                  struct buf *why) {
        (void) f, (void) first;
        for (const char *p = v;;) {
                size_t len = strcspn(p, ","), klen, vlen;
                const char *item = p, *eq, *val;
                _cleanup_free_ char *name = NULL, *value = NULL;
                bool enabled;
                int r;

                trim(&item, &len);
                eq = memchr(item, '=', len);
                if (len > 0) {
                        if (!eq) {
                                buf_printf(why, "\"%.*s\" is not name=true|false", (int) len, item);
                                return -EINVAL;
                        }
                        klen = (size_t) (eq - item);
                        val = eq + 1;
                        vlen = len - klen - 1;
                        trim(&item, &klen);
                        trim(&val, &vlen);
                        name = strndup(item, klen);
                        value = strndup(val, vlen);
                        if (!name || !value)
                                return -ENOMEM;
                        if (!*name || parse_go_bool(value, &enabled) < 0) {
                                buf_printf(why, "\"%.*s\" is not name=true|false", (int) len, item);
                                return -EINVAL;
                        }
                        r = feature_gate_set(c, name, enabled);
                        if (r < 0)
                                return r;
                }
                p += strcspn(p, ",");
                if (!*p)
                        return 0;
                p++;
        }
}

static int flag_set_proxy_mode(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                               struct buf *why) {
        enum proxy_mode m = *v ? proxy_mode_from_string(v) : PROXY_MODE_IPTABLES;

        (void) f, (void) first;
        if (m < 0) {
                buf_puts(why, "must be iptables, ipvs or nftables");
                return -EINVAL;
        }
        c->mode = m;
        return 0;
}

static int flag_set_detect_local_mode(struct kproxy_config *c, const struct flag *f, const char *v,
                                      bool first, struct buf *why) {
        enum detect_local_mode m = *v ? detect_local_mode_from_string(v) : DETECT_LOCAL_CLUSTER_CIDR;

        (void) f, (void) first;
        if (m < 0) {
                buf_puts(why, "must be ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix");
                return -EINVAL;
        }
        c->detect_local_mode = m;
        return 0;
}

/* logsapi's VerbosityLevel is a uint32 that klog takes as a positive int32. */
static int flag_set_verbosity(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                              struct buf *why) {
        uint64_t n;

        (void) f, (void) first;
        if (parse_decimal(v, INT32_MAX, &n) < 0) {
                buf_puts(why, "must be an integer in 0..2147483647");
                return -EINVAL;
        }
        c->verbosity = (int32_t) n;
        return 0;
}

static bool vmodule_valid(const char *v) {
        for (const char *p = v;;) {
                size_t len = strcspn(p, ",");
                const char *eq = memchr(p, '=', len);
                char level[16];
                uint64_t n;

                if (!eq || eq == p || (size_t) (p + len - eq - 1) >= sizeof level)
                        return false;
                memcpy(level, eq + 1, (size_t) (p + len - eq - 1));
                level[p + len - eq - 1] = '\0';
                if (parse_decimal(level, INT32_MAX, &n) < 0)
                        return false;
                if (!p[len])
                        return true;
                p += len + 1;
        }
}

static int str_append_list(char **p, const char *v) {
        char *n;

        if (!*p)
                return str_set(p, v);
        if (asprintf(&n, "%s,%s", *p, v) < 0)
                return -ENOMEM;
        free(*p);
        *p = n;
        return 0;
}

static int flag_set_vmodule(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                            struct buf *why) {
        (void) f;
        if (first) {
                free(c->log_vmodule);
                c->log_vmodule = NULL;
        }
        if (!*v)
                return 0;
        if (!vmodule_valid(v)) {
                buf_puts(why, "must be pattern=N,...");
                return -EINVAL;
        }
        return str_append_list(&c->log_vmodule, v);
}

static bool logging_format_valid(const char *v) {
        return v && (streq(v, "text") || streq(v, "json"));
}

static int flag_set_logging_format(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                                   struct buf *why) {
        (void) f, (void) first;
        if (!logging_format_valid(v)) {
                buf_puts(why, "must be text or json");
                return -EINVAL;
        }
        return str_set(&c->logging_format, v);
}

/* Upstream binds it to the internal Linux.MasqueradeAll, which both the
 * iptables and the nftables backend read. */
static int flag_set_masquerade_all(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                                   struct buf *why) {
        bool b;

        (void) f, (void) first;
        if (parse_go_bool(v, &b) < 0) {
                buf_puts(why, "must be true or false");
                return -EINVAL;
        }
        c->iptables.masquerade_all = c->nftables.masquerade_all = b;
        return 0;
}

/* verflag: true, false or raw (which prints more, and still exits). */
static int flag_set_version(struct kproxy_config *c, const struct flag *f, const char *v, bool first,
                            struct buf *why) {
        (void) f, (void) first;
        if (streq(v, "raw")) {
                c->show_version = true;
                return 0;
        }
        if (parse_go_bool(v, &c->show_version) < 0) {
                buf_puts(why, "must be true, false or raw");
                return -EINVAL;
        }
        return 0;
}

#define CFG(member) .offset = offsetof(struct kproxy_config, member)
#define CMD(member) .offset = offsetof(struct config_cmdline, member), .in_cmdline = true

/* Sorted by name, as --help lists them. */
static const struct flag flag_table[] = {
        { .name = "bind-address", .set = flag_set_ip, CFG(bind_address), .type = "ip", .def = "0.0.0.0",
          .help = "The node's primary IP as kproxy should assume it; nothing is bound to it, "
                  "the name is historical." },
        { .name = "bind-address-hard-fail", .is_bool = true, .set = flag_set_bool, CFG(bind_address_hard_fail),
          .help = "Exit when a server port cannot be bound, rather than logging it and going on." },
        { .name = "boot-id-file", .set = flag_accept, .type = "string", .def = "/proc/sys/kernel/random/boot_id",
          .help = "Accepted for kube-proxy compatibility (a cAdvisor flag); not used." },
        { .name = "cleanup", .is_bool = true, .set = flag_set_bool, CFG(cleanup),
          .help = "Remove the rules a proxy installed on this node, then exit." },
        { .name = "cluster-cidr", .set = flag_set_string, CFG(cluster_cidr), .type = "string",
          .help = "The pods' CIDR, or an IPv4,IPv6 pair of them. In ClusterCIDR detect-local mode, "
                  "traffic from it counts as local." },
        { .name = "config", .set = flag_set_string, CFG(config_file), .type = "string",
          .help = "Read the settings from this KubeProxyConfiguration file (YAML or JSON)." },
        { .name = "config-sync-period", .set = flag_set_duration, CFG(config_sync_period_ms), .type = "duration",
          .def = "15m0s", .help = "Resync period of the Service and EndpointSlice informers; "
                                  "must be above 0." },
        { .name = "conntrack-max-per-core", .set = flag_set_int32, CFG(conntrack.max_per_core), .min = 0,
          .max = INT32_MAX, .type = "int32", .def = "32768",
          .help = "Conntrack table size per CPU core; 0 leaves the kernel's limit (and --conntrack-min) "
                  "alone." },
        { .name = "conntrack-min", .set = flag_set_int32, CFG(conntrack.min), .min = 0, .max = INT32_MAX,
          .type = "int32", .def = "131072",
          .help = "Smallest conntrack table size to set, whatever --conntrack-max-per-core "
                  "gives." },
        { .name = "conntrack-tcp-be-liberal", .is_bool = true, .set = flag_set_bool, CFG(conntrack.tcp_be_liberal),
          .help = "Set nf_conntrack_tcp_be_liberal, so out-of-window TCP packets are not marked "
                  "INVALID." },
        { .name = "conntrack-tcp-timeout-close-wait", .set = flag_set_duration,
          CFG(conntrack.tcp_close_wait_timeout_ms), .type = "duration", .def = "1h0m0s",
          .help = "Conntrack timeout of TCP connections in CLOSE_WAIT; 0 keeps the kernel's "
                  "value." },
        { .name = "conntrack-tcp-timeout-established", .set = flag_set_duration,
          CFG(conntrack.tcp_established_timeout_ms), .type = "duration", .def = "24h0m0s",
          .help = "Conntrack idle timeout of established TCP connections; 0 keeps the kernel's "
                  "value." },
        { .name = "conntrack-udp-timeout", .set = flag_set_duration, CFG(conntrack.udp_timeout_ms),
          .type = "duration", .def = "0s",
          .help = "Conntrack timeout of UDP flows not yet answered; 0 keeps the kernel's value." },
        { .name = "conntrack-udp-timeout-stream", .set = flag_set_duration, CFG(conntrack.udp_stream_timeout_ms),
          .type = "duration", .def = "0s",
          .help = "Conntrack timeout of UDP flows seen both ways; 0 keeps the kernel's value." },
        { .name = "detect-local-mode", .set = flag_set_detect_local_mode, .type = "LocalMode", .def = "ClusterCIDR",
          .help = "How to recognise traffic from local pods: ClusterCIDR, NodeCIDR, BridgeInterface or "
                  "InterfaceNamePrefix." },
        { .name = "feature-gates", .set = flag_set_feature_gates, .type = "mapStringBool",
          .help = "Feature gates to switch, as name=true|false,..." },
        { .name = "healthz-bind-address", .set = flag_set_ip_port, CFG(healthz_bind_address), .type = "ipport",
          .def = "0.0.0.0:10256",
          .help = "IP:port of the health check server; a bare IP gets the health check "
                  "port." },
        { .name = "healthz-port", .set = flag_set_int32, CMD(healthz_port), .min = 0, .max = 65535,
          .type = "int32", .def = "10256",
          .help = "Health check port for a --healthz-bind-address given without one; 0 turns the "
                  "server off.",
          .deprecated = "use --healthz-bind-address instead" },
        { .name = "help", .shorthand = 'h', .is_bool = true, .set = flag_set_bool, CFG(show_help),
          .help = "Print this help and exit." },
        { .name = "hostname-override", .set = flag_set_string, CMD(hostname_override), .type = "string",
          .help = "Node name to use instead of the host name. Wins over the config file too." },
        { .name = "init-only", .is_bool = true, .set = flag_set_bool, CFG(init_only),
          .help = "Do the set-up that needs full root privileges, then exit; later runs need only "
                  "CAP_NET_ADMIN." },
        { .name = "iptables-localhost-nodeports", .is_bool = true, .set = flag_set_bool,
          CFG(iptables.localhost_nodeports), .def = "true",
          .help = "Let NodePort services answer on localhost (iptables mode, IPv4 only); false turns "
                  "that off." },
        { .name = "iptables-masquerade-bit", .set = flag_set_int32, CFG(iptables.masquerade_bit), .min = 0,
          .max = 31, .type = "int32", .def = "14",
          .help = "Packet-mark bit, 0..31, that flags packets for SNAT in iptables mode (nftables mode "
                  "keeps its own, 14)." },
        { .name = "iptables-min-sync-period", .set = flag_set_duration, CMD(iptables_min_sync_period_ms),
          .type = "duration", .def = "1s",
          .help = "Shortest time between rule syncs, in iptables and nftables mode; 0 syncs on every "
                  "change." },
        { .name = "iptables-sync-period", .set = flag_set_duration, CMD(iptables_sync_period_ms),
          .type = "duration", .def = "30s",
          .help = "Longest time between full rule syncs, in iptables and nftables mode; must be above "
                  "0." },
        { .name = "ipvs-exclude-cidrs", .set = flag_check_cidrs, .type = "strings",
          .help = "IPVS mode only, which kproxy refuses: CIDRs its cleanup leaves alone." },
        { .name = "ipvs-min-sync-period", .set = flag_set_duration, CMD(ipvs_min_sync_period_ms),
          .type = "duration", .def = "1s", .help = "IPVS mode only: shortest time between rule syncs." },
        { .name = "ipvs-scheduler", .set = flag_accept, .type = "string",
          .help = "IPVS mode only: the IPVS scheduler." },
        { .name = "ipvs-strict-arp", .is_bool = true, .set = flag_check_bool,
          .help = "IPVS mode only: set arp_ignore=1 and arp_announce=2." },
        { .name = "ipvs-sync-period", .set = flag_set_duration, CMD(ipvs_sync_period_ms), .type = "duration",
          .def = "30s", .help = "IPVS mode only: longest time between full rule syncs." },
        { .name = "ipvs-tcp-timeout", .set = flag_check_duration, .type = "duration", .def = "0s",
          .help = "IPVS mode only: idle timeout of TCP sessions; 0 keeps the kernel's value." },
        { .name = "ipvs-tcpfin-timeout", .set = flag_check_duration, .type = "duration", .def = "0s",
          .help = "IPVS mode only: timeout of TCP sessions after a FIN; 0 keeps the kernel's value." },
        { .name = "ipvs-udp-timeout", .set = flag_check_duration, .type = "duration", .def = "0s",
          .help = "IPVS mode only: timeout of UDP sessions; 0 keeps the kernel's value." },
        { .name = "kube-api-burst", .set = flag_set_int32, CFG(burst), .min = INT32_MIN, .max = INT32_MAX,
          .type = "int32", .def = "10",
          .help = "Requests to the API server allowed at once beyond --kube-api-qps." },
        { .name = "kube-api-content-type", .set = flag_set_string, CFG(content_type), .type = "string",
          .def = DEFAULT_CONTENT_TYPE, .help = "Content type to ask the API server for." },
        { .name = "kube-api-qps", .set = flag_set_float32, CFG(qps), .type = "float32", .def = "5",
          .help = "Sustained requests per second to the API server." },
        { .name = "kubeconfig", .set = flag_set_string, CFG(kubeconfig), .type = "string",
          .help = "Kubeconfig file with the API server and credentials (--master overrides the "
                  "server)." },
        { .name = "log-flush-frequency", .set = flag_set_duration, CFG(log_flush_frequency_ms),
          .type = "duration", .def = "5s", .help = "Longest time log lines may stay buffered." },
        { .name = "log-json-info-buffer-size", .set = flag_check_quantity, .type = "quantity", .def = "0",
          .help = "Accepted for kube-proxy compatibility; kproxy does not buffer logs." },
        { .name = "log-json-split-stream", .is_bool = true, .set = flag_check_bool,
          .help = "Accepted for kube-proxy compatibility; kproxy logs to stderr only." },
        { .name = "log-text-info-buffer-size", .set = flag_check_quantity, .type = "quantity", .def = "0",
          .help = "Accepted for kube-proxy compatibility; kproxy does not buffer logs." },
        { .name = "log-text-split-stream", .is_bool = true, .set = flag_check_bool,
          .help = "Accepted for kube-proxy compatibility; kproxy logs to stderr only." },
        { .name = "logging-format", .set = flag_set_logging_format, .type = "string", .def = "text",
          .help = "Log format: text (klog's) or json." },
        { .name = "machine-id-file", .set = flag_accept, .type = "string",
          .def = "/etc/machine-id,/var/lib/dbus/machine-id",
          .help = "Accepted for kube-proxy compatibility (a cAdvisor flag); not used." },
        { .name = "masquerade-all", .is_bool = true, .set = flag_set_masquerade_all,
          .help = "SNAT all traffic sent to Service cluster IPs, as some CNI plugins need; iptables and "
                  "nftables mode." },
        { .name = "master", .set = flag_set_string, CFG(master), .type = "string",
          .help = "API server address; overrides the one in the kubeconfig." },
        { .name = "metrics-bind-address", .set = flag_set_ip_port, CFG(metrics_bind_address), .type = "ipport",
          .def = "127.0.0.1:10249",
          .help = "IP:port of the metrics server (0.0.0.0:10249 or [::]:10249 for every interface); "
                  "a bare IP gets the metrics port." },
        { .name = "metrics-port", .set = flag_set_int32, CMD(metrics_port), .min = 0, .max = 65535,
          .type = "int32", .def = "10249",
          .help = "Metrics port for a --metrics-bind-address given without one.",
          .deprecated = "use --metrics-bind-address instead" },
        { .name = "nodeport-addresses", .set = flag_set_nodeport_addresses, .type = "strings",
          .help = "CIDRs of the node IPs that take NodePort traffic, or just \"primary\" for the Node's "
                  "primary IPs. Unset: every local IP (nftables mode: primary)." },
        { .name = "oom-score-adj", .set = flag_set_int32, CFG(oom_score_adj), .min = -1000, .max = 1000,
          .type = "int32", .def = "-999", .help = "oom_score_adj of the kproxy process, -1000..1000." },
        { .name = "pod-bridge-interface", .set = flag_set_string, CFG(bridge_interface), .type = "string",
          .help = "In BridgeInterface detect-local mode, traffic from this bridge counts as "
                  "local." },
        { .name = "pod-interface-name-prefix", .set = flag_set_string, CFG(interface_name_prefix),
          .type = "string",
          .help = "In InterfaceNamePrefix detect-local mode, traffic from interfaces whose name starts "
                  "with this counts as local." },
        { .name = "profiling", .is_bool = true, .set = flag_set_bool, CFG(enable_profiling),
          .help = "Turn on profiling under /debug/pprof on the metrics server." },
        { .name = "proxy-mode", .set = flag_set_proxy_mode, .type = "ProxyMode", .def = "iptables",
          .help = "Rule backend: iptables or nftables (ipvs parses but is refused at "
                  "start-up)." },
        { .name = "show-hidden-metrics-for-version", .set = flag_set_string, CFG(show_hidden_metrics_for_version),
          .type = "string",
          .help = "Previous minor version, as 1.30, whose hidden metrics should still be "
                  "shown." },
        { .name = "v", .shorthand = 'v', .set = flag_set_verbosity, .type = "Level", .def = "0",
          .help = "Log verbosity (klog's V level)." },
        { .name = "version", .is_bool = true, .set = flag_set_version, .type = "version[=true]",
          .help = "Print the version and exit; --version=raw prints more detail." },
        { .name = "vmodule", .set = flag_set_vmodule, .type = "pattern=N,...",
          .help = "Per-file verbosity, as pattern=N,... (text format only)." },
        { .name = "write-config-to", .set = flag_set_string, CFG(write_config_to), .type = "string",
          .help = "Write the effective settings to this file as a KubeProxyConfiguration, then exit." },
};

_Static_assert(ELEMENTSOF(flag_table) <= MAX_FLAGS, "raise MAX_FLAGS");

static const struct flag *flag_lookup(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(flag_table); i++)
                if (streq(flag_table[i].name, name))
                        return &flag_table[i];
        return NULL;
}

static bool flag_changed(const struct kproxy_config *c, const char *name) {
        const struct flag *f = flag_lookup(name);

        assert(f);
        return c->cmdline->changed[f - flag_table];
}

/* cliflag.WordSepNormalizeFunc: "--iptables_sync_period" is "--iptables-sync-period". */
static bool flag_name_eq(const char *a, const char *b) {
        for (; *a && *b; a++, b++)
                if (*a != *b && !((*a == '_' || *a == '-') && (*b == '_' || *b == '-')))
                        return false;
        return *a == *b;
}

static int flag_apply(struct kproxy_config *c, const struct flag *f, const char *value) {
        size_t idx = (size_t) (f - flag_table);
        struct buf why = BUF_INIT;
        int r;

        r = f->set(c, f, value, !c->cmdline->changed[idx], &why);
        if (r == -EINVAL)
                config_error("invalid value \"%s\" for flag --%s: %s", value, f->name, why.data ? why.data : "");
        buf_done(&why);
        if (r < 0)
                return r;
        c->cmdline->changed[idx] = true;
        if (f->deprecated)
                config_print("flag --%s is deprecated, %s", f->name, f->deprecated);
        return 0;
}

static int extra_apply(const struct config_extra_flag *x, void *userdata, const char *value) {
        bool b;
        int r;

        /* set() gets a boolean already spelled "true" or "false". */
        if (x->is_bool) {
                if (parse_go_bool(value, &b) < 0)
                        return config_error("invalid value \"%s\" for flag --%s: must be true or false", value,
                                            x->name);
                value = b ? "true" : "false";
        }
        r = x->set(userdata, value);
        if (r == -EINVAL)
                return config_error("invalid value \"%s\" for flag --%s", value, x->name);
        return r;
}

/* "--name", "--name=value" or "--name value"; *i moves past a consumed value. */
static int parse_long(struct kproxy_config *c, int argc, char **argv, int *i,
                      const struct config_extra_flag *extra, size_t n_extra, void *userdata) {
        const char *arg = argv[*i], *body = arg + 2, *eq = strchr(body, '='), *value;
        _cleanup_free_ char *name = strndup(body, eq ? (size_t) (eq - body) : strlen(body));
        const struct config_extra_flag *x = NULL;
        const struct flag *f = NULL;
        bool is_bool;

        if (!name)
                return -ENOMEM;
        if (!*name || *name == '-')
                return config_error("bad flag syntax: %s", arg);
        for (size_t k = 0; k < ELEMENTSOF(flag_table) && !f; k++)
                if (flag_name_eq(flag_table[k].name, name))
                        f = &flag_table[k];
        for (size_t k = 0; k < n_extra && !f && !x; k++)
                if (flag_name_eq(extra[k].name, name))
                        x = &extra[k];
        if (!f && !x)
                return config_error("unknown flag: --%s", name);

        is_bool = f ? f->is_bool : x->is_bool;
        if (eq)
                value = eq + 1;
        else if (is_bool)
                value = "true";
        else if (*i + 1 < argc)
                value = argv[++*i];     /* pflag takes it even if it starts with "-" */
        else
                return config_error("flag needs an argument: --%s", f ? f->name : x->name);
        return f ? flag_apply(c, f, value) : extra_apply(x, userdata, value);
}

/* "-h", "-v 4", "-v4", "-v=4", and bundles such as "-hv4". */
static int parse_short(struct kproxy_config *c, int argc, char **argv, int *i) {
        const char *arg = argv[*i];

        for (const char *p = arg + 1; *p; p++) {
                const struct flag *f = NULL;
                const char *value;

                for (size_t k = 0; k < ELEMENTSOF(flag_table) && !f; k++)
                        if (flag_table[k].shorthand == *p)
                                f = &flag_table[k];
                if (!f)
                        return config_error("unknown shorthand flag: '%c' in %s", *p, arg);
                if (p[1] == '=')
                        return flag_apply(c, f, p + 2);
                if (f->is_bool) {
                        int r = flag_apply(c, f, "true");

                        if (r < 0)
                                return r;
                        continue;
                }
                if (p[1])
                        value = p + 1;
                else if (*i + 1 < argc)
                        value = argv[++*i];
                else
                        return config_error("flag needs an argument: -%c", *p);
                return flag_apply(c, f, value);
        }
        return 0;
}

int config_parse_args(struct kproxy_config *c, int argc, char **argv,
                      const struct config_extra_flag *extra, size_t n_extra, void *userdata,
                      char ***ret_args, size_t *ret_n_args) {
        _cleanup_free_ char **args = NULL;
        size_t n_args = 0;
        int r;

        assert(c);
        assert(c->cmdline);
        assert(argc >= 0);
        assert(argv || argc == 0);
        assert(extra || n_extra == 0);

        args = calloc((size_t) argc + 1, sizeof(char *));
        if (!args)
                return -ENOMEM;

        for (int i = 0; i < argc; i++) {
                const char *a = argv[i];

                if (streq(a, "--")) {
                        while (++i < argc)
                                args[n_args++] = argv[i];
                        break;
                }
                if (a[0] != '-' || a[1] == '\0') {
                        args[n_args++] = argv[i];
                        continue;
                }
                if (a[1] == '-')
                        r = parse_long(c, argc, argv, &i, extra, n_extra, userdata);
                else
                        r = parse_short(c, argc, argv, &i);
                if (r < 0)
                        return r;
        }

        if (ret_n_args)
                *ret_n_args = n_args;
        if (ret_args)
                *ret_args = TAKE_PTR(args);
        return 0;
}

static void help_line(int width, const char *left, const char *help, const char *def, const char *deprecated) {
        /* pflag's layout: the flag, then its help from one column. */
        printf("  %-*s   %s", width, left, help);
        if (def)
                printf(" (default %s)", def);
        if (deprecated)
                printf(" (DEPRECATED: %s)", deprecated);
        putchar('\n');
}

void config_print_help(const char *usage, const struct config_extra_flag *extra, size_t n_extra) {
        int width = 0;

        assert(extra || n_extra == 0);

        /* usage is the caller's text ("Usage: ..." and a description). */
        usage = usage ? usage : "Usage: kproxy [flags]\n";
        fputs(usage, stdout);
        if (!*usage || usage[strlen(usage) - 1] != '\n')
                putchar('\n');
        printf("\nWhen --config is given, the file replaces every flag but --config, --write-config-to,\n"
               "--cleanup, --init-only, --master, --hostname-override and the logging flags\n"
               "(-v, --vmodule, --logging-format, --log-flush-frequency).\n\n"
               "Flags:\n");
        for (int pass = 0; pass < 2; pass++) {
                for (size_t i = 0; i < ELEMENTSOF(flag_table) + n_extra; i++) {
                        const struct flag *f = i < ELEMENTSOF(flag_table) ? &flag_table[i] : NULL;
                        const struct config_extra_flag *x = f ? NULL : &extra[i - ELEMENTSOF(flag_table)];
                        const char *type = f ? f->type : x->is_bool ? NULL : x->value_name;
                        char left[128];
                        int n;

                        if (f && f->shorthand)
                                n = snprintf(left, sizeof left, "-%c, --%s%s%s", f->shorthand, f->name,
                                             type ? " " : "", type ? type : "");
                        else
                                n = snprintf(left, sizeof left, "    --%s%s%s", f ? f->name : x->name,
                                             type ? " " : "", type ? type : "");
                        if (pass == 0) {
                                width = n > width ? n : width;
                                continue;
                        }
                        if (!f && x == extra)
                                printf("\nCommand flags:\n");
                        if (f)
                                help_line(width, left, f->help, f->def, f->deprecated);
                        else
                                help_line(width, left, x->help ? x->help : "", NULL, NULL);
                }
        }
}

/* ---- reading the configuration file ------------------------------------------------- */

enum scalar_kind {
        SCALAR_NULL,
        SCALAR_BOOL,
        SCALAR_INT,
        SCALAR_FLOAT,
        SCALAR_STRING,
};

static const char *const scalar_kind_name[] = {
        [SCALAR_NULL] = "null",
        [SCALAR_BOOL] = "a boolean",
        [SCALAR_INT] = "an integer",
        [SCALAR_FLOAT] = "a number",
        [SCALAR_STRING] = "a string",
};

struct scalar {
        enum scalar_kind kind;
        const char *text;
        bool b;
        int64_t i;
        double f;
};

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
static void yaml_resolve(const char *s, struct scalar *ret) {
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

        *ret = (struct scalar) { .kind = SCALAR_STRING, .text = s };
        if (str_in(s, nulls, ELEMENTSOF(nulls)))
                ret->kind = SCALAR_NULL;
        else if (str_in(s, trues, ELEMENTSOF(trues)))
                ret->kind = SCALAR_BOOL, ret->b = true;
        else if (str_in(s, falses, ELEMENTSOF(falses)))
                ret->kind = SCALAR_BOOL, ret->b = false;
        else if (str_in(s, infs, ELEMENTSOF(infs)))
                ret->kind = SCALAR_FLOAT, ret->f = INFINITY;
        else if (str_in(s, ninfs, ELEMENTSOF(ninfs)))
                ret->kind = SCALAR_FLOAT, ret->f = -INFINITY;
        else if (str_in(s, nans, ELEMENTSOF(nans)))
                ret->kind = SCALAR_FLOAT, ret->f = NAN;
        if (ret->kind != SCALAR_STRING || !strchr("+-.0123456789", s[0]))
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
        if (parse_go_int(plain, &ret->i) == 0)
                ret->kind = SCALAR_INT;
        else if (yaml_float_syntax(plain))
                ret->kind = SCALAR_FLOAT, ret->f = strtod(plain, NULL);
}

struct file_decoder {
        const char *path;
        yaml_document_t *doc;
        struct kproxy_config *c;        /* zeroed, then decoded onto */
        struct buf field;               /* dotted path of the field being decoded */
        /* Fields that are pointers upstream: null or absent means "default",
         * while 0 is a value. */
        bool has_iptables_masquerade_bit;
        bool has_nftables_masquerade_bit;
        bool has_localhost_nodeports;
        bool has_max_per_core;
        bool has_conntrack_min;
        bool has_tcp_established_timeout;
        bool has_tcp_close_wait_timeout;
        bool has_oom_score_adj;
        /* Checked, then dropped: kproxy has no IPVS or userspace mode. */
        uint64_t ipvs_sync_period_ms;
        uint64_t ipvs_min_sync_period_ms;
        char **ipvs_exclude_cidrs;
        size_t n_ipvs_exclude_cidrs;
        char *port_range;
};

static void file_decoder_done(struct file_decoder *d) {
        buf_done(&d->field);
        strv_free(d->ipvs_exclude_cidrs, d->n_ipvs_exclude_cidrs);
        free(d->port_range);
}

enum field_type {
        FIELD_MAP,
        FIELD_STRING,
        FIELD_BOOL,
        FIELD_INT32,
        FIELD_FLOAT32,
        FIELD_DURATION,
        FIELD_STRINGS,
        FIELD_FEATURE_GATES,
        FIELD_PROXY_MODE,
        FIELD_DETECT_LOCAL_MODE,
        FIELD_FLUSH_FREQUENCY,
        FIELD_VERBOSITY,
        FIELD_VMODULE,
        FIELD_QUANTITY,
};

enum field_base {
        BASE_NONE,              /* type-checked, then dropped */
        BASE_CONFIG,
        BASE_DECODER,
};

struct field {
        const char *name;       /* NULL ends a table */
        enum field_type type;
        enum field_base base;
        size_t offset;
        size_t offset_n;        /* FIELD_STRINGS: the count beside the array */
        int has;                /* offset of a presence flag in struct file_decoder, or -1 */
        const struct field *children;
};

#define F(n, t, m) \
        { .name = n, .type = t, .base = BASE_CONFIG, .offset = offsetof(struct kproxy_config, m), .has = -1 }
#define F_HAS(n, t, m, h)                                                                               \
        { .name = n, .type = t, .base = BASE_CONFIG, .offset = offsetof(struct kproxy_config, m),      \
          .has = (int) offsetof(struct file_decoder, h) }
#define F_DEC(n, t, m) \
        { .name = n, .type = t, .base = BASE_DECODER, .offset = offsetof(struct file_decoder, m), .has = -1 }
#define F_LIST(n, base_, type_, m, mn)                                                            \
        { .name = n, .type = FIELD_STRINGS, .base = base_, .offset = offsetof(type_, m),        \
          .offset_n = offsetof(type_, mn), .has = -1 }
#define F_IGNORE(n, t) { .name = n, .type = t, .base = BASE_NONE, .has = -1 }
#define F_MAP(n, kids) { .name = n, .type = FIELD_MAP, .children = kids, .has = -1 }
#define F_END { .name = NULL }

/* KubeProxyConfiguration v1alpha1 as of Kubernetes 1.31-1.33. */
static const struct field client_connection_fields[] = {
        F("acceptContentTypes", FIELD_STRING, accept_content_types),
        F("burst", FIELD_INT32, burst),
        F("contentType", FIELD_STRING, content_type),
        F("kubeconfig", FIELD_STRING, kubeconfig),
        F("qps", FIELD_FLOAT32, qps),
        F_END,
};

static const struct field conntrack_fields[] = {
        F_HAS("maxPerCore", FIELD_INT32, conntrack.max_per_core, has_max_per_core),
        F_HAS("min", FIELD_INT32, conntrack.min, has_conntrack_min),
        F("tcpBeLiberal", FIELD_BOOL, conntrack.tcp_be_liberal),
        F_HAS("tcpCloseWaitTimeout", FIELD_DURATION, conntrack.tcp_close_wait_timeout_ms,
              has_tcp_close_wait_timeout),
        F_HAS("tcpEstablishedTimeout", FIELD_DURATION, conntrack.tcp_established_timeout_ms,
              has_tcp_established_timeout),
        F("udpStreamTimeout", FIELD_DURATION, conntrack.udp_stream_timeout_ms),
        F("udpTimeout", FIELD_DURATION, conntrack.udp_timeout_ms),
        F_END,
};

static const struct field detect_local_fields[] = {
        F("bridgeInterface", FIELD_STRING, bridge_interface),
        F("interfaceNamePrefix", FIELD_STRING, interface_name_prefix),
        F_END,
};

static const struct field iptables_fields[] = {
        F_HAS("localhostNodePorts", FIELD_BOOL, iptables.localhost_nodeports, has_localhost_nodeports),
        F("masqueradeAll", FIELD_BOOL, iptables.masquerade_all),
        F_HAS("masqueradeBit", FIELD_INT32, iptables.masquerade_bit, has_iptables_masquerade_bit),
        F("minSyncPeriod", FIELD_DURATION, iptables.min_sync_period_ms),
        F("syncPeriod", FIELD_DURATION, iptables.sync_period_ms),
        F_END,
};

static const struct field ipvs_fields[] = {
        F_LIST("excludeCIDRs", BASE_DECODER, struct file_decoder, ipvs_exclude_cidrs, n_ipvs_exclude_cidrs),
        F_DEC("minSyncPeriod", FIELD_DURATION, ipvs_min_sync_period_ms),
        F_IGNORE("scheduler", FIELD_STRING),
        F_IGNORE("strictARP", FIELD_BOOL),
        F_DEC("syncPeriod", FIELD_DURATION, ipvs_sync_period_ms),
        F_IGNORE("tcpFinTimeout", FIELD_DURATION),
        F_IGNORE("tcpTimeout", FIELD_DURATION),
        F_IGNORE("udpTimeout", FIELD_DURATION),
        F_END,
};

static const struct field nftables_fields[] = {
        F("masqueradeAll", FIELD_BOOL, nftables.masquerade_all),
        F_HAS("masqueradeBit", FIELD_INT32, nftables.masquerade_bit, has_nftables_masquerade_bit),
        F("minSyncPeriod", FIELD_DURATION, nftables.min_sync_period_ms),
        F("syncPeriod", FIELD_DURATION, nftables.sync_period_ms),
        F_END,
};

static const struct field winkernel_fields[] = {
        F_IGNORE("enableDSR", FIELD_BOOL),
        F_IGNORE("forwardHealthCheckVip", FIELD_BOOL),
        F_IGNORE("networkName", FIELD_STRING),
        F_IGNORE("rootHnsEndpointName", FIELD_STRING),
        F_IGNORE("sourceVip", FIELD_STRING),
        F_END,
};

static const struct field log_output_fields[] = {
        F_IGNORE("infoBufferSize", FIELD_QUANTITY),
        F_IGNORE("splitStream", FIELD_BOOL),
        F_END,
};

static const struct field log_options_fields[] = {
        F_MAP("json", log_output_fields),
        F_MAP("text", log_output_fields),
        F_END,
};

static const struct field logging_fields[] = {
        F("flushFrequency", FIELD_FLUSH_FREQUENCY, log_flush_frequency_ms),
        F("format", FIELD_STRING, logging_format),
        F_MAP("options", log_options_fields),
        F("verbosity", FIELD_VERBOSITY, verbosity),
        F("vmodule", FIELD_VMODULE, log_vmodule),
        F_END,
};

static const struct field top_fields[] = {
        F_IGNORE("apiVersion", FIELD_STRING),   /* checked first, by decode_type_meta() */
        F("bindAddress", FIELD_STRING, bind_address),
        F("bindAddressHardFail", FIELD_BOOL, bind_address_hard_fail),
        F_MAP("clientConnection", client_connection_fields),
        F("clusterCIDR", FIELD_STRING, cluster_cidr),
        F("configSyncPeriod", FIELD_DURATION, config_sync_period_ms),
        F_MAP("conntrack", conntrack_fields),
        F_MAP("detectLocal", detect_local_fields),
        F("detectLocalMode", FIELD_DETECT_LOCAL_MODE, detect_local_mode),
        F("enableProfiling", FIELD_BOOL, enable_profiling),
        F("featureGates", FIELD_FEATURE_GATES, feature_gates),
        F("healthzBindAddress", FIELD_STRING, healthz_bind_address),
        F("hostnameOverride", FIELD_STRING, hostname_override),
        F_MAP("iptables", iptables_fields),
        F_MAP("ipvs", ipvs_fields),
        F_IGNORE("kind", FIELD_STRING),
        F_MAP("logging", logging_fields),
        F("metricsBindAddress", FIELD_STRING, metrics_bind_address),
        F("mode", FIELD_PROXY_MODE, mode),
        F_MAP("nftables", nftables_fields),
        F_LIST("nodePortAddresses", BASE_CONFIG, struct kproxy_config, nodeport_addresses, n_nodeport_addresses),
        F_HAS("oomScoreAdj", FIELD_INT32, oom_score_adj, has_oom_score_adj),
        F_DEC("portRange", FIELD_STRING, port_range),
        F("showHiddenMetricsForVersion", FIELD_STRING, show_hidden_metrics_for_version),
        F_IGNORE("windowsRunAsService", FIELD_BOOL),
        F_MAP("winkernel", winkernel_fields),
        F_END,
};

static unsigned long node_line(const yaml_node_t *n) {
        return (unsigned long) n->start_mark.line + 1;
}

static int decode_error(struct file_decoder *d, const yaml_node_t *n, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int decode_error(struct file_decoder *d, const yaml_node_t *n, const char *fmt, ...) {
        struct buf msg = BUF_INIT;
        va_list ap;

        va_start(ap, fmt);
        buf_vprintf(&msg, fmt, ap);
        va_end(ap);
        if (d->field.len > 0)
                config_error("%s: line %lu: %s: %s", d->path, node_line(n), d->field.data, msg.data);
        else
                config_error("%s: line %lu: %s", d->path, node_line(n), msg.data);
        buf_done(&msg);
        return -EINVAL;
}

static int decode_scalar(struct file_decoder *d, const yaml_node_t *n, struct scalar *ret) {
        const char *text;

        if (n->type != YAML_SCALAR_NODE)
                return decode_error(d, n, "expected a single value, got a %s",
                                    n->type == YAML_MAPPING_NODE ? "mapping" : "list");
        text = (const char *) n->data.scalar.value;
        if (strlen(text) != n->data.scalar.length)
                return decode_error(d, n, "value holds a NUL byte");
        if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
                yaml_resolve(text, ret);
        else
                *ret = (struct scalar) { .kind = SCALAR_STRING, .text = text };
        return 0;
}

static int decode_type_error(struct file_decoder *d, const yaml_node_t *n, const struct scalar *s,
                             const char *want) {
        return decode_error(d, n, "expected %s, got %s \"%s\"", want, scalar_kind_name[s->kind], s->text);
}

/* An integer in min..max. A float that is integral passes too, because the
 * JSON upstream decodes from prints 14.0 as 14. */
static int decode_integer(struct file_decoder *d, const yaml_node_t *n, const struct scalar *s, int64_t min,
                          int64_t max, int64_t *ret) {
        if (s->kind == SCALAR_FLOAT && s->f >= (double) min && s->f <= (double) max && s->f == (double) (int64_t) s->f) {
                *ret = (int64_t) s->f;
                return 0;
        }
        if (s->kind != SCALAR_INT)
                return decode_type_error(d, n, s, "an integer");
        if (s->i < min || s->i > max)
                return decode_error(d, n, "%s is out of range %" PRIi64 "..%" PRIi64, s->text, min, max);
        *ret = s->i;
        return 0;
}

static int decode_duration(struct file_decoder *d, const yaml_node_t *n, const struct scalar *s,
                           uint64_t *ret_ms) {
        int64_t ns;
        int r;

        /* metav1.Duration only takes a string. */
        if (s->kind != SCALAR_STRING)
                return decode_type_error(d, n, s, "a duration such as \"30s\"");
        r = duration_parse_ns(s->text, &ns);
        if (r < 0)
                return decode_error(d, n, "\"%s\" is not a duration such as 300ms, 30s, 1m30s or 2h", s->text);
        if (ns < 0)
                return decode_error(d, n, "%s must not be negative", s->text);
        *ret_ms = (uint64_t) ns / 1000000;
        return 0;
}

static int decode_map(struct file_decoder *d, yaml_node_t *n, const struct field *table);

static int decode_strings(struct file_decoder *d, yaml_node_t *n, char ***v, size_t *nv) {
        struct scalar s;
        int r;

        if (n->type == YAML_SCALAR_NODE) {
                r = decode_scalar(d, n, &s);
                if (r < 0)
                        return r;
                if (s.kind != SCALAR_NULL)
                        return decode_type_error(d, n, &s, "a list");
        } else if (n->type != YAML_SEQUENCE_NODE)
                return decode_error(d, n, "expected a list, got a mapping");

        strv_free(*v, *nv);
        *v = NULL;
        *nv = 0;
        if (n->type != YAML_SEQUENCE_NODE)
                return 0;
        for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
                yaml_node_t *item = yaml_document_get_node(d->doc, *i);

                r = decode_scalar(d, item, &s);
                if (r < 0)
                        return r;
                if (s.kind != SCALAR_STRING)
                        return decode_type_error(d, item, &s, "a string");
                r = strv_push(v, nv, s.text, strlen(s.text));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Walks the pairs of a mapping, keeping d->field on the key's path and
 * warning about names seen before in the same mapping (upstream's lenient
 * decoder keeps the last one). */
static int decode_pairs(struct file_decoder *d, yaml_node_t *n,
                        int (*fn)(struct file_decoder *d, const char *name, yaml_node_t *key, yaml_node_t *value,
                                  const void *userdata),
                        const void *userdata) {
        yaml_node_pair_t *start = n->data.mapping.pairs.start, *top = n->data.mapping.pairs.top;
        size_t mark = d->field.len;

        for (yaml_node_pair_t *p = start; p < top; p++) {
                yaml_node_t *key = yaml_document_get_node(d->doc, p->key);
                yaml_node_t *value = yaml_document_get_node(d->doc, p->value);
                const char *name;
                int r;

                if (key->type != YAML_SCALAR_NODE)
                        return decode_error(d, key, "field names must be strings");
                name = (const char *) key->data.scalar.value;
                if (mark > 0)
                        buf_putc(&d->field, '.');
                buf_puts(&d->field, name);
                for (yaml_node_pair_t *q = start; q < p; q++) {
                        yaml_node_t *k = yaml_document_get_node(d->doc, q->key);

                        if (k->type == YAML_SCALAR_NODE && streq((const char *) k->data.scalar.value, name)) {
                                config_print("%s: line %lu: duplicate field \"%s\", the last one wins", d->path,
                                               node_line(key), d->field.data);
                                break;
                        }
                }
                r = fn(d, name, key, value, userdata);
                buf_truncate(&d->field, mark);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int decode_feature_gate(struct file_decoder *d, const char *name, yaml_node_t *key, yaml_node_t *value,
                               const void *userdata) {
        struct scalar s;
        int r;

        (void) key, (void) userdata;
        r = decode_scalar(d, value, &s);
        if (r < 0)
                return r;
        if (s.kind != SCALAR_BOOL)
                return decode_type_error(d, value, &s, "true or false");
        if (!*name)
                return decode_error(d, key, "feature gate names must not be empty");
        return feature_gate_set(d->c, name, s.b);
}

struct vmodule_item {
        const char *pattern;
        int64_t level;
        bool has_level;
};

static int decode_vmodule_field(struct file_decoder *d, const char *name, yaml_node_t *key, yaml_node_t *value,
                                const void *userdata) {
        struct vmodule_item *item = (struct vmodule_item *) userdata;
        struct scalar s;
        int r;

        r = decode_scalar(d, value, &s);
        if (r < 0)
                return r;
        if (streq(name, "filePattern")) {
                if (s.kind != SCALAR_STRING)
                        return decode_type_error(d, value, &s, "a string");
                item->pattern = s.text;
        } else if (streq(name, "verbosity")) {
                r = decode_integer(d, value, &s, 0, INT32_MAX, &item->level);
                if (r < 0)
                        return r;
                item->has_level = true;
        } else
                config_print("%s: line %lu: unknown field \"%s\", ignoring", d->path, node_line(key),
                               d->field.data);
        return 0;
}

/* logsapi's VModuleConfiguration, a list of {filePattern, verbosity}, kept
 * in the flag's "pattern=N,..." form. */
static int decode_vmodule(struct file_decoder *d, yaml_node_t *n, char **target) {
        struct scalar s;
        int r;

        if (n->type == YAML_SCALAR_NODE) {
                r = decode_scalar(d, n, &s);
                if (r < 0)
                        return r;
                if (s.kind != SCALAR_NULL)
                        return decode_type_error(d, n, &s, "a list");
                return str_set(target, NULL);
        }
        if (n->type != YAML_SEQUENCE_NODE)
                return decode_error(d, n, "expected a list, got a mapping");
        r = str_set(target, NULL);
        if (r < 0)
                return r;
        for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
                yaml_node_t *node = yaml_document_get_node(d->doc, *i);
                struct vmodule_item item = {};
                _cleanup_free_ char *entry = NULL;

                if (node->type != YAML_MAPPING_NODE)
                        return decode_error(d, node, "expected {filePattern, verbosity} items");
                r = decode_pairs(d, node, decode_vmodule_field, &item);
                if (r < 0)
                        return r;
                if (!item.pattern || !*item.pattern)
                        return decode_error(d, node, "items need a filePattern");
                if (asprintf(&entry, "%s=%" PRIi64, item.pattern, item.level) < 0)
                        return -ENOMEM;
                r = str_append_list(target, entry);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int decode_value(struct file_decoder *d, const struct field *f, yaml_node_t *n) {
        void *target = f->base == BASE_CONFIG ? (char *) d->c + f->offset :
                       f->base == BASE_DECODER ? (char *) d + f->offset : NULL;
        bool *has = f->has >= 0 ? (bool *) ((char *) d + f->has) : NULL;
        struct scalar s;
        uint64_t ms;
        int64_t i;
        int r;

        switch (f->type) {
        case FIELD_MAP:
                return decode_map(d, n, f->children);
        case FIELD_STRINGS:
                assert(target);
                return decode_strings(d, n, target, (size_t *) ((char *) target - f->offset + f->offset_n));
        case FIELD_VMODULE:
                return decode_vmodule(d, n, target);
        case FIELD_FEATURE_GATES:
                if (n->type == YAML_MAPPING_NODE) {
                        feature_gates_clear(d->c);
                        return decode_pairs(d, n, decode_feature_gate, NULL);
                }
                if (n->type == YAML_SEQUENCE_NODE)
                        return decode_error(d, n, "expected a mapping of feature gate names to true or false");
                break;
        default:
                break;
        }

        r = decode_scalar(d, n, &s);
        if (r < 0)
                return r;
        if (s.kind == SCALAR_NULL) {
                /* encoding/json: null clears a pointer and leaves anything
                 * else as it is. */
                if (has)
                        *has = false;
                if (f->type == FIELD_FEATURE_GATES)
                        feature_gates_clear(d->c);
                return 0;
        }

        switch (f->type) {
        case FIELD_STRING:
                if (s.kind != SCALAR_STRING)
                        return decode_type_error(d, n, &s, "a string");
                if (target) {
                        r = str_set(target, s.text);
                        if (r < 0)
                                return r;
                }
                break;
        case FIELD_BOOL:
                if (s.kind != SCALAR_BOOL)
                        return decode_type_error(d, n, &s, "true or false");
                if (target)
                        *(bool *) target = s.b;
                break;
        case FIELD_INT32:
                r = decode_integer(d, n, &s, INT32_MIN, INT32_MAX, &i);
                if (r < 0)
                        return r;
                if (target)
                        *(int32_t *) target = (int32_t) i;
                break;
        case FIELD_FLOAT32:
                if (s.kind == SCALAR_INT)
                        s.f = (double) s.i;
                else if (s.kind != SCALAR_FLOAT)
                        return decode_type_error(d, n, &s, "a number");
                if (isfinite(s.f) && (s.f > FLT_MAX || s.f < -FLT_MAX))
                        return decode_error(d, n, "%s is out of range for a float32", s.text);
                if (target)
                        *(float *) target = (float) s.f;
                break;
        case FIELD_DURATION:
                r = decode_duration(d, n, &s, &ms);
                if (r < 0)
                        return r;
                if (target)
                        *(uint64_t *) target = ms;
                break;
        case FIELD_FLUSH_FREQUENCY:
                /* TimeOrMetaDuration: a duration string or integer nanoseconds. */
                if (s.kind == SCALAR_INT) {
                        if (s.i < 0)
                                return decode_error(d, n, "%s must not be negative", s.text);
                        ms = (uint64_t) s.i / 1000000;
                } else {
                        r = decode_duration(d, n, &s, &ms);
                        if (r < 0)
                                return r;
                }
                *(uint64_t *) target = ms;
                break;
        case FIELD_PROXY_MODE: {
                enum proxy_mode m;

                if (s.kind != SCALAR_STRING)
                        return decode_type_error(d, n, &s, "a string");
                m = *s.text ? proxy_mode_from_string(s.text) : PROXY_MODE_IPTABLES;
                if (m < 0)
                        return decode_error(d, n, "unsupported mode \"%s\", must be iptables, ipvs, nftables or empty",
                                            s.text);
                *(enum proxy_mode *) target = m;
                break;
        }
        case FIELD_DETECT_LOCAL_MODE: {
                enum detect_local_mode m;

                if (s.kind != SCALAR_STRING)
                        return decode_type_error(d, n, &s, "a string");
                m = *s.text ? detect_local_mode_from_string(s.text) : DETECT_LOCAL_CLUSTER_CIDR;
                if (m < 0)
                        return decode_error(d, n,
                                            "unsupported mode \"%s\", must be ClusterCIDR, NodeCIDR, BridgeInterface, "
                                            "InterfaceNamePrefix or empty",
                                            s.text);
                *(enum detect_local_mode *) target = m;
                break;
        }
        case FIELD_VERBOSITY:
                r = decode_integer(d, n, &s, 0, INT32_MAX, &i);
                if (r < 0)
                        return r;
                *(int32_t *) target = (int32_t) i;
                break;
        case FIELD_QUANTITY:
                if (s.kind == SCALAR_STRING && !quantity_valid(s.text))
                        return decode_error(d, n, "\"%s\" is not a quantity such as 0, 64Ki or 1Mi", s.text);
                if (s.kind != SCALAR_STRING && s.kind != SCALAR_INT && s.kind != SCALAR_FLOAT)
                        return decode_type_error(d, n, &s, "a quantity");
                break;
        case FIELD_FEATURE_GATES:
                return decode_type_error(d, n, &s, "a mapping of feature gate names to true or false");
        case FIELD_MAP:
        case FIELD_STRINGS:
        case FIELD_VMODULE:
                assert(false);  /* decoded above */
                break;
        }
        if (has)
                *has = true;
        return 0;
}

static int decode_field(struct file_decoder *d, const char *name, yaml_node_t *key, yaml_node_t *value,
                        const void *userdata) {
        const struct field *table = userdata;

        for (const struct field *f = table; f->name; f++)
                if (streq(f->name, name))
                        return decode_value(d, f, value);
        /* Upstream falls back to lenient decoding for v1alpha1 and so
         * carries on past fields it does not know; see the top of the file. */
        config_print("%s: line %lu: unknown field \"%s\", ignoring", d->path, node_line(key), d->field.data);
        return 0;
}

static int decode_map(struct file_decoder *d, yaml_node_t *n, const struct field *table) {
        struct scalar s;
        int r;

        if (n->type == YAML_SCALAR_NODE) {
                r = decode_scalar(d, n, &s);
                if (r < 0)
                        return r;
                if (s.kind != SCALAR_NULL)
                        return decode_type_error(d, n, &s, "a mapping");
                return 0;
        }
        if (n->type != YAML_MAPPING_NODE)
                return decode_error(d, n, "expected a mapping, got a list");
        return decode_pairs(d, n, decode_field, table);
}

/* apiVersion and kind pick the decoder upstream, so they are checked before
 * any other field is looked at. */
static int decode_type_meta(struct file_decoder *d, yaml_node_t *root) {
        static const char *const want[][2] = { { "apiVersion", API_VERSION }, { "kind", KIND } };

        for (size_t w = 0; w < ELEMENTSOF(want); w++) {
                yaml_node_t *v = NULL;

                for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
                        yaml_node_t *k = yaml_document_get_node(d->doc, p->key);

                        if (k->type == YAML_SCALAR_NODE && streq((const char *) k->data.scalar.value, want[w][0]))
                                v = yaml_document_get_node(d->doc, p->value);
                }
                if (!v)
                        return config_error("%s: %s is missing, expected %s", d->path, want[w][0], want[w][1]);
                if (v->type != YAML_SCALAR_NODE || !streq((const char *) v->data.scalar.value, want[w][1]))
                        return config_error("%s: line %lu: unsupported %s \"%s\", expected %s", d->path, node_line(v),
                                            want[w][0],
                                            v->type == YAML_SCALAR_NODE ? (const char *) v->data.scalar.value : "",
                                            want[w][1]);
        }
        return 0;
}

static int read_file(const char *path, char **ret, size_t *ret_len) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        struct buf b = BUF_INIT;

        if (fd < 0)
                return -errno;
        for (;;) {
                ssize_t n;

                buf_reserve(&b, 64 * 1024);
                n = read(fd, b.data + b.len, b.cap - b.len - 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int r = -errno;

                        buf_done(&b);
                        return r;
                }
                if (n == 0)
                        break;
                b.len += (size_t) n;
                b.data[b.len] = '\0';
                if (b.len > MAX_FILE_SIZE) {
                        buf_done(&b);
                        return -EFBIG;
                }
        }
        *ret_len = b.len;
        *ret = buf_steal(&b);
        return 0;
}

static int default_string(char **p, const char *def) {
        return *p ? 0 : str_set(p, def);
}

/* A bind address left empty gets host:port, one without a port gets port. */
static int default_bind_address(char **p, const char *host, unsigned port) {
        if (!*p && asprintf(p, "%s:%u", host, port) < 0) {
                *p = NULL;
                return -ENOMEM;
        }
        return append_port_if_needed(p, port);
}

/* SetDefaults_KubeProxyConfiguration (v1alpha1) and logsapi's recommended
 * logging defaults, over what the file left zero or null. */
static int config_default_v1alpha1(struct kproxy_config *c, struct file_decoder *d) {
        bool v4;
        int r;

        r = default_string(&c->bind_address, "0.0.0.0");
        if (r < 0)
                return r;
        /* Like upstream, an unparseable bindAddress picks the IPv6 defaults;
         * validation then reports the bindAddress. */
        v4 = ip_family(c->bind_address) == AF_INET;
        r = default_bind_address(&c->healthz_bind_address, v4 ? "0.0.0.0" : "[::]", HEALTHZ_PORT);
        if (r < 0)
                return r;
        r = default_bind_address(&c->metrics_bind_address, v4 ? "127.0.0.1" : "[::1]", METRICS_PORT);
        if (r < 0)
                return r;
        if (!d->has_oom_score_adj)
                c->oom_score_adj = DEFAULT_OOM_SCORE_ADJ;
        c->has_oom_score_adj = true;

        /* A zero duration is "unset" to upstream's defaulting, so a file
         * cannot ask for minSyncPeriod 0 (the flag can). */
        if (c->iptables.sync_period_ms == 0)
                c->iptables.sync_period_ms = 30 * MS_SECOND;
        if (c->iptables.min_sync_period_ms == 0)
                c->iptables.min_sync_period_ms = MS_SECOND;
        if (c->nftables.sync_period_ms == 0)
                c->nftables.sync_period_ms = 30 * MS_SECOND;
        if (c->nftables.min_sync_period_ms == 0)
                c->nftables.min_sync_period_ms = MS_SECOND;
        if (d->ipvs_sync_period_ms == 0)
                d->ipvs_sync_period_ms = 30 * MS_SECOND;
        if (!d->has_iptables_masquerade_bit)
                c->iptables.masquerade_bit = DEFAULT_MASQUERADE_BIT;
        if (!d->has_nftables_masquerade_bit)
                c->nftables.masquerade_bit = DEFAULT_MASQUERADE_BIT;
        if (!d->has_localhost_nodeports)
                c->iptables.localhost_nodeports = true;
        c->nftables.localhost_nodeports = false;

        if (!d->has_max_per_core)
                c->conntrack.max_per_core = 32 * 1024;
        if (!d->has_conntrack_min)
                c->conntrack.min = 128 * 1024;
        if (!d->has_tcp_established_timeout)
                c->conntrack.tcp_established_timeout_ms = 24 * MS_HOUR;
        if (!d->has_tcp_close_wait_timeout)
                c->conntrack.tcp_close_wait_timeout_ms = MS_HOUR;
        if (c->config_sync_period_ms == 0)
                c->config_sync_period_ms = 15 * MS_MINUTE;

        r = default_string(&c->content_type, DEFAULT_CONTENT_TYPE);
        if (r < 0)
                return r;
        if (c->qps == 0)
                c->qps = 5;
        if (c->burst == 0)
                c->burst = 10;

        if (c->log_flush_frequency_ms == 0)
                c->log_flush_frequency_ms = 5 * MS_SECOND;
        return default_string(&c->logging_format, "text");
}

/* Checks of fields that kproxy decodes but does not keep. */
static int file_check_dropped(const struct file_decoder *d) {
        char a[32], b[32];

        if (d->port_range && !port_range_valid(d->port_range))
                return config_error("%s: invalid value \"%s\" for portRange: must be a port range such as 300-2000",
                                    d->path, d->port_range);
        if (d->c->mode != PROXY_MODE_IPVS)
                return 0;
        if (d->ipvs_min_sync_period_ms > d->ipvs_sync_period_ms) {
                config_format_duration(d->ipvs_min_sync_period_ms, a, sizeof a);
                config_format_duration(d->ipvs_sync_period_ms, b, sizeof b);
                return config_error("%s: invalid value \"%s\" for ipvs.minSyncPeriod: must not exceed ipvs.syncPeriod (%s)",
                                    d->path, a, b);
        }
        for (size_t i = 0; i < d->n_ipvs_exclude_cidrs; i++)
                if (cidr_family(d->ipvs_exclude_cidrs[i]) == 0)
                        return config_error("%s: invalid value \"%s\" for ipvs.excludeCIDRs[%zu]: must be a CIDR",
                                            d->path, d->ipvs_exclude_cidrs[i], i);
        return 0;
}

/* Takes the file's configuration into c: c keeps its command-line-only
 * fields, and logging flags given on the command line win over the file
 * (upstream's copyLogsFromFlags: vmodule entries from flags come first). */
static int config_adopt(struct kproxy_config *c, struct kproxy_config *file) {
        struct kproxy_config old;
        bool v = flag_changed(c, "v"), format = flag_changed(c, "logging-format"),
             flush = flag_changed(c, "log-flush-frequency"), vmodule = flag_changed(c, "vmodule");
        int r;

        if (vmodule && file->log_vmodule) {
                r = str_append_list(&c->log_vmodule, file->log_vmodule);
                if (r < 0)
                        return r;
        }
        old = *c;
        *c = *file;
        *file = (struct kproxy_config) {};

        c->config_file = TAKE_PTR(old.config_file);
        c->write_config_to = TAKE_PTR(old.write_config_to);
        c->master = TAKE_PTR(old.master);
        c->cleanup = old.cleanup;
        c->init_only = old.init_only;
        c->show_version = old.show_version;
        c->show_help = old.show_help;
        c->cmdline = TAKE_PTR(old.cmdline);
        if (v)
                c->verbosity = old.verbosity;
        if (flush)
                c->log_flush_frequency_ms = old.log_flush_frequency_ms;
        if (format) {
                free(c->logging_format);
                c->logging_format = TAKE_PTR(old.logging_format);
        }
        if (vmodule) {
                free(c->log_vmodule);
                c->log_vmodule = TAKE_PTR(old.log_vmodule);
        }
        config_done(&old);
        return 0;
}

static int config_load_file(struct kproxy_config *c) {
        struct kproxy_config file = {};
        struct file_decoder d = { .path = c->config_file, .c = &file };
        _cleanup_free_ char *data = NULL;
        yaml_parser_t parser;
        yaml_document_t doc;
        yaml_node_t *root;
        size_t len = 0;
        int r;

        r = read_file(c->config_file, &data, &len);
        if (r < 0) {
                config_print("%s: %s", c->config_file, strerror(-r));
                return r;
        }
        if (!yaml_parser_initialize(&parser))
                return -ENOMEM;
        yaml_parser_set_input_string(&parser, (const unsigned char *) data, len);
        /* Only the first document counts, as with upstream's decoder. */
        if (!yaml_parser_load(&parser, &doc)) {
                r = config_error("%s: line %lu: %s%s%s", c->config_file, (unsigned long) parser.problem_mark.line + 1,
                                 parser.problem ? parser.problem : "malformed YAML", parser.context ? ", " : "",
                                 parser.context ? parser.context : "");
                yaml_parser_delete(&parser);
                return r;
        }
        yaml_parser_delete(&parser);
        d.doc = &doc;

        root = yaml_document_get_root_node(&doc);
        if (!root)
                r = config_error("%s: empty file, expected a %s", c->config_file, KIND);
        else if (root->type != YAML_MAPPING_NODE)
                r = config_error("%s: line %lu: expected a %s mapping", c->config_file, node_line(root), KIND);
        else
                r = decode_type_meta(&d, root);
        if (r >= 0)
                r = decode_map(&d, root, top_fields);
        yaml_document_delete(&doc);
        d.doc = NULL;
        if (r >= 0)
                r = config_default_v1alpha1(&file, &d);
        if (r >= 0)
                r = file_check_dropped(&d);
        if (r >= 0)
                r = config_adopt(c, &file);
        file_decoder_done(&d);
        config_done(&file);
        return r;
}

/* addressFromDeprecatedFlags: port 0 turns the server off, any other port
 * completes an address that has none. */
static int address_from_port_flag(char **addr, int32_t port) {
        if (port == 0)
                return str_set(addr, NULL);
        return append_port_if_needed(addr, (unsigned) port);
}

/* Without --config: what upstream's Complete() and processV1Alpha1Flags()
 * do with the flags that are not bound to the configuration directly. */
static int config_fold_flags(struct kproxy_config *c) {
        const struct config_cmdline *cl = c->cmdline;
        bool ipvs = c->mode == PROXY_MODE_IPVS;
        int r;

        /* Upstream has one internal sync period for whichever backend runs,
         * so the iptables flags set the nftables periods too. */
        if (!ipvs && flag_changed(c, "iptables-sync-period"))
                c->iptables.sync_period_ms = c->nftables.sync_period_ms = cl->iptables_sync_period_ms;
        if (!ipvs && flag_changed(c, "iptables-min-sync-period"))
                c->iptables.min_sync_period_ms = c->nftables.min_sync_period_ms = cl->iptables_min_sync_period_ms;
        if (ipvs && flag_changed(c, "ipvs-sync-period"))
                c->iptables.sync_period_ms = c->nftables.sync_period_ms = cl->ipvs_sync_period_ms;
        if (ipvs && flag_changed(c, "ipvs-min-sync-period"))
                c->iptables.min_sync_period_ms = c->nftables.min_sync_period_ms = cl->ipvs_min_sync_period_ms;

        if (c->write_config_to)
                return 0;
        r = address_from_port_flag(&c->healthz_bind_address, cl->healthz_port);
        if (r < 0)
                return r;
        return address_from_port_flag(&c->metrics_bind_address, cl->metrics_port);
}

/* platformApplyDefaults (Linux); the enums already turned "" into iptables
 * and ClusterCIDR. */
static int config_platform_defaults(struct kproxy_config *c) {
        if (c->mode == PROXY_MODE_NFTABLES && c->n_nodeport_addresses == 0)
                return strv_push(&c->nodeport_addresses, &c->n_nodeport_addresses, "primary", strlen("primary"));
        return 0;
}

/* --hostname-override wins over the file; either is trimmed and lower-cased
 * as upstream's processHostnameOverrideFlag() and GetHostname() do. */
static int config_resolve_hostname(struct kproxy_config *c) {
        const char *src = c->cmdline->hostname_override ? c->cmdline->hostname_override : c->hostname_override;
        bool from_flag = c->cmdline->hostname_override;
        size_t len = 0;
        char *n;

        if (!src)
                return 0;
        len = strlen(src);
        trim(&src, &len);
        if (len == 0) {
                if (from_flag)
                        return config_error("invalid value \"%s\" for flag --hostname-override: must not be blank",
                                            c->cmdline->hostname_override);
                return config_error("%s: invalid value \"%s\" for hostnameOverride: must not be blank", c->config_file,
                                    c->hostname_override);
        }
        n = strndup(src, len);
        if (!n)
                return -ENOMEM;
        for (char *p = n; *p; p++)
                *p = (char) tolower((unsigned char) *p);
        free(c->hostname_override);
        c->hostname_override = n;
        return 0;
}

/* Reports one invalid value, naming the file's field when the settings came
 * from --config and the flag otherwise. Returns -EINVAL. */
static int invalid(const struct kproxy_config *c, const char *field, const char *flag, const char *value,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int invalid(const struct kproxy_config *c, const char *field, const char *flag, const char *value,
                   const char *fmt, ...) {
        struct buf why = BUF_INIT;
        va_list ap;

        va_start(ap, fmt);
        buf_vprintf(&why, fmt, ap);
        va_end(ap);
        if (c->config_file || !flag)
                config_error("%s: invalid value \"%s\" for %s: %s", c->config_file ? c->config_file : "configuration",
                             value ? value : "", field, why.data);
        else
                config_error("invalid value \"%s\" for flag --%s: %s", value ? value : "", flag, why.data);
        buf_done(&why);
        return -EINVAL;
}

/* upstream's validateDualStackCIDRStrings() over clusterCIDR split at commas. */
static int validate_cluster_cidrs(const struct kproxy_config *c) {
        const char *why = NULL;
        int families[2] = {};
        size_t n = 0;

        for (const char *p = c->cluster_cidr;;) {
                size_t len = strcspn(p, ",");
                char cidr[INET6_ADDRSTRLEN + 8] = "";

                if (n == ELEMENTSOF(families)) {        /* a third one */
                        why = "must be one CIDR or an IPv4,IPv6 pair";
                        break;
                }
                if (len < sizeof cidr)
                        memcpy(cidr, p, len);
                families[n] = len < sizeof cidr ? cidr_family(cidr) : 0;
                if (families[n++] == 0) {
                        why = "must be a CIDR such as 10.244.0.0/16, or an IPv4,IPv6 pair of them";
                        break;
                }
                if (!p[len])
                        break;
                p += len + 1;
        }
        if (!why && n == 2 && families[0] == families[1])
                why = "must be one CIDR or an IPv4,IPv6 pair";
        if (why)
                return invalid(c, "clusterCIDR", "cluster-cidr", c->cluster_cidr, "%s", why);
        return 0;
}

static bool minor_version_valid(const char *s) {
        const char *dot = strchr(s, '.');
        char major[16];
        uint64_t v;

        if (!dot || (size_t) (dot - s) >= sizeof major)
                return false;
        memcpy(major, s, (size_t) (dot - s));
        major[dot - s] = '\0';
        return parse_decimal(major, UINT32_MAX, &v) == 0 && parse_decimal(dot + 1, UINT32_MAX, &v) == 0;
}

/* Upstream's validation.Validate() over the resolved configuration. */
static int config_validate(const struct kproxy_config *c) {
        const struct config_sync *s = config_mode_sync(c);
        bool nft = c->mode == PROXY_MODE_NFTABLES;
        char a[32], b[32];
        const char *why;

        snprintf(a, sizeof a, "%" PRIi32, c->iptables.masquerade_bit);
        if (c->iptables.masquerade_bit < 0 || c->iptables.masquerade_bit > 31)
                return invalid(c, "iptables.masqueradeBit", "iptables-masquerade-bit", a, "must be in 0..31");
        snprintf(a, sizeof a, "%" PRIi32, c->nftables.masquerade_bit);
        if (nft && (c->nftables.masquerade_bit < 0 || c->nftables.masquerade_bit > 31))
                return invalid(c, "nftables.masqueradeBit", NULL, a, "must be in 0..31");
        snprintf(a, sizeof a, "%" PRIi32, c->conntrack.max_per_core);
        if (c->conntrack.max_per_core < 0)
                return invalid(c, "conntrack.maxPerCore", "conntrack-max-per-core", a, "must not be negative");
        snprintf(a, sizeof a, "%" PRIi32, c->conntrack.min);
        if (c->conntrack.min < 0)
                return invalid(c, "conntrack.min", "conntrack-min", a, "must not be negative");
        snprintf(a, sizeof a, "%" PRIi32, c->oom_score_adj);
        if (c->has_oom_score_adj && (c->oom_score_adj < -1000 || c->oom_score_adj > 1000))
                return invalid(c, "oomScoreAdj", "oom-score-adj", a, "must be in -1000..1000");
        snprintf(a, sizeof a, "%" PRIi32, c->burst);
        if (c->burst < 0)
                return invalid(c, "clientConnection.burst", "kube-api-burst", a, "must not be negative");
        if (c->config_sync_period_ms == 0)
                return invalid(c, "configSyncPeriod", "config-sync-period", "0s", "must be greater than 0");

        config_format_duration(s->sync_period_ms, a, sizeof a);
        config_format_duration(s->min_sync_period_ms, b, sizeof b);
        if (s->sync_period_ms == 0)
                return invalid(c, nft ? "nftables.syncPeriod" : "iptables.syncPeriod",
                               c->mode == PROXY_MODE_IPVS ? "ipvs-sync-period" : "iptables-sync-period", a,
                               "must be greater than 0");
        if (s->min_sync_period_ms > s->sync_period_ms)
                return invalid(c, nft ? "nftables.minSyncPeriod" : "iptables.minSyncPeriod",
                               c->mode == PROXY_MODE_IPVS ? "ipvs-min-sync-period" : "iptables-min-sync-period", b,
                               "must not exceed the sync period (%s)", a);

        if (!c->bind_address || ip_family(c->bind_address) == 0)
                return invalid(c, "bindAddress", "bind-address", c->bind_address, "must be an IP address");
        if (c->healthz_bind_address && (why = host_port_problem(c->healthz_bind_address)))
                return invalid(c, "healthzBindAddress", "healthz-bind-address", c->healthz_bind_address, "%s", why);
        if ((why = host_port_problem(c->metrics_bind_address ? c->metrics_bind_address : "")))
                return invalid(c, "metricsBindAddress", "metrics-bind-address", c->metrics_bind_address, "%s", why);

        for (size_t i = 0; i < c->n_nodeport_addresses; i++) {
                const char *v = c->nodeport_addresses[i];

                if (streq(v, "primary")) {
                        if (c->n_nodeport_addresses != 1)
                                return invalid(c, "nodePortAddresses", "nodeport-addresses", v,
                                               "\"primary\" cannot be combined with CIDRs");
                } else if (cidr_family(v) == 0)
                        return invalid(c, "nodePortAddresses", "nodeport-addresses", v,
                                       "must be a CIDR, or just \"primary\"");
        }
        if (c->show_hidden_metrics_for_version && !minor_version_valid(c->show_hidden_metrics_for_version))
                return invalid(c, "showHiddenMetricsForVersion", "show-hidden-metrics-for-version",
                               c->show_hidden_metrics_for_version, "must be a version such as 1.30");

        switch (c->detect_local_mode) {
        case DETECT_LOCAL_BRIDGE_INTERFACE:
                if (!c->bridge_interface)
                        return invalid(c, "detectLocal.bridgeInterface", "pod-bridge-interface", "",
                                       "must be set in BridgeInterface detect-local mode");
                break;
        case DETECT_LOCAL_INTERFACE_NAME_PREFIX:
                if (!c->interface_name_prefix)
                        return invalid(c, "detectLocal.interfaceNamePrefix", "pod-interface-name-prefix", "",
                                       "must be set in InterfaceNamePrefix detect-local mode");
                break;
        case DETECT_LOCAL_CLUSTER_CIDR:
                if (c->cluster_cidr)
                        return validate_cluster_cidrs(c);
                break;
        default:
                break;
        }

        if (!logging_format_valid(c->logging_format))
                return invalid(c, "logging.format", "logging-format", c->logging_format, "must be text or json");
        if (c->log_vmodule && !streq(c->logging_format, "text"))
                return invalid(c, "logging.vmodule", "vmodule", c->log_vmodule, "only works with the text format");
        return 0;
}

int config_finish(struct kproxy_config *c) {
        int r;

        assert(c);
        assert(c->cmdline);

        r = c->config_file ? config_load_file(c) : config_fold_flags(c);
        if (r < 0)
                return r;
        r = config_platform_defaults(c);
        if (r < 0)
                return r;
        r = config_resolve_hostname(c);
        if (r < 0)
                return r;
        return config_validate(c);
}

/* ---- writing the configuration file ----------------------------------------------- */

/* Plain if a YAML reader gives back the same string, else double-quoted. */
static void yaml_put_string(struct buf *b, const char *s) {
        struct scalar sc;
        bool plain;

        s = s ? s : "";
        yaml_resolve(s, &sc);
        plain = sc.kind == SCALAR_STRING && !strchr("-?:,[]{}#&*!|>'\"%@` ", s[0]) && !strstr(s, ": ") &&
                !strstr(s, " #") && s[strlen(s) - 1] != ':' && s[strlen(s) - 1] != ' ';
        for (const char *p = s; plain && *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        plain = false;
        if (plain) {
                buf_puts(b, s);
                return;
        }
        buf_putc(b, '"');
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p == '"' || *p == '\\')
                        buf_printf(b, "\\%c", *p);
                else if (*p == '\n')
                        buf_puts(b, "\\n");
                else if (*p == '\t')
                        buf_puts(b, "\\t");
                else if (*p < 0x20 || *p == 0x7f)
                        buf_printf(b, "\\x%02x", *p);
                else
                        buf_putc(b, (char) *p);
        }
        buf_putc(b, '"');
}

static void yaml_key(struct buf *b, int indent, const char *key) {
        buf_printf(b, "%*s%s:", indent, "", key);
}

static void yaml_str(struct buf *b, int indent, const char *key, const char *value) {
        yaml_key(b, indent, key);
        buf_putc(b, ' ');
        yaml_put_string(b, value);
        buf_putc(b, '\n');
}

static void yaml_bool(struct buf *b, int indent, const char *key, bool value) {
        yaml_key(b, indent, key);
        buf_puts(b, value ? " true\n" : " false\n");
}

static void yaml_int(struct buf *b, int indent, const char *key, int64_t value) {
        yaml_key(b, indent, key);
        buf_printf(b, " %" PRIi64 "\n", value);
}

static void yaml_duration(struct buf *b, int indent, const char *key, uint64_t ms) {
        char d[32];

        config_format_duration(ms, d, sizeof d);
        yaml_str(b, indent, key, d);
}

/* The shortest text that reads back as the same float32, as Go prints it. */
static void yaml_float32(struct buf *b, int indent, const char *key, float value) {
        char text[64];

        for (int prec = 1; prec <= 9; prec++) {
                snprintf(text, sizeof text, "%.*g", prec, (double) value);
                if (strtof(text, NULL) == value)
                        break;
        }
        yaml_key(b, indent, key);
        buf_printf(b, " %s\n", text);
}

static void yaml_strv(struct buf *b, int indent, const char *key, char *const *v, size_t n) {
        yaml_key(b, indent, key);
        if (n == 0) {
                buf_puts(b, " null\n");
                return;
        }
        buf_putc(b, '\n');
        for (size_t i = 0; i < n; i++) {
                buf_printf(b, "%*s- ", indent, "");
                yaml_put_string(b, v[i]);
                buf_putc(b, '\n');
        }
}

static void yaml_vmodule(struct buf *b, int indent, const char *vmodule) {
        yaml_key(b, indent, "vmodule");
        buf_putc(b, '\n');
        for (const char *p = vmodule; *p;) {
                size_t len = strcspn(p, ","), plen = strcspn(p, "=");
                _cleanup_free_ char *pattern = strndup(p, plen);

                if (!pattern)
                        abort();        /* as buf does: a few bytes short means no way on */
                buf_printf(b, "%*s- ", indent, "");
                yaml_str(b, 0, "filePattern", pattern);
                buf_printf(b, "%*s  verbosity: %.*s\n", indent, "", (int) (len - plen - 1), p + plen + 1);
                p += len;
                if (*p)
                        p++;
        }
}

static void sync_section(struct buf *b, const char *key, const struct config_sync *s, bool iptables) {
        yaml_key(b, 0, key);
        buf_putc(b, '\n');
        if (iptables)
                yaml_bool(b, 2, "localhostNodePorts", s->localhost_nodeports);
        yaml_bool(b, 2, "masqueradeAll", s->masquerade_all);
        yaml_int(b, 2, "masqueradeBit", s->masquerade_bit);
        yaml_duration(b, 2, "minSyncPeriod", s->min_sync_period_ms);
        yaml_duration(b, 2, "syncPeriod", s->sync_period_ms);
}

/* Every field, in the sorted order upstream's encoder writes them. Sections
 * kproxy does not keep (ipvs, winkernel, the log buffer options) get their
 * defaults. */
static void config_format_yaml(const struct kproxy_config *c, struct buf *b) {
        yaml_str(b, 0, "apiVersion", API_VERSION);
        yaml_str(b, 0, "bindAddress", c->bind_address);
        yaml_bool(b, 0, "bindAddressHardFail", c->bind_address_hard_fail);
        buf_puts(b, "clientConnection:\n");
        yaml_str(b, 2, "acceptContentTypes", c->accept_content_types);
        yaml_int(b, 2, "burst", c->burst);
        yaml_str(b, 2, "contentType", c->content_type);
        yaml_str(b, 2, "kubeconfig", c->kubeconfig);
        yaml_float32(b, 2, "qps", c->qps);
        yaml_str(b, 0, "clusterCIDR", c->cluster_cidr);
        yaml_duration(b, 0, "configSyncPeriod", c->config_sync_period_ms);
        buf_puts(b, "conntrack:\n");
        yaml_int(b, 2, "maxPerCore", c->conntrack.max_per_core);
        yaml_int(b, 2, "min", c->conntrack.min);
        yaml_bool(b, 2, "tcpBeLiberal", c->conntrack.tcp_be_liberal);
        yaml_duration(b, 2, "tcpCloseWaitTimeout", c->conntrack.tcp_close_wait_timeout_ms);
        yaml_duration(b, 2, "tcpEstablishedTimeout", c->conntrack.tcp_established_timeout_ms);
        yaml_duration(b, 2, "udpStreamTimeout", c->conntrack.udp_stream_timeout_ms);
        yaml_duration(b, 2, "udpTimeout", c->conntrack.udp_timeout_ms);
        buf_puts(b, "detectLocal:\n");
        yaml_str(b, 2, "bridgeInterface", c->bridge_interface);
        yaml_str(b, 2, "interfaceNamePrefix", c->interface_name_prefix);
        yaml_str(b, 0, "detectLocalMode", detect_local_mode_to_string(c->detect_local_mode));
        yaml_bool(b, 0, "enableProfiling", c->enable_profiling);
        if (c->n_feature_gates > 0) {
                buf_puts(b, "featureGates:\n");
                for (size_t i = 0; i < c->n_feature_gates; i++) {
                        buf_puts(b, "  ");
                        yaml_put_string(b, c->feature_gates[i].name);
                        buf_puts(b, c->feature_gates[i].enabled ? ": true\n" : ": false\n");
                }
        }
        yaml_str(b, 0, "healthzBindAddress", c->healthz_bind_address);
        yaml_str(b, 0, "hostnameOverride", c->hostname_override);
        sync_section(b, "iptables", &c->iptables, true);
        buf_puts(b, "ipvs:\n"
                    "  excludeCIDRs: null\n"
                    "  minSyncPeriod: 0s\n"
                    "  scheduler: \"\"\n"
                    "  strictARP: false\n"
                    "  syncPeriod: 30s\n"
                    "  tcpFinTimeout: 0s\n"
                    "  tcpTimeout: 0s\n"
                    "  udpTimeout: 0s\n");
        yaml_str(b, 0, "kind", KIND);
        buf_puts(b, "logging:\n");
        yaml_duration(b, 2, "flushFrequency", c->log_flush_frequency_ms);
        yaml_str(b, 2, "format", c->logging_format);
        buf_puts(b, "  options:\n"
                    "    json:\n"
                    "      infoBufferSize: \"0\"\n"
                    "    text:\n"
                    "      infoBufferSize: \"0\"\n");
        yaml_int(b, 2, "verbosity", c->verbosity);
        if (c->log_vmodule)
                yaml_vmodule(b, 2, c->log_vmodule);
        yaml_str(b, 0, "metricsBindAddress", c->metrics_bind_address);
        yaml_str(b, 0, "mode", proxy_mode_to_string(c->mode));
        sync_section(b, "nftables", &c->nftables, false);
        yaml_strv(b, 0, "nodePortAddresses", c->nodeport_addresses, c->n_nodeport_addresses);
        yaml_int(b, 0, "oomScoreAdj", c->has_oom_score_adj ? c->oom_score_adj : DEFAULT_OOM_SCORE_ADJ);
        yaml_str(b, 0, "portRange", "");
        yaml_str(b, 0, "showHiddenMetricsForVersion", c->show_hidden_metrics_for_version);
        buf_puts(b, "winkernel:\n"
                    "  enableDSR: false\n"
                    "  forwardHealthCheckVip: false\n"
                    "  networkName: \"\"\n"
                    "  rootHnsEndpointName: \"\"\n"
                    "  sourceVip: \"\"\n");
}

int config_write(const struct kproxy_config *c, const char *path) {
        _cleanup_close_ int fd = -EBADF;
        struct buf b = BUF_INIT;
        int r = 0;

        assert(c);
        assert(path);

        config_format_yaml(c, &b);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
        if (fd < 0)
                r = -errno;
        for (size_t done = 0; r == 0 && done < b.len;) {
                ssize_t n = write(fd, b.data + done, b.len - done);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        r = -errno;
                else
                        done += (size_t) n;
        }
        if (r == 0) {
                /* close() reports what delayed writes hit (NFS, quota). */
                int tmp = fd;

                fd = -EBADF;
                if (close(tmp) < 0)
                        r = -errno;
        }
        buf_done(&b);
        return r;
}
