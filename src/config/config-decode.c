/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A KubeProxyConfiguration YAML (or JSON) document onto a struct
 * kproxy_config, driven by tables of v1alpha1's fields. Scalars are typed
 * as go-yaml v2 types them and then checked as encoding/json checks them
 * against upstream's Go types, so a file means here what it means to
 * kube-proxy. Unknown and repeated fields get a warning and are skipped
 * (see config.c); a wrong type or value is an error naming the file, the
 * line and the field's dotted path.
 */
#include "config/config-decode.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/config-defaults.h"
#include "config/config-duration.h"
#include "config/config-enums.h"
#include "config/config-features.h"
#include "config/config-message.h"
#include "config/config-types.h"
#include "config/config-value.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/hmap.h"

static const char *const scalar_kind_name[] = {
        [CONFIG_SCALAR_NULL] = "null",
        [CONFIG_SCALAR_BOOL] = "a boolean",
        [CONFIG_SCALAR_INT] = "an integer",
        [CONFIG_SCALAR_FLOAT] = "a number",
        [CONFIG_SCALAR_STRING] = "a string",
};

struct file_decoder {
        const char *path;
        yaml_document_t *doc;
        struct kproxy_config *c;        /* zeroed, then decoded onto */
        struct config_file_extra *extra; /* presence flags, dropped fields */
        struct buf field;               /* dotted path of the field being decoded */
};

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
        BASE_EXTRA,             /* struct config_file_extra */
};

struct field {
        const char *name;       /* NULL ends a table */
        enum field_type type;
        enum field_base base;
        size_t offset;
        size_t offset_n;        /* FIELD_STRINGS: the count beside the array */
        int has;                /* offset of a presence flag in struct config_file_extra, or -1 */
        const struct field *children;
};

#define F(n, t, m) \
        { .name = n, .type = t, .base = BASE_CONFIG, .offset = offsetof(struct kproxy_config, m), .has = -1 }
#define F_HAS(n, t, m, h)                                                                               \
        { .name = n, .type = t, .base = BASE_CONFIG, .offset = offsetof(struct kproxy_config, m),      \
          .has = (int) offsetof(struct config_file_extra, h) }
#define F_EXTRA(n, t, m) \
        { .name = n, .type = t, .base = BASE_EXTRA, .offset = offsetof(struct config_file_extra, m), .has = -1 }
#define F_LIST(n, base_, type_, m, mn)                                                            \
        { .name = n, .type = FIELD_STRINGS, .base = base_, .offset = offsetof(type_, m),        \
          .offset_n = offsetof(type_, mn), .has = -1 }
#define F_IGNORE(n, t) { .name = n, .type = t, .base = BASE_NONE, .has = -1 }
#define F_MAP(n, kids) { .name = n, .type = FIELD_MAP, .children = kids, .has = -1 }
#define F_END { .name = NULL }

/* KubeProxyConfiguration v1alpha1 as of Kubernetes 1.34 (CONFIG_KUBE_VERSION). */
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
        F_LIST("excludeCIDRs", BASE_EXTRA, struct config_file_extra, ipvs_exclude_cidrs,
               n_ipvs_exclude_cidrs),
        F_EXTRA("minSyncPeriod", FIELD_DURATION, ipvs_min_sync_period_ms),
        F_IGNORE("scheduler", FIELD_STRING),
        F_IGNORE("strictARP", FIELD_BOOL),
        F_EXTRA("syncPeriod", FIELD_DURATION, ipvs_sync_period_ms),
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

static const struct field log_json_fields[] = {
        F("infoBufferSize", FIELD_QUANTITY, log_json.info_buffer_size),
        F("splitStream", FIELD_BOOL, log_json.split_stream),
        F_END,
};

static const struct field log_text_fields[] = {
        F("infoBufferSize", FIELD_QUANTITY, log_text.info_buffer_size),
        F("splitStream", FIELD_BOOL, log_text.split_stream),
        F_END,
};

