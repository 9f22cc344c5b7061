/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube-proxy's flags as one table, sorted by name: each flag's field, how
 * its value is read (the setters below, one per pflag value type kube-proxy
 * uses) and its --help line. config-args.c finds flags here by name; the
 * table itself stays private.
 */
#include "config/config-flags.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config-cmdline.h"
#include "config/config-defaults.h"
#include "config/config-duration.h"
#include "config/config-enums.h"
#include "config/config-features.h"
#include "config/config-message.h"
#include "config/config-types.h"
#include "config/config-value.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/cleanup.h"

/* Applies value to the flag's field. first is true the first time the flag
 * is given (list flags then drop their default instead of appending). On a
 * bad value, says why in *why and returns -EINVAL. */
typedef int (*flag_setter)(struct kproxy_config *c, const struct config_flag *f, const char *value, bool first,
                           struct buf *why);

struct config_flag {
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
        void (*help_list)(int indent);  /* prints lines that follow the help, indented */
};

static void *flag_target(struct kproxy_config *c, const struct config_flag *f) {
        return (char *) (f->in_cmdline ? (void *) c->cmdline : (void *) c) + f->offset;
}

static int flag_set_bool(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                         struct buf *why) {
        bool b;

        (void) first;
        if (config_value_parse_bool(v, &b) < 0) {
                buf_puts(why, "must be true or false");
                return -EINVAL;
        }
        *(bool *) flag_target(c, f) = b;
        return 0;
}

static int flag_set_string(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                           struct buf *why) {
        (void) first, (void) why;
        return config_value_str_set(flag_target(c, f), v);
}

static int flag_set_int32(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                          struct buf *why) {
        int64_t n;

        (void) first;
        if (config_value_parse_int(v, &n) < 0 || n < f->min || n > f->max) {
                buf_printf(why, "must be an integer in %" PRIi32 "..%" PRIi32, f->min, f->max);
                return -EINVAL;
        }
        *(int32_t *) flag_target(c, f) = (int32_t) n;
        return 0;
}

