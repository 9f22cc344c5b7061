/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --write-config-to: the effective configuration as the YAML document
 * upstream's encoder writes (every field, sorted), which kproxy and
 * kube-proxy both read back to the same settings. Strings are left plain
 * only where a YAML reader types them back as strings.
 */
#include "config/config-write.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config-defaults.h"
#include "config/config-duration.h"
#include "config/config-enums.h"
#include "config/config-types.h"
#include "config/config-value.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/alloc.h"

/* Plain if a YAML reader gives back the same string, else double-quoted. */
static void yaml_put_string(struct buf *b, const char *s) {
        struct config_scalar sc;
        bool plain;

        s = s ? s : "";
        config_value_yaml_resolve(s, &sc);
        plain = sc.kind == CONFIG_SCALAR_STRING && !strchr("-?:,[]{}#&*!|>'\"%@` ", s[0]) && !strstr(s, ": ") &&
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

/* One of logging.options' formats: infoBufferSize always (a quantity
 * string), splitStream only when true (omitempty). */
static void yaml_log_output(struct buf *b, const char *name, const struct config_log_output *o) {
        char q[32];
        config_value_format_quantity(o->info_buffer_size, q, sizeof q);
        yaml_key(b, 4, name);
        buf_putc(b, '\n');
        yaml_str(b, 6, "infoBufferSize", q);
        if (o->split_stream)
                yaml_bool(b, 6, "splitStream", true);
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
                _cleanup_free_ char *pattern = xstrndup(p, plen);
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
static void format_yaml(const struct kproxy_config *c, struct buf *b) {
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
        buf_puts(b, "  options:\n");
        yaml_log_output(b, "json", &c->log_json);
        yaml_log_output(b, "text", &c->log_text);
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

/* ---- /configz: the configuration as upstream's metrics server shows it ----
 *
 * Upstream hands configz its internal KubeProxyConfiguration
 * (pkg/proxy/apis/config), not the v1alpha1 one, and encoding/json marshals
 * it: the internal structs carry no json tags, so keys are Go field names in
 * struct order ("BindAddress", "Linux": {"Conntrack": ...}), pointers print
 * their value, an empty list is null, durations are metav1.Duration strings
 * ("30s"). Only the embedded logging configuration is a versioned type with
 * lowerCamel keys. The fields are those --write-config-to writes, moved
 * where the internal type keeps them: sync periods and masqueradeAll come
 * from the selected mode's section, clusterCIDR is split into a list. */

/* encoding/json's string escaping: also <, > and & (HTML-safe), U+2028 and
 * U+2029; invalid UTF-8 becomes U+FFFD. */
static void json_put_string(struct buf *b, const char *s) {
        const unsigned char *p = (const unsigned char *) (s ? s : "");

        buf_putc(b, '"');
        while (*p) {
                unsigned char c = *p;
                size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
                uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1fu : len == 3 ? c & 0x0fu : c & 0x07u;
                bool valid = len > 0;

                for (size_t i = 1; valid && i < len; i++) {
                        valid = (p[i] & 0xc0) == 0x80;
                        cp = cp << 6 | (p[i] & 0x3fu);
                }
                /* Overlong forms, surrogates and values past U+10FFFF are
                 * invalid too. */
                if (valid && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
                              (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff))
                        valid = false;
                if (!valid) {
                        buf_puts(b, "\\ufffd");
                        p++;
                        continue;
                }
                if (c == '"' || c == '\\')
                        buf_printf(b, "\\%c", c);
                else if (c == '\n')
                        buf_puts(b, "\\n");
                else if (c == '\r')
                        buf_puts(b, "\\r");
                else if (c == '\t')
                        buf_puts(b, "\\t");
                else if (c < 0x20 || c == '<' || c == '>' || c == '&')
                        buf_printf(b, "\\u%04x", c);
                else if (cp == 0x2028 || cp == 0x2029)
                        buf_printf(b, "\\u%04x", (unsigned) cp);
                else
                        buf_put(b, (const char *) p, len);
                p += len;
        }
        buf_putc(b, '"');
}

/* Opens a member: the separating comma unless the object just started. */
static void json_key(struct buf *b, const char *key) {
        if (b->len > 0 && b->data[b->len - 1] != '{')
                buf_putc(b, ',');
        json_put_string(b, key);
        buf_putc(b, ':');
}

static void json_str(struct buf *b, const char *key, const char *value) {
        json_key(b, key);
        json_put_string(b, value);
}

static void json_bool(struct buf *b, const char *key, bool value) {
        json_key(b, key);
        buf_puts(b, value ? "true" : "false");
}

static void json_int(struct buf *b, const char *key, int64_t value) {
        json_key(b, key);
        buf_printf(b, "%" PRIi64, value);
}

static void json_duration(struct buf *b, const char *key, uint64_t ms) {
        char d[32];

        config_format_duration(ms, d, sizeof d);
        json_str(b, key, d);
}

/* encoding/json's float32: the shortest digits that read back as the same
 * float32, in plain decimal unless below 1e-6 or from 1e21 on. The digits
 * are placed by hand: printf's %f would print the float's exact binary
 * value, not the shortest one. */
static void json_float32(struct buf *b, const char *key, float value) {
        char e[48], digits[16];
        int prec, exp, nd = 0;
        float a = value < 0 ? -value : value;

        for (prec = 1; prec < 9; prec++) {
                snprintf(e, sizeof e, "%.*e", prec - 1, (double) value);
                if (strtof(e, NULL) == value)
                        break;
        }
        json_key(b, key);
        if (a == 0) {
                buf_puts(b, value == 0 && signbit(value) ? "-0" : "0");
                return;
        }
        if (a < 1e-6f || a >= 1e21f) {
                char *x = strchr(e, 'e');

                /* Go writes e-07 as e-7 (and e+21 stays). */
                if (x && x[1] == '-' && x[2] == '0')
                        memmove(x + 2, x + 3, strlen(x + 3) + 1);
                buf_puts(b, e);
                return;
        }
        for (const char *p = e; *p && *p != 'e'; p++)
                if (*p >= '0' && *p <= '9')
                        digits[nd++] = *p;
        exp = atoi(strchr(e, 'e') + 1);
        if (value < 0)
                buf_putc(b, '-');
        if (exp < 0) {
                buf_puts(b, "0.");
                for (int i = -1; i > exp; i--)
                        buf_putc(b, '0');
                buf_put(b, digits, (size_t) nd);
                return;
        }
        for (int i = 0; i <= exp; i++)
                buf_putc(b, i < nd ? digits[i] : '0');
        if (nd > exp + 1) {
                buf_putc(b, '.');
                buf_put(b, digits + exp + 1, (size_t) (nd - exp - 1));
        }
}

/* null when empty, as encoding/json prints a nil slice. */
static void json_strv(struct buf *b, const char *key, char *const *v, size_t n) {
        json_key(b, key);
        if (n == 0) {
                buf_puts(b, "null");
                return;
        }
        buf_putc(b, '[');
        for (size_t i = 0; i < n; i++) {
                if (i > 0)
                        buf_putc(b, ',');
                json_put_string(b, v[i]);
        }
        buf_putc(b, ']');
}

/* DetectLocal.ClusterCIDRs: the comma-separated flag value, split as
 * upstream's conversion does (strings.Split, no trimming). */
static void json_cluster_cidrs(struct buf *b, const char *cidrs) {
        json_key(b, "ClusterCIDRs");
        if (!cidrs) {
                buf_puts(b, "null");
                return;
        }
        buf_putc(b, '[');
        for (const char *p = cidrs;;) {
                size_t len = strcspn(p, ",");
                _cleanup_free_ char *one = xstrndup(p, len);
                if (p != cidrs)
                        buf_putc(b, ',');
                json_put_string(b, one);
                p += len;
                if (!*p)
                        break;
                p++;
        }
        buf_putc(b, ']');
}

/* logsapi's TextOptions/JSONOptions: splitStream omitted when false,
 * infoBufferSize always, as a quantity string. */
static void json_log_output(struct buf *b, const char *name, const struct config_log_output *o) {
        char q[32];
        config_value_format_quantity(o->info_buffer_size, q, sizeof q);
        buf_printf(b, "\"%s\":{", name);
        if (o->split_stream)
                buf_puts(b, "\"splitStream\":true,");
        buf_printf(b, "\"infoBufferSize\":\"%s\"}", q);
}

/* logsapi.LoggingConfiguration (k8s.io/component-base/logs/api/v1), whose
 * tags are lowerCamel: format is omitted when empty, vmodule when it has no
 * entries; options always holds both formats. */
static void json_logging(struct buf *b, const struct kproxy_config *c) {
        json_key(b, "Logging");
        buf_putc(b, '{');
        if (c->logging_format)
                json_str(b, "format", c->logging_format);
        json_duration(b, "flushFrequency", c->log_flush_frequency_ms);
        json_int(b, "verbosity", c->verbosity);
        if (c->log_vmodule) {
                json_key(b, "vmodule");
                buf_putc(b, '[');
                for (const char *p = c->log_vmodule; *p;) {
                        size_t len = strcspn(p, ","), plen = strcspn(p, "=");
                        _cleanup_free_ char *pattern = xstrndup(p, plen);

                        if (p != c->log_vmodule)
                                buf_putc(b, ',');
                        buf_putc(b, '{');
                        json_str(b, "filePattern", pattern);
                        buf_printf(b, ",\"verbosity\":%.*s}", (int) (len - plen - 1), p + plen + 1);
                        p += len;
                        if (*p)
                                p++;
                }
                buf_putc(b, ']');
        }
        json_key(b, "options");
        buf_putc(b, '{');
        json_log_output(b, "text", &c->log_text);
        buf_putc(b, ',');
        json_log_output(b, "json", &c->log_json);
        buf_putc(b, '}');
        buf_putc(b, '}');
}

int config_format_json(const struct kproxy_config *c, struct buf *out) {
        const struct config_sync *sync;
        struct buf b = BUF_INIT;

        assert(c);
        assert(out);

        sync = config_mode_sync(c);
        buf_putc(&b, '{');
        json_key(&b, "Linux");
        buf_putc(&b, '{');
        json_key(&b, "Conntrack");
        buf_putc(&b, '{');
        json_int(&b, "MaxPerCore", c->conntrack.max_per_core);
        json_int(&b, "Min", c->conntrack.min);
        json_duration(&b, "TCPEstablishedTimeout", c->conntrack.tcp_established_timeout_ms);
        json_duration(&b, "TCPCloseWaitTimeout", c->conntrack.tcp_close_wait_timeout_ms);
        json_bool(&b, "TCPBeLiberal", c->conntrack.tcp_be_liberal);
        json_duration(&b, "UDPTimeout", c->conntrack.udp_timeout_ms);
        json_duration(&b, "UDPStreamTimeout", c->conntrack.udp_stream_timeout_ms);
        buf_putc(&b, '}');
        json_bool(&b, "MasqueradeAll", sync->masquerade_all);
        json_int(&b, "OOMScoreAdj", c->has_oom_score_adj ? c->oom_score_adj : DEFAULT_OOM_SCORE_ADJ);
        buf_putc(&b, '}');
        json_key(&b, "Windows");
        buf_puts(&b, "{\"RunAsService\":false}");
        json_key(&b, "FeatureGates");
        buf_putc(&b, '{');
        /* Kept sorted by name, as encoding/json orders map keys. */
        for (size_t i = 0; i < c->n_feature_gates; i++)
                json_bool(&b, c->feature_gates[i].name, c->feature_gates[i].enabled);
        buf_putc(&b, '}');
        json_key(&b, "ClientConnection");
        buf_putc(&b, '{');
        json_str(&b, "Kubeconfig", c->kubeconfig);
        json_str(&b, "AcceptContentTypes", c->accept_content_types);
        json_str(&b, "ContentType", c->content_type);
        json_float32(&b, "QPS", c->qps);
        json_int(&b, "Burst", c->burst);
        buf_putc(&b, '}');
        json_logging(&b, c);
        json_str(&b, "HostnameOverride", c->hostname_override);
        json_str(&b, "BindAddress", c->bind_address);
        json_str(&b, "HealthzBindAddress", c->healthz_bind_address);
        json_str(&b, "MetricsBindAddress", c->metrics_bind_address);
        json_bool(&b, "BindAddressHardFail", c->bind_address_hard_fail);
        json_bool(&b, "EnableProfiling", c->enable_profiling);
        json_str(&b, "ShowHiddenMetricsForVersion", c->show_hidden_metrics_for_version);
        json_str(&b, "Mode", proxy_mode_to_string(c->mode));
        json_key(&b, "IPTables");
        buf_putc(&b, '{');
        json_int(&b, "MasqueradeBit", c->iptables.masquerade_bit);
        json_bool(&b, "LocalhostNodePorts", c->iptables.localhost_nodeports);
        buf_putc(&b, '}');
        json_key(&b, "IPVS");
        buf_puts(&b, "{\"Scheduler\":\"\",\"ExcludeCIDRs\":null,\"StrictARP\":false,\"TCPTimeout\":\"0s\","
                     "\"TCPFinTimeout\":\"0s\",\"UDPTimeout\":\"0s\"}");
        json_key(&b, "Winkernel");
        buf_puts(&b, "{\"NetworkName\":\"\",\"SourceVip\":\"\",\"EnableDSR\":false,\"RootHnsEndpointName\":\"\","
                     "\"ForwardHealthCheckVip\":false}");
        json_key(&b, "NFTables");
        buf_putc(&b, '{');
        json_int(&b, "MasqueradeBit", c->nftables.masquerade_bit);
        buf_putc(&b, '}');
        json_str(&b, "DetectLocalMode", detect_local_mode_to_string(c->detect_local_mode));
        json_key(&b, "DetectLocal");
        buf_putc(&b, '{');
        json_str(&b, "BridgeInterface", c->bridge_interface);
        json_cluster_cidrs(&b, c->cluster_cidr);
        json_str(&b, "InterfaceNamePrefix", c->interface_name_prefix);
        buf_putc(&b, '}');
        json_strv(&b, "NodePortAddresses", c->nodeport_addresses, c->n_nodeport_addresses);
        json_duration(&b, "SyncPeriod", sync->sync_period_ms);
        json_duration(&b, "MinSyncPeriod", sync->min_sync_period_ms);
        json_duration(&b, "ConfigSyncPeriod", c->config_sync_period_ms);
        buf_putc(&b, '}');

        buf_put(out, b.data, b.len);
        buf_done(&b);
        return 0;
}

int config_write(const struct kproxy_config *c, const char *path) {
        _cleanup_close_ int fd = -EBADF;
        struct buf b = BUF_INIT;
        int r = 0;

        assert(c);
        assert(path);

        format_yaml(c, &b);
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
