/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --config: reading the KubeProxyConfiguration file, upstream's v1alpha1
 * defaulting over what it left zero or null, checks of the fields kproxy
 * reads but does not keep, and adopting the result with upstream's
 * precedence (the principle at the top of config.c).
 */
#include "config/config-file.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <yaml.h>

#include "config/config-decode.h"
#include "config/config-defaults.h"
#include "config/config-duration.h"
#include "config/config-flags.h"
#include "config/config-init.h"
#include "config/config-message.h"
#include "config/config-types.h"
#include "config/config-value.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/yamlcap.h"

#define MAX_FILE_SIZE (4u << 20)        /* a KubeProxyConfiguration is ~2 KiB */

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
        return *p ? 0 : config_value_str_set(p, def);
}

/* A bind address left empty gets host:port, one without a port gets port. */
static int default_bind_address(char **p, const char *host, unsigned port) {
        if (!*p && asprintf(p, "%s:%u", host, port) < 0) {
                *p = NULL;
                return -ENOMEM;
        }
        return config_value_append_port(p, port);
}

/* SetDefaults_KubeProxyConfiguration (v1alpha1) and logsapi's recommended
 * logging defaults, over what the file left zero or null. */
static int file_default_v1alpha1(struct kproxy_config *c, struct config_file_extra *x) {
        bool v4;
        int r;

        r = default_string(&c->bind_address, "0.0.0.0");
        if (r < 0)
                return r;
        /* Like upstream, an unparseable bindAddress picks the IPv6 defaults;
         * validation then reports the bindAddress. */
        v4 = config_value_ip_family(c->bind_address) == AF_INET;
        r = default_bind_address(&c->healthz_bind_address, v4 ? "0.0.0.0" : "[::]", HEALTHZ_PORT);
        if (r < 0)
                return r;
        r = default_bind_address(&c->metrics_bind_address, v4 ? "127.0.0.1" : "[::1]", METRICS_PORT);
        if (r < 0)
                return r;
        if (!x->has_oom_score_adj)
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
        if (x->ipvs_sync_period_ms == 0)
                x->ipvs_sync_period_ms = 30 * MS_SECOND;
        if (!x->has_iptables_masquerade_bit)
                c->iptables.masquerade_bit = DEFAULT_MASQUERADE_BIT;
        if (!x->has_nftables_masquerade_bit)
                c->nftables.masquerade_bit = DEFAULT_MASQUERADE_BIT;
        if (!x->has_localhost_nodeports)
                c->iptables.localhost_nodeports = true;
        c->nftables.localhost_nodeports = false;

        if (!x->has_max_per_core)
                c->conntrack.max_per_core = 32 * 1024;
        if (!x->has_conntrack_min)
                c->conntrack.min = 128 * 1024;
        if (!x->has_tcp_established_timeout)
                c->conntrack.tcp_established_timeout_ms = 24 * MS_HOUR;
        if (!x->has_tcp_close_wait_timeout)
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

/* utilnet.ParsePortRange: "", "port", "low-high" or "low+offset", all in
 * 0..65535. Only validated: the userspace proxy that used it is gone. */
static bool port_range_valid(const char *s) {
        const char *sep = strpbrk(s, "-+");
        char low[16];
        uint64_t lo, hi;

        if (!*s)
                return true;
        if (!sep)
                return config_value_parse_decimal(s, 65535, &lo) == 0;
        if ((size_t) (sep - s) >= sizeof low)
                return false;
        memcpy(low, s, (size_t) (sep - s));
        low[sep - s] = '\0';
        if (config_value_parse_decimal(low, 65535, &lo) < 0 ||
            config_value_parse_decimal(sep + 1, 65535, &hi) < 0)
                return false;
        if (*sep == '+')
                hi += lo;
        return hi <= 65535 && hi >= lo;
}

/* Checks of fields that kproxy decodes but does not keep. */
static int file_check_dropped(const char *path, const struct kproxy_config *c,
                              const struct config_file_extra *x) {
        char a[32], b[32];

        if (x->port_range && !port_range_valid(x->port_range))
                return config_error("%s: invalid value \"%s\" for portRange: must be a port range such as 300-2000",
                                    path, x->port_range);
        if (c->mode != PROXY_MODE_IPVS)
                return 0;
        if (x->ipvs_min_sync_period_ms > x->ipvs_sync_period_ms) {
                config_format_duration(x->ipvs_min_sync_period_ms, a, sizeof a);
                config_format_duration(x->ipvs_sync_period_ms, b, sizeof b);
                return config_error("%s: invalid value \"%s\" for ipvs.minSyncPeriod: must not exceed ipvs.syncPeriod (%s)",
                                    path, a, b);
        }
        for (size_t i = 0; i < x->n_ipvs_exclude_cidrs; i++)
                if (config_value_cidr_family(x->ipvs_exclude_cidrs[i]) == 0)
                        return config_error("%s: invalid value \"%s\" for ipvs.excludeCIDRs[%zu]: must be a CIDR",
                                            path, x->ipvs_exclude_cidrs[i], i);
        return 0;
}

static void file_extra_done(struct config_file_extra *x) {
        config_value_strv_free(x->ipvs_exclude_cidrs, x->n_ipvs_exclude_cidrs);
        free(x->port_range);
}

/* Takes the file's configuration into c: c keeps its command-line-only
 * fields, and logging flags given on the command line win over the file
 * (upstream's copyLogsFromFlags: vmodule entries from flags come first). */
static int file_adopt(struct kproxy_config *c, struct kproxy_config *file) {
        struct kproxy_config old;
        bool v = config_flags_changed(c, "v"), format = config_flags_changed(c, "logging-format"),
             flush = config_flags_changed(c, "log-flush-frequency"), vmodule = config_flags_changed(c, "vmodule");
        int r;

        if (vmodule && file->log_vmodule) {
                r = config_value_str_append(&c->log_vmodule, file->log_vmodule);
                if (r < 0)
                        return r;
        }
        old = *c;
        *c = *file;
        *file = (struct kproxy_config) {};

        c->config_file = TAKE_PTR(old.config_file);
        c->write_config_to = TAKE_PTR(old.write_config_to);
        c->master = TAKE_PTR(old.master);
        c->state_dir = TAKE_PTR(old.state_dir);
        c->socket_lb = old.socket_lb;
        c->socket_lb_cgroup = TAKE_PTR(old.socket_lb_cgroup);
        c->socket_lb_pin_dir = TAKE_PTR(old.socket_lb_pin_dir);
        c->external_ip_cidrs = old.external_ip_cidrs;
        c->lb_ip_cidrs = old.lb_ip_cidrs;
        old.external_ip_cidrs = old.lb_ip_cidrs = (struct config_cidr_list) {0};
        c->cleanup = old.cleanup;
        c->init_only = old.init_only;
        c->show_version = old.show_version;
        c->show_version_raw = old.show_version_raw;
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
        if (config_flags_changed(c, "log-json-split-stream"))
                c->log_json.split_stream = old.log_json.split_stream;
        if (config_flags_changed(c, "log-json-info-buffer-size"))
                c->log_json.info_buffer_size = old.log_json.info_buffer_size;
        if (config_flags_changed(c, "log-text-split-stream"))
                c->log_text.split_stream = old.log_text.split_stream;
        if (config_flags_changed(c, "log-text-info-buffer-size"))
                c->log_text.info_buffer_size = old.log_text.info_buffer_size;
        config_done(&old);
        return 0;
}

/* util/yamlcap.h's caps over the events of the first document, before
 * libyaml's loader builds it: the loader has no bound on depth (and slows
 * down with it: a 100k-deep flow sequence took 27 s), and although it
 * shares an anchor's node among its aliases, the decoder copies a string
 * for every alias of it in a list. A syntax error ends the check quietly:
 * the loader reports it as before. */
static int file_check_caps(const char *path, const char *data, size_t len) {
        _cleanup_(yamlcap_freep) struct yamlcap *cap = yamlcap_new();
        yaml_parser_t parser;
        int r = 0;

        if (!cap || !yaml_parser_initialize(&parser))
                return -ENOMEM;
        yaml_parser_set_input_string(&parser, (const unsigned char *) data, len);
        for (;;) {
                yaml_event_t ev;
                yaml_event_type_t type;
                unsigned long line;

                if (!yaml_parser_parse(&parser, &ev))
                        break;
                type = ev.type;
                line = (unsigned long) ev.start_mark.line + 1;
                r = yamlcap_event(cap, &ev);
                yaml_event_delete(&ev);
                if (r < 0) {
                        if (r != -ENOMEM)
                                r = config_error("%s: line %lu: %s", path, line, yamlcap_problem(cap));
                        break;
                }
                if (type == YAML_DOCUMENT_END_EVENT || type == YAML_STREAM_END_EVENT)
                        break;
        }
        yaml_parser_delete(&parser);
        return r;
}

int config_file_load(struct kproxy_config *c) {
        struct kproxy_config file = {};
        struct config_file_extra x = {};
        _cleanup_free_ char *data = NULL;
        yaml_parser_t parser;
        yaml_document_t doc;
        size_t len = 0;
        int r;

        r = read_file(c->config_file, &data, &len);
        if (r == -EFBIG)
                return config_error("%s: larger than %u MiB (the --config file size cap)", c->config_file,
                                    MAX_FILE_SIZE >> 20);
        if (r < 0) {
                config_print("%s: %s", c->config_file, strerror(-r));
                return r;
        }
        r = file_check_caps(c->config_file, data, len);
        if (r < 0)
                return r;
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

        r = config_decode_document(c->config_file, &doc, &file, &x);
        yaml_document_delete(&doc);
        if (r >= 0)
                r = file_default_v1alpha1(&file, &x);
        if (r >= 0)
                r = file_check_dropped(c->config_file, &file, &x);
        if (r >= 0)
                r = file_adopt(c, &file);
        file_extra_done(&x);
        config_done(&file);
        return r;
}
