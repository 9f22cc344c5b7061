/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The configuration's types: struct kproxy_config (upstream's
 * KubeProxyConfiguration fields and its command-line-only flags) and the
 * enums and sections it is made of. Every file of src/config/ builds on
 * them; the rest of kproxy gets them through config/config.h.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum proxy_mode {
        PROXY_MODE_IPTABLES,
        PROXY_MODE_NFTABLES,
        PROXY_MODE_IPVS,        /* accepted so that configs parse; refused at start-up */
        PROXY_MODE_USERSPACE,   /* kproxy's own: forwarding in the process (docs/userspace.md) */
        _PROXY_MODE_MAX,
        _PROXY_MODE_INVALID = -22,
};

enum detect_local_mode {
        DETECT_LOCAL_CLUSTER_CIDR,
        DETECT_LOCAL_NODE_CIDR,
        DETECT_LOCAL_BRIDGE_INTERFACE,
        DETECT_LOCAL_INTERFACE_NAME_PREFIX,
        _DETECT_LOCAL_MAX,
        _DETECT_LOCAL_INVALID = -22,
};

/* Durations are kept in milliseconds (Go duration strings at the edges). */
struct config_sync {
        int32_t masquerade_bit;         /* default 14 */
        bool masquerade_all;            /* default false */
        bool localhost_nodeports;       /* iptables only; default true */
        uint64_t sync_period_ms;        /* default 30s */
        uint64_t min_sync_period_ms;    /* default 1s */
};

struct config_conntrack {
        int32_t max_per_core;           /* default 32768 */
        int32_t min;                    /* default 131072 */
        bool tcp_be_liberal;            /* default false */
        uint64_t tcp_established_timeout_ms;  /* default 24h */
        uint64_t tcp_close_wait_timeout_ms;   /* default 1h */
        uint64_t udp_timeout_ms;        /* default 0 (leave the kernel's) */
        uint64_t udp_stream_timeout_ms; /* default 0 */
};

/* logging.options.json / .text (--log-{json,text}-split-stream and
 * -info-buffer-size): alpha options, behind LoggingAlphaOptions. */
struct config_log_output {
        bool split_stream;              /* info to stdout, errors to stderr */
        uint64_t info_buffer_size;      /* bytes of info lines buffered with split_stream; 0: none */
};

struct config_feature_gate {
        char *name;
        bool enabled;
};

/* What config_parse_args() remembers for config_finish() (which flags were
 * given, and flags upstream keeps outside the configuration); private to
 * src/config/. */
struct config_cmdline;

/* A flag's CIDRs, as given (checked when read). */
struct config_cidr_list {
        char **v;
        size_t n;
};

/* Optional strings are NULL when unset or empty, whichever way the input
 * spelled that ("", null, missing). */
struct kproxy_config {
        /* KubeProxyConfiguration fields */
        char *bind_address;             /* default "0.0.0.0" */
        bool bind_address_hard_fail;
        char *healthz_bind_address;     /* default "0.0.0.0:10256"; NULL: no health server */
        char *metrics_bind_address;     /* default "127.0.0.1:10249" */
        char *hostname_override;        /* NULL: the machine's hostname (lower-cased) */
        char *cluster_cidr;             /* comma-separated list as given, or NULL */
        enum detect_local_mode detect_local_mode;  /* default ClusterCIDR */
        char *bridge_interface;         /* detectLocal.bridgeInterface */
        char *interface_name_prefix;    /* detectLocal.interfaceNamePrefix */
        char **nodeport_addresses;      /* CIDRs, or the word "primary" */
        size_t n_nodeport_addresses;
        enum proxy_mode mode;           /* default iptables ("" in the file means iptables) */
        struct config_sync iptables;
        struct config_sync nftables;
        struct config_conntrack conntrack;
        char *kubeconfig;               /* clientConnection.kubeconfig */
        char *content_type;             /* default "application/vnd.kubernetes.protobuf" */
        char *accept_content_types;
        float qps;                      /* default 5 */
        int32_t burst;                  /* default 10 */
        uint64_t config_sync_period_ms; /* default 15m */
        bool has_oom_score_adj;
        int32_t oom_score_adj;          /* default -999 */
        bool enable_profiling;
        char *show_hidden_metrics_for_version;
        struct config_feature_gate *feature_gates;
        size_t n_feature_gates;
        int32_t verbosity;              /* logging.verbosity, and -v/--v */
        char *logging_format;           /* default "text" */
        uint64_t log_flush_frequency_ms; /* logging.flushFrequency, default 5s */
        char *log_vmodule;              /* logging.vmodule as "pattern=N,...", or NULL */
        struct config_log_output log_json, log_text;

        /* kproxy's own: services' nat side in this many extra nftables
         * tables (render/nftir.h); 0, the default: upstream's one table */
        int32_t nftables_shards;

        /* Command-line only */
        char *config_file;              /* --config */
        char *write_config_to;          /* --write-config-to */
        char *master;                   /* --master */
        char *state_dir;                /* --state-dir, kproxy's own: what outlives a restart */
        bool socket_lb;                 /* --socket-lb, kproxy's own (docs/socket-lb.md) */
        char *socket_lb_cgroup;         /* --socket-lb-cgroup; NULL: the cgroup v2 root */
        char *socket_lb_pin_dir;        /* --socket-lb-pin-dir; NULL: /sys/fs/bpf/kproxy */
        /* --external-ip-cidrs, --load-balancer-ip-cidrs, kproxy's own: the
         * addresses services may claim (model/admit.h, docs/security.md).
         * Empty: not in use, as upstream; just "none": nothing admitted. */
        struct config_cidr_list external_ip_cidrs, lb_ip_cidrs;
        bool cleanup;                   /* --cleanup */
        bool init_only;                 /* --init-only */
        bool show_version;              /* --version */
        bool show_version_raw;          /* --version=raw */
        bool show_help;                 /* -h, --help */

        struct config_cmdline *cmdline; /* owned; see above */
};

/* A flag that one subcommand adds to the common set (e.g. render's --host-*).
 * set() gets the value ("true" for a bare boolean flag) and returns 0 or
 * -EINVAL after printing nothing: the parser reports the error. */
struct config_extra_flag {
        const char *name;               /* without leading dashes */
        bool is_bool;
        const char *value_name;         /* for --help, e.g. "CIDR,..." */
        const char *help;
        int (*set)(void *userdata, const char *value);
};
