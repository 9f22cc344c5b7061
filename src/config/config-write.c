/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --write-config-to: the effective configuration as the YAML document
 * upstream's encoder writes (every field, sorted), which kproxy and
 * kube-proxy both read back to the same settings. Strings are left plain
 * only where a YAML reader types them back as strings.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config-internal.h"
#include "util/buf.h"
#include "util/cleanup.h"

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
