/* SPDX-License-Identifier: Apache-2.0 */
#include "apply/conntrack-limits.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apply/sysctl.h"
#include "config/config.h"
#include "util/log.h"

#define NETFILTER "/proc/sys/net/netfilter/"
#define HASHSIZE "/sys/module/nf_conntrack/parameters/hashsize"

/* "0-3,8,10-11": the number of CPUs listed, or 0 if unreadable. */
static unsigned count_cpu_list(const char *s) {
        unsigned n = 0;
        while (*s && *s != '\n') {
                char *end;
                unsigned long a = strtoul(s, &end, 10), b = a;
                if (end == s)
                        return 0;
                s = end;
                if (*s == '-') {
                        b = strtoul(s + 1, &end, 10);
                        if (end == s + 1 || b < a)
                                return 0;
                        s = end;
                }
                n += (unsigned) (b - a + 1);
                if (*s == ',')
                        s++;
        }
        return n;
}

unsigned conntrack_limits_cpus(const char *root) {
        char path[4096], text[1024];
        snprintf(path, sizeof path, "%s/sys/devices/system/cpu/online", root ? root : "");
        FILE *f = fopen(path, "re");
        unsigned n = 0;
        if (f) {
                if (fgets(text, sizeof text, f))
                        n = count_cpu_list(text);
                fclose(f);
        }
        if (n == 0 && !root) {
                long c = sysconf(_SC_NPROCESSORS_ONLN);
                n = c > 0 ? (unsigned) c : 0;
        }
        return n > 0 ? n : 1;
}

void conntrack_limits_from_config(const struct config_conntrack *c, unsigned cpus, struct conntrack_limits *ret) {
        *ret = (struct conntrack_limits) {
                .tcp_established_s = c->tcp_established_timeout_ms / 1000,
                .tcp_close_wait_s = c->tcp_close_wait_timeout_ms / 1000,
                .tcp_be_liberal = c->tcp_be_liberal,
                .udp_s = c->udp_timeout_ms / 1000,
                .udp_stream_s = c->udp_stream_timeout_ms / 1000,
        };
        if (c->max_per_core > 0) {
                uint64_t scaled = (uint64_t) c->max_per_core * cpus;
                uint64_t floor = c->min > 0 ? (uint64_t) c->min : 0;
                ret->max = scaled > floor ? scaled : floor;
        }
}

/* A failure to write setting: a warning naming it; returns r unless the
 * kernel (or a read-only mount) does not let kproxy change it here. */
static int failed(const char *setting, uint64_t value, int r) {
        if (sysctl_not_permitted(r)) {
                log_warning("Cannot set %s to %llu here (%s); leaving it as it is, which may limit the node "
                            "(a read-only /sys or /proc/sys in a container?)",
                            setting, (unsigned long long) value, strerror(-r));
                return 0;
        }
        log_warning("Failed to set %s to %llu: %s", setting, (unsigned long long) value, strerror(-r));
        return r;
}

/* Upstream's setIntSysCtl: written when it differs from what is asked. */
static int ensure(const char *root, const char *name, uint64_t value) {
        char path[256], entry[256];
        uint64_t cur;
        snprintf(path, sizeof path, NETFILTER "%s", name);
        snprintf(entry, sizeof entry, "net/netfilter/%s", name);
        if (sysctl_read_u64(root, path, &cur) == 0 && cur == value)
                return 0;
        int r = sysctl_write_u64(root, path, value);
        if (r < 0)
                return failed(entry, value, r);
        /* Upstream's lines, logged once the write succeeded, never before
         * (here and below): the log never claims a setting the node lacks. */
        log_info_kv("Set sysctl", KV_STR("entry", entry), KV_INT("value", value));
        return 0;
}

/* nf_conntrack_max, raised only; then the hash size to a quarter of what
 * was asked for, if smaller (upstream's ratio). The hash size is a module
 * parameter: machine-wide, and only the initial network namespace may
 * write it, so it is read first and left alone when large enough, as
 * upstream does. */
static int ensure_max(const char *root, uint64_t max) {
        uint64_t cur, hash;
        int r = 0, q;

        if (sysctl_read_u64(root, NETFILTER "nf_conntrack_max", &cur) == 0 && cur >= max) {
                log_v(2, "nf_conntrack_max is %llu, at least the %llu asked for: leaving it",
                      (unsigned long long) cur, (unsigned long long) max);
        } else {
                q = sysctl_write_u64(root, NETFILTER "nf_conntrack_max", max);
                if (q < 0)
                        r = failed("net/netfilter/nf_conntrack_max", max, q);
                else
                        log_info_kv("Setting nf_conntrack_max", KV_INT("nfConntrackMax", max));
        }
        q = sysctl_read_u64(root, HASHSIZE, &hash);
        if (q < 0) {
                log_warning_errno(q, "Failed to read the conntrack hash size (%s), leaving it", HASHSIZE);
                return r;
        }
        if (hash >= max / 4)
                return r;
        q = sysctl_write_u64(root, HASHSIZE, max / 4);
        if (q == 0)
                log_info_kv("Setting conntrack hashsize", KV_INT("conntrackHashsize", max / 4));
        else if ((q = failed("the conntrack hash size (" HASHSIZE ")", max / 4, q)) < 0 && r == 0)
                r = q;
        return r;
}

int conntrack_limits_apply(const char *root, const struct conntrack_limits *l) {
        int r = 0;
#define KEEP_FIRST(call)                \
        do {                            \
                int q_ = (call);        \
                if (q_ < 0 && r == 0)   \
                        r = q_;         \
        } while (0)
        if (l->max > 0)
                KEEP_FIRST(ensure_max(root, l->max));
        if (l->tcp_established_s > 0)
                KEEP_FIRST(ensure(root, "nf_conntrack_tcp_timeout_established", l->tcp_established_s));
        if (l->tcp_close_wait_s > 0)
                KEEP_FIRST(ensure(root, "nf_conntrack_tcp_timeout_close_wait", l->tcp_close_wait_s));
        if (l->tcp_be_liberal)
                KEEP_FIRST(ensure(root, "nf_conntrack_tcp_be_liberal", 1));
        if (l->udp_s > 0)
                KEEP_FIRST(ensure(root, "nf_conntrack_udp_timeout", l->udp_s));
        if (l->udp_stream_s > 0)
                KEEP_FIRST(ensure(root, "nf_conntrack_udp_timeout_stream", l->udp_stream_s));
#undef KEEP_FIRST
        return r;
}
