/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Private to src/config/: what its files share, and nothing else; only the
 * .c files of src/config/ include it. Prototypes are grouped by the file
 * that defines them, and carry that file's prefix.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config/config.h"

struct yaml_document_s;         /* yaml_document_t */

/* Upstream's values that more than one file needs: config_init(), the
 * file's defaulting, --help and the writer must agree on them. */
#define API_VERSION "kubeproxy.config.k8s.io/v1alpha1"
#define KIND "KubeProxyConfiguration"
#define HEALTHZ_PORT 10256              /* ports.ProxyHealthzPort */
#define METRICS_PORT 10249              /* ports.ProxyStatusPort */
#define DEFAULT_OOM_SCORE_ADJ (-999)    /* qos.KubeProxyOOMScoreAdj */
#define DEFAULT_CONTENT_TYPE "application/vnd.kubernetes.protobuf"
#define DEFAULT_MASQUERADE_BIT 14
#define MAX_FLAGS 96

#define MS_SECOND UINT64_C(1000)
#define MS_MINUTE (60 * MS_SECOND)
#define MS_HOUR (60 * MS_MINUTE)

static inline bool streq(const char *a, const char *b) {
        return strcmp(a, b) == 0;
}

/* Set up by config_init(), written by the flags, read by config_finish(). */
struct config_cmdline {
        bool changed[MAX_FLAGS];        /* by index in the flag table, like pflag's Changed */
        /* Flags upstream binds outside its configuration (Options fields). */
        char *hostname_override;
        uint64_t iptables_sync_period_ms;
        uint64_t iptables_min_sync_period_ms;
        uint64_t ipvs_sync_period_ms;
        uint64_t ipvs_min_sync_period_ms;
        int32_t healthz_port;
        int32_t metrics_port;
        /* kproxy's own, kept with --config too (not a configuration field). */
        int32_t nftables_shards;
};

/* ---- config.c ---- */

/* One line "kproxy: ..." on stderr, control bytes replaced, long values cut.
 * config_error() returns -EINVAL; config_print() is for warnings. */
int config_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void config_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- config-gates.c: the table, written by tools/gen-gates.py ---- */

/* featuregate's pre-release stages; PRE_ALPHA is a gate the sources list
 * only from a later release on (none in 1.34, but the table could hold one). */
enum config_gate_stage {
        CONFIG_GATE_ALPHA,
        CONFIG_GATE_BETA,
        CONFIG_GATE_GA,
        CONFIG_GATE_DEPRECATED,
        CONFIG_GATE_PRE_ALPHA,
        _CONFIG_GATE_STAGE_MAX,
};

struct config_gate {
        const char *name;
        enum config_gate_stage stage;
        bool def;               /* the default at kproxy's release */
        bool locked;            /* LockToDefault: setting it to !def is refused */
};

/* Every gate kube-proxy knows, sorted by strcmp() of the name. */
extern const struct config_gate config_gates[];
extern const size_t config_gates_count;
/* The release the table is for, "MAJOR.MINOR": upstream's emulated version. */
extern const char config_gates_release[];

/* ---- config-features.c: featureGates / --feature-gates ---- */

/* Sets one gate, keeping the array sorted by name. Names are not checked
 * here (config_features_check() does, once the source is settled). Returns
 * 0 or -ENOMEM. */
int config_feature_gate_set(struct kproxy_config *c, const char *name, bool enabled);
void config_feature_gates_clear(struct kproxy_config *c);
/* The table's entry for name, or NULL. */
const struct config_gate *config_feature_find(const char *name);
/* "ALPHA", "BETA", "" (GA), "DEPRECATED", "PRE-ALPHA", as featuregate spells
 * its stages in --help and messages. */
const char *config_gate_stage_to_string(enum config_gate_stage s);
/* upstream's SetFromMap() over the gates that were set: prints one line for
 * each unknown, locked or not-yet-existing gate (naming the flag or the
 * file's field) and returns -EINVAL if there was any; prints upstream's
 * warning for each GA or deprecated gate set. */
int config_features_check(const struct kproxy_config *c);
/* Prints the alpha and beta gates (and AllAlpha, AllBeta) one a line, each
 * indented by indent, as featuregate's KnownFeatures() lists them. */
void config_features_print_known(int indent);

/* ---- config-value.c: Go's value syntax (strconv, net), owned strings ---- */

/* Replaces *p with a copy of s; NULL and "" both store NULL. 0 or -ENOMEM. */
int config_value_str_set(char **p, const char *s);
/* Appends ",v" to *p (or sets it to v). 0 or -ENOMEM. */
int config_value_str_append(char **p, const char *v);
void config_value_strv_free(char **v, size_t n);
/* Appends a copy of s[0..len). 0 or -ENOMEM. */
int config_value_strv_push(char ***v, size_t *n, const char *s, size_t len);
/* Moves *s and *len past blanks at both ends. */
void config_value_trim(const char **s, size_t *len);
/* The parsers return 0, -EINVAL for bad syntax or -ERANGE; *ret is written
 * only on success. */