static int flag_set_float32(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                            struct buf *why) {
        (void) first;
        if (config_value_parse_float32(v, flag_target(c, f)) < 0) {
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

static int flag_set_duration(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                             struct buf *why) {
        int r;

        (void) first;
        r = config_parse_duration(v, flag_target(c, f));
        return r < 0 ? duration_why(r, why) : 0;
}

/* For the IPVS flags: kproxy has no IPVS mode, so only the syntax matters. */
static int flag_check_duration(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                               struct buf *why) {
        uint64_t ms;
        int r;

        (void) c, (void) f, (void) first;
        r = config_parse_duration(v, &ms);
        return r < 0 ? duration_why(r, why) : 0;
}

/* utilflag.IPVar: an empty value leaves the field alone. */
static int flag_set_ip(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                       struct buf *why) {
        (void) first;
        if (!*v)
                return 0;
        if (config_value_ip_family(v) == 0) {
                buf_puts(why, "must be an IP address");
                return -EINVAL;
        }
        return config_value_str_set(flag_target(c, f), v);
}

/* utilflag.IPPortVar: an IP, or IP:port with the port in 0..65535; an empty
 * value leaves the field alone. */
static int flag_set_ip_port(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                            struct buf *why) {
        char host[INET6_ADDRSTRLEN + 8];
        const char *port;
        uint64_t p;

        (void) first;
        if (!*v)
                return 0;
        if (config_value_ip_family(v) == 0 &&
            (config_value_split_host_port(v, host, sizeof host, &port) < 0 || config_value_ip_family(host) == 0 ||
             config_value_parse_decimal(port, 65535, &p) < 0)) {
                buf_puts(why, "must be IP or IP:port");
                return -EINVAL;
        }
        return config_value_str_set(flag_target(c, f), v);
}

/* pflag's StringSlice: comma-separated; the first use replaces the default,
 * later ones append. */
static int flag_set_nodeport_addresses(struct kproxy_config *c, const struct config_flag *f, const char *v,
                                       bool first, struct buf *why) {
        (void) f, (void) why;
        if (first) {
                config_value_strv_free(c->nodeport_addresses, c->n_nodeport_addresses);
                c->nodeport_addresses = NULL;
                c->n_nodeport_addresses = 0;
        }
        if (!*v)
                return 0;
        for (const char *p = v;;) {
                size_t len = strcspn(p, ",");
                int r = config_value_strv_push(&c->nodeport_addresses, &c->n_nodeport_addresses, p, len);

                if (r < 0)
                        return r;
                if (!p[len])
                        return 0;
                p += len + 1;
        }
}

/* kproxy's allow-lists: comma-separated CIDRs, or just "none"; the first
 * use replaces, later ones append, as pflag's StringSlice. */
static int flag_set_cidr_list(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                              struct buf *why) {
        struct config_cidr_list *l = flag_target(c, f);

        if (first) {
                config_value_strv_free(l->v, l->n);
                *l = (struct config_cidr_list) {0};
        }
        if (!*v)
                return 0;
        for (const char *p = v;;) {
                size_t len = strcspn(p, ",");
                _cleanup_free_ char *item = xstrndup(p, len);
                bool none = streq(item, "none");
                if ((none && l->n > 0) || (!none && l->n == 1 && streq(l->v[0], "none"))) {
                        buf_puts(why, "\"none\" cannot be combined with CIDRs");
                        return -EINVAL;
                }
                if (!none && config_value_cidr_family(item) == 0) {
                        buf_printf(why, "\"%s\" is not a CIDR (an address alone is ADDR/32 or ADDR/128; \"none\" "
                                        "admits nothing)", item);
                        return -EINVAL;
                }
                int r = config_value_strv_push(&l->v, &l->n, p, len);
                if (r < 0)
                        return r;
                if (!p[len])
                        return 0;
                p += len + 1;
        }
}

static int flag_check_cidrs(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                            struct buf *why) {
        (void) c, (void) f, (void) first;
        if (!*v)
                return 0;
        for (const char *p = v;;) {
                size_t len = strcspn(p, ",");
                char cidr[INET6_ADDRSTRLEN + 8] = "";

                if (len < sizeof cidr)
                        memcpy(cidr, p, len);
                if (len >= sizeof cidr || config_value_cidr_family(cidr) == 0) {
                        buf_printf(why, "\"%.*s\" is not a CIDR", (int) len, p);
                        return -EINVAL;
                }
                if (!p[len])
                        return 0;
                p += len + 1;
        }
}

/* For boolean flags kproxy accepts but has no use for. */
static int flag_check_bool(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                           struct buf *why) {
        bool b;

        (void) c, (void) f, (void) first;
        if (config_value_parse_bool(v, &b) < 0) {
                buf_puts(why, "must be true or false");
                return -EINVAL;
        }
        return 0;
}

static int flag_accept(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                       struct buf *why) {
        (void) c, (void) f, (void) v, (void) first, (void) why;
        return 0;
}

static int flag_set_quantity(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                             struct buf *why) {
        (void) first;
        if (config_value_parse_quantity(v, flag_target(c, f)) < 0) {
                buf_puts(why, "must be a quantity such as 0, 64Ki or 1Mi");
                return -EINVAL;
        }
        return 0;
}

/* cliflag.MapStringBool: "name=bool,name=bool", blanks around items ignored;
 * repeated flags merge. */
static int flag_set_feature_gates(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                                  struct buf *why) {
        (void) f, (void) first;
        for (const char *p = v;;) {
                size_t len = strcspn(p, ","), klen, vlen;
                const char *item = p, *eq, *val;
                _cleanup_free_ char *name = NULL, *value = NULL;
                bool enabled;
                int r;

                config_value_trim(&item, &len);
                eq = memchr(item, '=', len);
                if (len > 0) {
                        if (!eq) {
                                buf_printf(why, "\"%.*s\" is not name=true|false", (int) len, item);
                                return -EINVAL;
                        }
                        klen = (size_t) (eq - item);
                        val = eq + 1;
                        vlen = len - klen - 1;
                        config_value_trim(&item, &klen);
                        config_value_trim(&val, &vlen);
                        name = strndup(item, klen);
                        value = strndup(val, vlen);
                        if (!name || !value)
                                return -ENOMEM;
                        if (!*name || config_value_parse_bool(value, &enabled) < 0) {
                                buf_printf(why, "\"%.*s\" is not name=true|false", (int) len, item);
                                return -EINVAL;
                        }
                        r = config_feature_gate_set(c, name, enabled);
                        if (r < 0)
                                return r;
                }
                p += strcspn(p, ",");
                if (!*p)
                        return 0;
                p++;
        }
}

static int flag_set_proxy_mode(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                               struct buf *why) {
        enum proxy_mode m = *v ? proxy_mode_from_string(v) : PROXY_MODE_IPTABLES;

        (void) f, (void) first;
        if (m < 0) {
                buf_puts(why, PROXY_MODE_CHOICE);
                return -EINVAL;
        }
        c->mode = m;
        return 0;
}

static int flag_set_detect_local_mode(struct kproxy_config *c, const struct config_flag *f, const char *v,
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
static int flag_set_verbosity(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                              struct buf *why) {
        uint64_t n;

        (void) f, (void) first;
        if (config_value_parse_decimal(v, INT32_MAX, &n) < 0) {
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
                if (config_value_parse_decimal(level, INT32_MAX, &n) < 0)
                        return false;
                if (!p[len])
                        return true;
                p += len + 1;
        }
}

static int flag_set_vmodule(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
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
        return config_value_str_append(&c->log_vmodule, v);
}

static int flag_set_logging_format(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                                   struct buf *why) {
        (void) f, (void) first;
        if (!config_value_logging_format_valid(v)) {
                buf_puts(why, "must be text or json");
                return -EINVAL;
        }
        return config_value_str_set(&c->logging_format, v);
}

/* Upstream binds it to the internal Linux.MasqueradeAll, which both the
 * iptables and the nftables backend read. */
static int flag_set_masquerade_all(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                                   struct buf *why) {
        bool b;

        (void) f, (void) first;
        if (config_value_parse_bool(v, &b) < 0) {
                buf_puts(why, "must be true or false");
                return -EINVAL;
        }
        c->iptables.masquerade_all = c->nftables.masquerade_all = b;
        return 0;
}

/* verflag: true, false or raw (which prints more, and still exits). */
static int flag_set_version(struct kproxy_config *c, const struct config_flag *f, const char *v, bool first,
                            struct buf *why) {
        (void) f, (void) first;
        c->show_version_raw = streq(v, "raw");
        if (c->show_version_raw) {
                c->show_version = true;
                return 0;
        }
        if (config_value_parse_bool(v, &c->show_version) < 0) {
                buf_puts(why, "must be true, false or raw");
                return -EINVAL;
        }
        return 0;
}

#define CFG(member) .offset = offsetof(struct kproxy_config, member)
#define CMD(member) .offset = offsetof(struct config_cmdline, member), .in_cmdline = true

/* Sorted by name, as --help lists them. */
static const struct config_flag flag_table[] = {
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
          .def = "15m0s", .help = "Resync period of upstream's informers; must be above 0. No effect in "
                                  "kproxy: its watches need no resync (upstream's re-delivers unchanged "
                                  "objects, which change no rule)." },
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
        { .name = "external-ip-cidrs", .set = flag_set_cidr_list, CFG(external_ip_cidrs), .type = "strings",
          .help = "kproxy's own: the CIDRs that Services' spec.externalIPs may take; others are not "
                  "programmed, nor (unless listed alone, as ADDR/32) the API server's, this node's, loopback, "
                  "link-local and multicast addresses; \"none\": no external IP at all. Unset: every "
                  "address, as kube-proxy (docs/security.md). Kept with --config too." },
        { .name = "feature-gates", .set = flag_set_feature_gates, .type = "mapStringBool",
          .help = "Feature gates to switch, as name=true|false,... (kube-proxy 1.34's gates; an unknown "
                  "one, or a locked one set against its lock, stops kproxy at start-up). Ignored with "
                  "--config, whose featureGates count instead. Options are:",
          .help_list = config_features_print_known },
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
          .help = "Set the node up (conntrack limits and timeouts, route_localnet, nfacct counters) "
                  "without contacting the API server, then exit: an init container's job." },
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
          .help = "Requests to the API server allowed at once above --kube-api-qps (client-go's token "
                  "bucket; 0: 10)." },
        { .name = "kube-api-content-type", .set = flag_set_string, CFG(content_type), .type = "string",
          .def = DEFAULT_CONTENT_TYPE,
          .help = "Format to ask the API server for: application/vnd.kubernetes.protobuf or "
                  "application/json. Either is read, as each response says it is." },
        { .name = "kube-api-qps", .set = flag_set_float32, CFG(qps), .type = "float32", .def = "5",
          .help = "Sustained requests per second to the API server, lists and watches (0: 5; negative: "
                  "no limit)." },
        { .name = "kubeconfig", .set = flag_set_string, CFG(kubeconfig), .type = "string",
          .help = "Kubeconfig file with the API server and credentials (--master overrides the "
                  "server)." },
        { .name = "load-balancer-ip-cidrs", .set = flag_set_cidr_list, CFG(lb_ip_cidrs), .type = "strings",
          .help = "kproxy's own: the CIDRs that Services' load-balancer ingress IPs may take, as "
                  "--external-ip-cidrs for externalIPs. Unset: every address, as kube-proxy. Kept with "
                  "--config too." },
        { .name = "log-flush-frequency", .set = flag_set_duration, CFG(log_flush_frequency_ms),
          .type = "duration", .def = "5s",
          .help = "Longest time buffered info lines (--log-*-info-buffer-size) wait before they are "
                  "written." },
        { .name = "log-json-info-buffer-size", .set = flag_set_quantity, CFG(log_json.info_buffer_size),
          .type = "quantity", .def = "0",
          .help = "[Alpha] With --log-json-split-stream, buffer up to this many bytes of info lines "
                  "(needs LoggingAlphaOptions)." },
        { .name = "log-json-split-stream", .is_bool = true, .set = flag_set_bool, CFG(log_json.split_stream),
          .help = "[Alpha] In the json format, info lines to stdout and errors to stderr (needs "
                  "LoggingAlphaOptions)." },
        { .name = "log-text-info-buffer-size", .set = flag_set_quantity, CFG(log_text.info_buffer_size),
          .type = "quantity", .def = "0",
          .help = "[Alpha] With --log-text-split-stream, buffer up to this many bytes of info lines "
                  "(needs LoggingAlphaOptions)." },
        { .name = "log-text-split-stream", .is_bool = true, .set = flag_set_bool, CFG(log_text.split_stream),
          .help = "[Alpha] In the text format, info lines to stdout and errors to stderr (needs "
                  "LoggingAlphaOptions)." },
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
        { .name = "nftables-shards", .set = flag_set_int32, CMD(nftables_shards), .min = 0, .max = 64,
          .type = "int32", .def = "0",
          .help = "kproxy's own: spread the services' nat chains over this many extra nftables tables "
                  "(kube-proxy-1 ...), so that a change costs the kernel's check of one of them, not of "
                  "all; 0 keeps upstream's single table. nftables mode only; kept with --config too." },
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
          .help = "Upstream: Go's pprof under /debug/pprof on the metrics server. No effect in kproxy, "
                  "which is not Go: profile it with perf (make profile)." },
        { .name = "proxy-mode", .set = flag_set_proxy_mode, .type = "ProxyMode", .def = "iptables",
          .help = "Proxy mode: iptables (the default), nftables, or userspace (kproxy's own: "
                  "connections forwarded in the process, for nodes without a packet filter; "
                  "docs/userspace.md). ipvs parses but is refused at start-up." },
        { .name = "show-hidden-metrics-for-version", .set = flag_set_string, CFG(show_hidden_metrics_for_version),
          .type = "string",
          .help = "Previous minor version, as 1.30, whose hidden metrics should still be "
                  "shown." },
        { .name = "socket-lb", .is_bool = true, .set = flag_set_bool, CFG(socket_lb),
          .help = "kproxy's own: also translate connections to cluster IPs in the sockets of the "
                  "--socket-lb-cgroup (eBPF cgroup hooks, docs/socket-lb.md), beside iptables or nftables "
                  "mode's rules. Kept with --config too." },
        { .name = "socket-lb-cgroup", .set = flag_set_string, CFG(socket_lb_cgroup), .type = "string",
          .help = "kproxy's own: the cgroup v2 directory whose sockets --socket-lb translates. Unset: the "
                  "root of the cgroup v2 mount. Kept with --config too." },
        { .name = "socket-lb-pin-dir", .set = flag_set_string, CFG(socket_lb_pin_dir), .type = "string",
          .def = "/sys/fs/bpf/kproxy",
          .help = "kproxy's own: the directory in a bpf filesystem where --socket-lb pins its maps and "
                  "links, so translation goes on while kproxy is stopped. Kept with --config too." },
        { .name = "state-dir", .set = flag_set_string, CFG(state_dir), .type = "string",
          .help = "kproxy's own: a directory (on tmpfs, such as /run/kproxy) where iptables mode keeps "
                  "what it knows the kernel holds, so that a restart writes only the chains that changed "
                  "instead of every one. Unset: nothing kept. Kept with --config too." },
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

