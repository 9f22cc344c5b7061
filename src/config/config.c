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
 *
 * The module's files, one concept each:
 *
 *   config.c            defaults (step 1), the enum tables, and
 *                       config_finish() (steps 3 and 4)
 *   config-flags.c      the flag table: what each flag sets, and --help
 *   config-args.c       argv in pflag's syntax onto the flag table (step 2)
 *   config-file.c       reading --config, v1alpha1 defaulting, precedence
 *   config-decode.c     a KubeProxyConfiguration YAML document onto a struct
 *   config-validate.c   upstream's validation
 *   config-write.c      --write-config-to
 *   config-features.c   feature gates: upstream's rules over config-gates.c,
 *                       the table tools/gen-gates.py writes
 *   config-value.c      Go's syntax of bools, numbers and addresses; YAML scalars
 *   config-duration.c   Go's time.Duration syntax
 */
#include "config/config.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config-internal.h"
#include "util/buf.h"
#include "util/cleanup.h"

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

int config_error(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        config_vmessage(fmt, ap);
        va_end(ap);
        return -EINVAL;
}

void config_print(const char *fmt, ...) {
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

const struct config_sync *config_mode_sync(const struct kproxy_config *c) {
        assert(c);
        return c->mode == PROXY_MODE_NFTABLES ? &c->nftables : &c->iptables;
}

/* ---- defaults ---------------------------------------------------------------------- */

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
        config_value_strv_free(c->nodeport_addresses, c->n_nodeport_addresses);
        free(c->kubeconfig);
        free(c->content_type);
        free(c->accept_content_types);
        free(c->show_hidden_metrics_for_version);
        config_feature_gates_clear(c);
        free(c->logging_format);
        free(c->log_vmodule);
        free(c->config_file);
        free(c->write_config_to);
        free(c->master);
        free(c->state_dir);
        if (c->cmdline)
                free(c->cmdline->hostname_override);
        free(c->cmdline);
        *c = (struct kproxy_config) {};
}

/* ---- finishing ------------------------------------------------------------------------ */

/* addressFromDeprecatedFlags: port 0 turns the server off, any other port
 * completes an address that has none. */
static int address_from_port_flag(char **addr, int32_t port) {
        if (port == 0)
                return config_value_str_set(addr, NULL);
        return config_value_append_port(addr, (unsigned) port);
}

/* Without --config: what upstream's Complete() and processV1Alpha1Flags()
 * do with the flags that are not bound to the configuration directly. */
static int config_fold_flags(struct kproxy_config *c) {
        const struct config_cmdline *cl = c->cmdline;
        bool ipvs = c->mode == PROXY_MODE_IPVS;
        int r;

        /* Upstream has one internal sync period for whichever backend runs,
         * so the iptables flags set the nftables periods too. */
        if (!ipvs && config_flags_changed(c, "iptables-sync-period"))
                c->iptables.sync_period_ms = c->nftables.sync_period_ms = cl->iptables_sync_period_ms;
        if (!ipvs && config_flags_changed(c, "iptables-min-sync-period"))
                c->iptables.min_sync_period_ms = c->nftables.min_sync_period_ms = cl->iptables_min_sync_period_ms;
        if (ipvs && config_flags_changed(c, "ipvs-sync-period"))
                c->iptables.sync_period_ms = c->nftables.sync_period_ms = cl->ipvs_sync_period_ms;
        if (ipvs && config_flags_changed(c, "ipvs-min-sync-period"))
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
                return config_value_strv_push(&c->nodeport_addresses, &c->n_nodeport_addresses, "primary",
                                              strlen("primary"));
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
        config_value_trim(&src, &len);
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

int config_finish(struct kproxy_config *c) {
        int r;

        assert(c);
        assert(c->cmdline);

        r = c->config_file ? config_file_load(c) : config_fold_flags(c);
        if (r < 0)
                return r;
        r = config_platform_defaults(c);
        if (r < 0)
                return r;
        r = config_resolve_hostname(c);
        if (r < 0)
                return r;
        /* Where upstream's Complete() calls SetFromMap(): after the file has
         * replaced the flags, before validation. */
        r = config_features_check(c);
        if (r < 0)
                return r;
        c->nftables_shards = c->cmdline->nftables_shards;
        return config_validate(c);
}