static const struct field log_options_fields[] = {
        F_MAP("json", log_json_fields),
        F_MAP("text", log_text_fields),
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
        F_EXTRA("portRange", FIELD_STRING, port_range),
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

static int decode_scalar(struct file_decoder *d, const yaml_node_t *n, struct config_scalar *ret) {
        const char *text;

        if (n->type != YAML_SCALAR_NODE)
                return decode_error(d, n, "expected a single value, got a %s",
                                    n->type == YAML_MAPPING_NODE ? "mapping" : "list");
        text = (const char *) n->data.scalar.value;
        if (strlen(text) != n->data.scalar.length)
                return decode_error(d, n, "value holds a NUL byte");
        if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
                config_value_yaml_resolve(text, ret);
        else
                *ret = (struct config_scalar) { .kind = CONFIG_SCALAR_STRING, .text = text };
        return 0;
}

static int decode_type_error(struct file_decoder *d, const yaml_node_t *n, const struct config_scalar *s,
                             const char *want) {
        return decode_error(d, n, "expected %s, got %s \"%s\"", want, scalar_kind_name[s->kind], s->text);
}

/* An integer in min..max. A float that is integral passes too, because the
 * JSON upstream decodes from prints 14.0 as 14. */
static int decode_integer(struct file_decoder *d, const yaml_node_t *n, const struct config_scalar *s, int64_t min,
                          int64_t max, int64_t *ret) {
        if (s->kind == CONFIG_SCALAR_FLOAT && s->f >= (double) min && s->f <= (double) max &&
            s->f == (double) (int64_t) s->f) {
                *ret = (int64_t) s->f;
                return 0;
        }
        if (s->kind != CONFIG_SCALAR_INT)
                return decode_type_error(d, n, s, "an integer");
        if (s->i < min || s->i > max)
                return decode_error(d, n, "%s is out of range %" PRIi64 "..%" PRIi64, s->text, min, max);
        *ret = s->i;
        return 0;
}

static int decode_duration(struct file_decoder *d, const yaml_node_t *n, const struct config_scalar *s,
                           uint64_t *ret_ms) {
        int64_t ns;
        int r;

        /* metav1.Duration only takes a string. */
        if (s->kind != CONFIG_SCALAR_STRING)
                return decode_type_error(d, n, s, "a duration such as \"30s\"");
        r = config_duration_parse_ns(s->text, &ns);
        if (r < 0)
                return decode_error(d, n, "\"%s\" is not a duration such as 300ms, 30s, 1m30s or 2h", s->text);
        if (ns < 0)
                return decode_error(d, n, "%s must not be negative", s->text);
        *ret_ms = (uint64_t) ns / 1000000;
        return 0;
}

static int decode_map(struct file_decoder *d, yaml_node_t *n, const struct field *table);

static int decode_strings(struct file_decoder *d, yaml_node_t *n, char ***v, size_t *nv) {
        struct config_scalar s;
        int r;

        if (n->type == YAML_SCALAR_NODE) {
                r = decode_scalar(d, n, &s);
                if (r < 0)
                        return r;
                if (s.kind != CONFIG_SCALAR_NULL)
                        return decode_type_error(d, n, &s, "a list");
        } else if (n->type != YAML_SEQUENCE_NODE)
                return decode_error(d, n, "expected a list, got a mapping");

        config_value_strv_free(*v, *nv);
        *v = NULL;
        *nv = 0;
        if (n->type != YAML_SEQUENCE_NODE)
                return 0;
        for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
                yaml_node_t *item = yaml_document_get_node(d->doc, *i);

                r = decode_scalar(d, item, &s);
                if (r < 0)
                        return r;
                if (s.kind != CONFIG_SCALAR_STRING)
                        return decode_type_error(d, item, &s, "a string");
                r = config_value_strv_push(v, nv, s.text, strlen(s.text));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Walks the pairs of a mapping, keeping d->field on the key's path and
 * warning about names seen before in the same mapping (upstream's lenient
 * decoder keeps the last one). The names seen go in a map: a file of
 * 400k unknown fields took minutes when each was compared with all those
 * before it. */
static int decode_pairs(struct file_decoder *d, yaml_node_t *n,
                        int (*fn)(struct file_decoder *d, const char *name, yaml_node_t *key, yaml_node_t *value,
                                  const void *userdata),
                        const void *userdata) {
        yaml_node_pair_t *start = n->data.mapping.pairs.start, *top = n->data.mapping.pairs.top;
        struct hmap seen = HMAP_INIT;   /* name -> its key node; names borrowed from the document */
        size_t mark = d->field.len;
        int r = 0;

        for (yaml_node_pair_t *p = start; p < top && r >= 0; p++) {
                yaml_node_t *key = yaml_document_get_node(d->doc, p->key);
                yaml_node_t *value = yaml_document_get_node(d->doc, p->value);
                const char *name;

                if (key->type != YAML_SCALAR_NODE) {
                        r = decode_error(d, key, "field names must be strings");
                        break;
                }
                name = (const char *) key->data.scalar.value;
                if (mark > 0)
                        buf_putc(&d->field, '.');
                buf_puts(&d->field, name);
                if (hmap_put(&seen, name, key))
                        config_print("%s: line %lu: duplicate field \"%s\", the last one wins", d->path,
                                     node_line(key), d->field.data);
                r = fn(d, name, key, value, userdata);
                buf_truncate(&d->field, mark);
        }
        hmap_done(&seen);
        return r < 0 ? r : 0;
}

static int decode_feature_gate(struct file_decoder *d, const char *name, yaml_node_t *key, yaml_node_t *value,
                               const void *userdata) {
        struct config_scalar s;
        int r;

        (void) key, (void) userdata;
        r = decode_scalar(d, value, &s);
        if (r < 0)
                return r;
        if (s.kind != CONFIG_SCALAR_BOOL)
                return decode_type_error(d, value, &s, "true or false");
        if (!*name)
                return decode_error(d, key, "feature gate names must not be empty");
        return config_feature_gate_set(d->c, name, s.b);
}

struct vmodule_item {
        const char *pattern;
        int64_t level;
        bool has_level;
};

static int decode_vmodule_field(struct file_decoder *d, const char *name, yaml_node_t *key, yaml_node_t *value,
                                const void *userdata) {
        struct vmodule_item *item = (struct vmodule_item *) userdata;
        struct config_scalar s;
        int r;

        r = decode_scalar(d, value, &s);
        if (r < 0)
                return r;
        if (streq(name, "filePattern")) {
                if (s.kind != CONFIG_SCALAR_STRING)
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
        struct config_scalar s;
        int r;

        if (n->type == YAML_SCALAR_NODE) {
                r = decode_scalar(d, n, &s);
                if (r < 0)
                        return r;
                if (s.kind != CONFIG_SCALAR_NULL)
                        return decode_type_error(d, n, &s, "a list");
                return config_value_str_set(target, NULL);
        }
        if (n->type != YAML_SEQUENCE_NODE)
                return decode_error(d, n, "expected a list, got a mapping");
        r = config_value_str_set(target, NULL);
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
                r = config_value_str_append(target, entry);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* FIELD_FLOAT32: any number, as encoding/json takes one into a float32. */
static int decode_float32(struct file_decoder *d, const yaml_node_t *n, struct config_scalar *s, float *target) {
        if (s->kind == CONFIG_SCALAR_INT)
                s->f = (double) s->i;
        else if (s->kind != CONFIG_SCALAR_FLOAT)
                return decode_type_error(d, n, s, "a number");
        if (isfinite(s->f) && (s->f > FLT_MAX || s->f < -FLT_MAX))
                return decode_error(d, n, "%s is out of range for a float32", s->text);
        if (target)
                *target = (float) s->f;
        return 0;
}

/* FIELD_FLUSH_FREQUENCY, logsapi's TimeOrMetaDuration: a duration string
 * or integer nanoseconds. */
static int decode_flush_frequency(struct file_decoder *d, const yaml_node_t *n, const struct config_scalar *s,
                                  uint64_t *target) {
        uint64_t ms;
        int r;

        if (s->kind == CONFIG_SCALAR_INT) {
                if (s->i < 0)
                        return decode_error(d, n, "%s must not be negative", s->text);
                ms = (uint64_t) s->i / 1000000;
        } else {
                r = decode_duration(d, n, s, &ms);
                if (r < 0)
                        return r;
        }
        *target = ms;
        return 0;
}

static int decode_proxy_mode(struct file_decoder *d, const yaml_node_t *n, const struct config_scalar *s,
                             enum proxy_mode *target) {
        enum proxy_mode m;

        if (s->kind != CONFIG_SCALAR_STRING)
                return decode_type_error(d, n, s, "a string");
        m = *s->text ? proxy_mode_from_string(s->text) : PROXY_MODE_IPTABLES;
        if (m < 0)
                return decode_error(d, n, "unsupported mode \"%s\": " PROXY_MODE_CHOICE ", or empty for iptables",
                                    s->text);
        *target = m;
        return 0;
}

static int decode_detect_local_mode(struct file_decoder *d, const yaml_node_t *n, const struct config_scalar *s,
                                    enum detect_local_mode *target) {
        enum detect_local_mode m;

        if (s->kind != CONFIG_SCALAR_STRING)
                return decode_type_error(d, n, s, "a string");
        m = *s->text ? detect_local_mode_from_string(s->text) : DETECT_LOCAL_CLUSTER_CIDR;
        if (m < 0)
                return decode_error(d, n,
                                    "unsupported mode \"%s\", must be ClusterCIDR, NodeCIDR, BridgeInterface, "
                                    "InterfaceNamePrefix or empty",
                                    s->text);
        *target = m;
        return 0;
}

static int decode_quantity(struct file_decoder *d, const yaml_node_t *n, const struct config_scalar *s,
                           uint64_t *target) {
        uint64_t bytes;

        if (s->kind != CONFIG_SCALAR_STRING && s->kind != CONFIG_SCALAR_INT && s->kind != CONFIG_SCALAR_FLOAT)
                return decode_type_error(d, n, s, "a quantity");
        if (config_value_parse_quantity(s->text, &bytes) < 0)
                return decode_error(d, n, "\"%s\" is not a quantity such as 0, 64Ki or 1Mi", s->text);
        if (target)
                *target = bytes;
        return 0;
}

/* A field that holds one value, not null (decode_value() took care of
 * that): s checked against the field's Go type and stored at target (NULL
 * for a field that is only checked). */
static int decode_scalar_field(struct file_decoder *d, const struct field *f, const yaml_node_t *n,
                               struct config_scalar *s, void *target) {
        uint64_t ms;
        int64_t i;
        int r;

        switch (f->type) {
        case FIELD_STRING:
                if (s->kind != CONFIG_SCALAR_STRING)
                        return decode_type_error(d, n, s, "a string");
                return target ? config_value_str_set(target, s->text) : 0;
        case FIELD_BOOL:
                if (s->kind != CONFIG_SCALAR_BOOL)
                        return decode_type_error(d, n, s, "true or false");
                if (target)
                        *(bool *) target = s->b;
                return 0;
        case FIELD_INT32:
        case FIELD_VERBOSITY:
                r = decode_integer(d, n, s, f->type == FIELD_VERBOSITY ? 0 : INT32_MIN, INT32_MAX, &i);
                if (r >= 0 && target)
                        *(int32_t *) target = (int32_t) i;
                return r;
        case FIELD_FLOAT32:
                return decode_float32(d, n, s, target);
        case FIELD_DURATION:
                r = decode_duration(d, n, s, &ms);
                if (r >= 0 && target)
                        *(uint64_t *) target = ms;
                return r;
        case FIELD_FLUSH_FREQUENCY:
                return decode_flush_frequency(d, n, s, target);
        case FIELD_PROXY_MODE:
                return decode_proxy_mode(d, n, s, target);
        case FIELD_DETECT_LOCAL_MODE:
                return decode_detect_local_mode(d, n, s, target);
        case FIELD_QUANTITY:
                return decode_quantity(d, n, s, target);
        case FIELD_FEATURE_GATES:
                return decode_type_error(d, n, s, "a mapping of feature gate names to true or false");
        case FIELD_MAP:
        case FIELD_STRINGS:
        case FIELD_VMODULE:
                break;
        }
        assert(false);          /* decoded by decode_value() */
        return -EINVAL;
}

static int decode_value(struct file_decoder *d, const struct field *f, yaml_node_t *n) {
        void *target = f->base == BASE_CONFIG ? (char *) d->c + f->offset :
                       f->base == BASE_EXTRA ? (char *) d->extra + f->offset : NULL;
        bool *has = f->has >= 0 ? (bool *) ((char *) d->extra + f->has) : NULL;
        struct config_scalar s;
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
                        config_feature_gates_clear(d->c);
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
        if (s.kind == CONFIG_SCALAR_NULL) {
                /* encoding/json: null clears a pointer and leaves anything
                 * else as it is. */
                if (has)
                        *has = false;
                if (f->type == FIELD_FEATURE_GATES)
                        config_feature_gates_clear(d->c);
                return 0;
        }
        r = decode_scalar_field(d, f, n, &s, target);
        if (r < 0)
                return r;
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
         * carries on past fields it does not know; see config.c. */
        config_print("%s: line %lu: unknown field \"%s\", ignoring", d->path, node_line(key), d->field.data);
        return 0;
}

static int decode_map(struct file_decoder *d, yaml_node_t *n, const struct field *table) {
        struct config_scalar s;
        int r;

        if (n->type == YAML_SCALAR_NODE) {
                r = decode_scalar(d, n, &s);
                if (r < 0)
                        return r;
                if (s.kind != CONFIG_SCALAR_NULL)
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

int config_decode_document(const char *path, yaml_document_t *doc, struct kproxy_config *c,
                           struct config_file_extra *extra) {
        struct file_decoder d = { .path = path, .doc = doc, .c = c, .extra = extra };
        yaml_node_t *root;
        int r;

        assert(path);
        assert(doc);
        assert(c);
        assert(extra);

        root = yaml_document_get_root_node(doc);
        if (!root)
                r = config_error("%s: empty file, expected a %s", path, KIND);
        else if (root->type != YAML_MAPPING_NODE)
                r = config_error("%s: line %lu: expected a %s mapping", path, node_line(root), KIND);
        else
                r = decode_type_meta(&d, root);
        if (r >= 0)
                r = decode_map(&d, root, top_fields);
        buf_done(&d.field);
        return r;
}