static const struct config_flag *flag_lookup(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(flag_table); i++)
                if (streq(flag_table[i].name, name))
                        return &flag_table[i];
        return NULL;
}

bool config_flags_changed(const struct kproxy_config *c, const char *name) {
        const struct config_flag *f = flag_lookup(name);

        assert(f);
        return c->cmdline->changed[f - flag_table];
}

/* cliflag.WordSepNormalizeFunc: "--iptables_sync_period" is "--iptables-sync-period". */
bool config_flags_name_eq(const char *a, const char *b) {
        for (; *a && *b; a++, b++)
                if (*a != *b && !((*a == '_' || *a == '-') && (*b == '_' || *b == '-')))
                        return false;
        return *a == *b;
}

const struct config_flag *config_flags_find(const char *name) {
        for (size_t k = 0; k < ELEMENTSOF(flag_table); k++)
                if (config_flags_name_eq(flag_table[k].name, name))
                        return &flag_table[k];
        return NULL;
}

const struct config_flag *config_flags_find_shorthand(char shorthand) {
        for (size_t k = 0; k < ELEMENTSOF(flag_table); k++)
                if (flag_table[k].shorthand == shorthand)
                        return &flag_table[k];
        return NULL;
}

const char *config_flags_name(const struct config_flag *f) {
        return f->name;
}

bool config_flags_is_bool(const struct config_flag *f) {
        return f->is_bool;
}

int config_flags_apply(struct kproxy_config *c, const struct config_flag *f, const char *value) {
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
               "--cleanup, --init-only, --master, --hostname-override, --nftables-shards, --socket-lb*, --state-dir\n"
               "and the "
               "logging flags "
               "(-v, --vmodule, --logging-format, --log-flush-frequency, --log-*-split-stream, "
               "--log-*-info-buffer-size).\n\n"
               "Flags:\n");
        for (int pass = 0; pass < 2; pass++) {
                for (size_t i = 0; i < ELEMENTSOF(flag_table) + n_extra; i++) {
                        const struct config_flag *f = i < ELEMENTSOF(flag_table) ? &flag_table[i] : NULL;
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
                        if (f) {
                                help_line(width, left, f->help, f->def, f->deprecated);
                                /* pflag indents a multi-line help to its column. */
                                if (f->help_list)
                                        f->help_list(2 + width + 3);
                        } else
                                help_line(width, left, x->help ? x->help : "", NULL, NULL);
                }
        }
}
