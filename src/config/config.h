/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * kproxy's configuration: upstream kube-proxy's command-line flags and its
 * KubeProxyConfiguration file (kubeproxy.config.k8s.io/v1alpha1, YAML or
 * JSON, given with --config), with upstream's defaults and precedence:
 *
 *   defaults  <  flags  ;  a --config file replaces flags entirely, except
 *   --hostname-override and the logging flags (-v), which win over the file.
 *
 * The struct is public because main wires its fields into every subsystem;
 * nothing but src/config/ writes it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum proxy_mode {
        PROXY_MODE_IPTABLES,
        PROXY_MODE_NFTABLES,
        PROXY_MODE_IPVS,        /* accepted so that configs parse; refused at start-up */
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
        bool cleanup;                   /* --cleanup */
        bool init_only;                 /* --init-only */
        bool show_version;              /* --version */
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

/* Fills c with upstream's defaults. Returns 0 or -ENOMEM. */
int config_init(struct kproxy_config *c);
void config_done(struct kproxy_config *c);

/* Parses argv[0..argc) (the program and subcommand already removed):
 * "--flag value", "--flag=value", "-v 4", bare booleans and "--bool=false".
 * Flags not in the common table are looked up in extra. Positional
 * arguments (and everything after "--") are returned in *ret_args, an owned
 * NULL-terminated array of borrowed argv pointers, with their count in
 * *ret_n_args. On a bad flag or value, prints one line naming the flag to
 * stderr and returns -EINVAL. */
int config_parse_args(struct kproxy_config *c, int argc, char **argv,
                      const struct config_extra_flag *extra, size_t n_extra, void *userdata,
                      char ***ret_args, size_t *ret_n_args);

/* Applies --config (if given) with upstream's precedence, then validates the
 * result. Errors are printed to stderr as one line naming the file and the
 * field; returns -EINVAL (bad content) or -errno (unreadable file). Unknown
 * and repeated fields in the file get a warning line and are skipped (the
 * last of repeated ones wins), as upstream's lenient fallback decoder does
 * for v1alpha1. */
int config_finish(struct kproxy_config *c);

/* Writes the effective configuration as a KubeProxyConfiguration YAML
 * document (what --write-config-to does). Returns 0 or -errno. */
int config_write(const struct kproxy_config *c, const char *path);

/* Appends the effective configuration to out as the JSON object upstream's
 * /configz serves under "kubeproxy.config.k8s.io": its internal
 * KubeProxyConfiguration as encoding/json writes it (Go field names, compact,
 * durations as Go strings), holding the same settings as config_write().
 * Returns 0 (out of memory aborts, as everywhere buf is used). */
struct buf;
int config_format_json(const struct kproxy_config *c, struct buf *out);

/* Prints the usage text, the common flags and the extra ones, to stdout. */
void config_print_help(const char *usage, const struct config_extra_flag *extra, size_t n_extra);

/* The sync settings of the selected mode (iptables or nftables). */
const struct config_sync *config_mode_sync(const struct kproxy_config *c);

/* The gate's effective value, as upstream's featuregate computes it: what
 * --feature-gates or featureGates set, else AllAlpha's or AllBeta's setting
 * for an alpha or beta gate, else its default in the kube-proxy release
 * kproxy follows (1.34: src/config/config-gates.c). gate must be one of its
 * gates (asserted, as upstream panics). Meaningful after config_finish(),
 * which refuses unknown and locked settings. */
bool config_feature_enabled(const struct kproxy_config *c, const char *gate);
/* Calls fn for every gate of the release (those upstream's featuregate
 * GetAll() gives), in name order: its stage as featuregate spells it
 * ("ALPHA", "BETA", "" for GA, "DEPRECATED") and its effective value.
 * Upstream's kubernetes_feature_enabled metric lists the same. */
void config_features_foreach(const struct kproxy_config *c,
                             void (*fn)(void *ctx, const char *name, const char *stage, bool enabled), void *ctx);

const char *proxy_mode_to_string(enum proxy_mode m);
enum proxy_mode proxy_mode_from_string(const char *s);
const char *detect_local_mode_to_string(enum detect_local_mode m);
enum detect_local_mode detect_local_mode_from_string(const char *s);

/* Go duration strings ("1s", "1m30s", "500ms", "24h0m0s") to milliseconds and
 * back (formatted as Go's time.Duration.String() does). Parsing drops parts
 * below a millisecond and returns -EINVAL for bad syntax, -ERANGE for a
 * negative duration or one beyond Go's (2562047h); *ret_ms is written only
 * on success. Formatting truncates to outlen, always NUL-terminated. */
int config_parse_duration(const char *s, uint64_t *ret_ms);
void config_format_duration(uint64_t ms, char *out, size_t outlen);