int config_value_parse_bool(const char *s, bool *ret);
int config_value_parse_int(const char *s, int64_t *ret);
int config_value_parse_decimal(const char *s, uint64_t max, uint64_t *ret);
int config_value_parse_float32(const char *s, float *ret);
/* AF_INET (IPv4-mapped IPv6 too), AF_INET6, or 0 when s is no IP / CIDR. */
int config_value_ip_family(const char *s);
int config_value_cidr_family(const char *s);
/* net.SplitHostPort: copies the host to host, points *ret_port into s. */
int config_value_split_host_port(const char *s, char *host, size_t hostlen, const char **ret_port);
/* NULL if s is IP:port, else what is wrong with it. */
const char *config_value_host_port_problem(const char *s);
/* A bare IP in *addr gets ":port" (IPv6 bracketed). 0 or -ENOMEM. */
int config_value_append_port(char **addr, unsigned port);
bool config_value_quantity_valid(const char *s);
/* A non-negative resource.Quantity ("0", "64Ki", "1.5M") as bytes, rounded
 * up as Quantity.Value() does. 0, -EINVAL or -ERANGE. */
int config_value_parse_quantity(const char *s, uint64_t *ret);
/* The bytes as a quantity string: with a binary suffix when exact. */
void config_value_format_quantity(uint64_t v, char *out, size_t len);
bool config_value_logging_format_valid(const char *v);

/* A YAML scalar typed as go-yaml v2 types an untagged plain one. */
enum config_scalar_kind {
        CONFIG_SCALAR_NULL,
        CONFIG_SCALAR_BOOL,
        CONFIG_SCALAR_INT,
        CONFIG_SCALAR_FLOAT,
        CONFIG_SCALAR_STRING,
};

struct config_scalar {
        enum config_scalar_kind kind;
        const char *text;       /* borrowed */
        bool b;
        int64_t i;
        double f;
};

void config_value_yaml_resolve(const char *s, struct config_scalar *ret);

/* ---- config-duration.c ---- */

/* time.ParseDuration to signed nanoseconds. 0, -EINVAL or -ERANGE. */
int config_duration_parse_ns(const char *s, int64_t *ret);

/* ---- config-flags.c: the flag table; config_print_help() ---- */

struct config_flag;

/* By name, "_" matching "-"; NULL if there is no such flag. */
const struct config_flag *config_flags_find(const char *name);
const struct config_flag *config_flags_find_shorthand(char shorthand);
const char *config_flags_name(const struct config_flag *f);
bool config_flags_is_bool(const struct config_flag *f);
/* cliflag.WordSepNormalizeFunc's equality: "_" and "-" are the same. */
bool config_flags_name_eq(const char *a, const char *b);
/* Sets the flag's field from value and marks the flag given; a bad value is
 * reported on stderr and gives -EINVAL. */
int config_flags_apply(struct kproxy_config *c, const struct config_flag *f, const char *value);
/* Whether the flag called name (which must exist) was given. */
bool config_flags_changed(const struct kproxy_config *c, const char *name);

/* ---- config-decode.c: a KubeProxyConfiguration YAML document ---- */

/* What a file says beyond struct kproxy_config: whether the fields upstream
 * keeps as pointers were given (null or absent means "default", while 0 is
 * a value), and the fields kproxy checks and then drops, having no IPVS or
 * userspace mode. The strings are owned. */
struct config_file_extra {
        bool has_iptables_masquerade_bit;
        bool has_nftables_masquerade_bit;
        bool has_localhost_nodeports;
        bool has_max_per_core;
        bool has_conntrack_min;
        bool has_tcp_established_timeout;
        bool has_tcp_close_wait_timeout;
        bool has_oom_score_adj;
        uint64_t ipvs_sync_period_ms;
        uint64_t ipvs_min_sync_period_ms;
        char **ipvs_exclude_cidrs;
        size_t n_ipvs_exclude_cidrs;
        char *port_range;
};

/* Decodes doc (read from path, which messages name) onto c, a zeroed
 * configuration, and *extra, zeroed too; both keep what was decoded even on
 * failure, for the caller to free. Returns 0, -EINVAL after printing the
 * error, or -ENOMEM. */
int config_decode_document(const char *path, struct yaml_document_s *doc, struct kproxy_config *c,
                           struct config_file_extra *extra);

/* ---- config-file.c ---- */

/* Reads c->config_file and adopts it with upstream's precedence. */
int config_file_load(struct kproxy_config *c);

/* ---- config-validate.c ---- */

/* Upstream's validation; prints the first problem and returns -EINVAL. */
int config_validate(const struct kproxy_config *c);
