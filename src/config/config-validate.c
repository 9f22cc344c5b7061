/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Upstream's validation.Validate() over the resolved configuration, in
 * upstream's order. Only the first problem is reported, naming the file's
 * field when the settings came from --config and the flag otherwise.
 */
#include "config/config-validate.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "config/config-duration.h"
#include "config/config-enums.h"
#include "config/config-features.h"
#include "config/config-message.h"
#include "config/config-types.h"
#include "config/config-value.h"
#include "util/buf.h"
#include "util/cleanup.h"

/* Reports one invalid value, naming the file's field when the settings came
 * from --config and the flag otherwise. Returns -EINVAL. */
static int invalid(const struct kproxy_config *c, const char *field, const char *flag, const char *value,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int invalid(const struct kproxy_config *c, const char *field, const char *flag, const char *value,
                   const char *fmt, ...) {
        struct buf why = BUF_INIT;
        va_list ap;

        va_start(ap, fmt);
        buf_vprintf(&why, fmt, ap);
        va_end(ap);
        if (c->config_file || !flag)
                config_error("%s: invalid value \"%s\" for %s: %s", c->config_file ? c->config_file : "configuration",
                             value ? value : "", field, why.data);
        else
                config_error("invalid value \"%s\" for flag --%s: %s", value ? value : "", flag, why.data);
        buf_done(&why);
        return -EINVAL;
}

/* upstream's validateDualStackCIDRStrings() over clusterCIDR split at commas. */
static int validate_cluster_cidrs(const struct kproxy_config *c) {
        const char *why = NULL;
        int families[2] = {};
        size_t n = 0;

        for (const char *p = c->cluster_cidr;;) {
                size_t len = strcspn(p, ",");
                char cidr[INET6_ADDRSTRLEN + 8] = "";

                if (n == ELEMENTSOF(families)) {        /* a third one */
                        why = "must be one CIDR or an IPv4,IPv6 pair";
                        break;
                }
                if (len < sizeof cidr)
                        memcpy(cidr, p, len);
                families[n] = len < sizeof cidr ? config_value_cidr_family(cidr) : 0;
                if (families[n++] == 0) {
                        why = "must be a CIDR such as 10.244.0.0/16, or an IPv4,IPv6 pair of them";
                        break;
                }
                if (!p[len])
                        break;
                p += len + 1;
        }
        if (!why && n == 2 && families[0] == families[1])
                why = "must be one CIDR or an IPv4,IPv6 pair";
        if (why)
                return invalid(c, "clusterCIDR", "cluster-cidr", c->cluster_cidr, "%s", why);
        return 0;
}

static bool minor_version_valid(const char *s) {
        const char *dot = strchr(s, '.');
        char major[16];
        uint64_t v;

        if (!dot || (size_t) (dot - s) >= sizeof major)
                return false;
        memcpy(major, s, (size_t) (dot - s));
        major[dot - s] = '\0';
        return config_value_parse_decimal(major, UINT32_MAX, &v) == 0 &&
               config_value_parse_decimal(dot + 1, UINT32_MAX, &v) == 0;
}

/* The numbers: mark bits, conntrack, OOM score, client burst, periods. */
static int validate_numbers(const struct kproxy_config *c) {
        const struct config_sync *s = config_mode_sync(c);
        bool nft = c->mode == PROXY_MODE_NFTABLES;
        char a[32], b[32];

        snprintf(a, sizeof a, "%" PRIi32, c->iptables.masquerade_bit);
        if (c->iptables.masquerade_bit < 0 || c->iptables.masquerade_bit > 31)
                return invalid(c, "iptables.masqueradeBit", "iptables-masquerade-bit", a, "must be in 0..31");
        snprintf(a, sizeof a, "%" PRIi32, c->nftables.masquerade_bit);
        if (nft && (c->nftables.masquerade_bit < 0 || c->nftables.masquerade_bit > 31))
                return invalid(c, "nftables.masqueradeBit", NULL, a, "must be in 0..31");
        snprintf(a, sizeof a, "%" PRIi32, c->conntrack.max_per_core);
        if (c->conntrack.max_per_core < 0)
                return invalid(c, "conntrack.maxPerCore", "conntrack-max-per-core", a, "must not be negative");
        snprintf(a, sizeof a, "%" PRIi32, c->conntrack.min);
        if (c->conntrack.min < 0)
                return invalid(c, "conntrack.min", "conntrack-min", a, "must not be negative");
        snprintf(a, sizeof a, "%" PRIi32, c->oom_score_adj);
        if (c->has_oom_score_adj && (c->oom_score_adj < -1000 || c->oom_score_adj > 1000))
                return invalid(c, "oomScoreAdj", "oom-score-adj", a, "must be in -1000..1000");
        snprintf(a, sizeof a, "%" PRIi32, c->burst);
        if (c->burst < 0)
                return invalid(c, "clientConnection.burst", "kube-api-burst", a, "must not be negative");
        if (c->config_sync_period_ms == 0)
                return invalid(c, "configSyncPeriod", "config-sync-period", "0s", "must be greater than 0");

        config_format_duration(s->sync_period_ms, a, sizeof a);
        config_format_duration(s->min_sync_period_ms, b, sizeof b);
        if (s->sync_period_ms == 0)
                return invalid(c, nft ? "nftables.syncPeriod" : "iptables.syncPeriod",
                               c->mode == PROXY_MODE_IPVS ? "ipvs-sync-period" : "iptables-sync-period", a,
                               "must be greater than 0");
        if (s->min_sync_period_ms > s->sync_period_ms)
                return invalid(c, nft ? "nftables.minSyncPeriod" : "iptables.minSyncPeriod",
                               c->mode == PROXY_MODE_IPVS ? "ipvs-min-sync-period" : "iptables-min-sync-period", b,
                               "must not exceed the sync period (%s)", a);
        return 0;
}

/* The addresses: the node's, the servers', NodePorts'; and the hidden
 * metrics' version. */
static int validate_addresses(const struct kproxy_config *c) {
        const char *why;

        if (!c->bind_address || config_value_ip_family(c->bind_address) == 0)
                return invalid(c, "bindAddress", "bind-address", c->bind_address, "must be an IP address");
        if (c->healthz_bind_address && (why = config_value_host_port_problem(c->healthz_bind_address)))
                return invalid(c, "healthzBindAddress", "healthz-bind-address", c->healthz_bind_address, "%s", why);
        if ((why = config_value_host_port_problem(c->metrics_bind_address ? c->metrics_bind_address : "")))
                return invalid(c, "metricsBindAddress", "metrics-bind-address", c->metrics_bind_address, "%s", why);

        for (size_t i = 0; i < c->n_nodeport_addresses; i++) {
                const char *v = c->nodeport_addresses[i];

                if (streq(v, "primary")) {
                        if (c->n_nodeport_addresses != 1)
                                return invalid(c, "nodePortAddresses", "nodeport-addresses", v,
                                               "\"primary\" cannot be combined with CIDRs");
                } else if (config_value_cidr_family(v) == 0)
                        return invalid(c, "nodePortAddresses", "nodeport-addresses", v,
                                       "must be a CIDR, or just \"primary\"");
        }
        if (c->show_hidden_metrics_for_version && !minor_version_valid(c->show_hidden_metrics_for_version))
                return invalid(c, "showHiddenMetricsForVersion", "show-hidden-metrics-for-version",
                               c->show_hidden_metrics_for_version, "must be a version such as 1.30");
        return 0;
}

/* What the detect-local mode needs. */
static int validate_detect_local(const struct kproxy_config *c) {
        switch (c->detect_local_mode) {
        case DETECT_LOCAL_BRIDGE_INTERFACE:
                if (!c->bridge_interface)
                        return invalid(c, "detectLocal.bridgeInterface", "pod-bridge-interface", "",
                                       "must be set in BridgeInterface detect-local mode");
                break;
        case DETECT_LOCAL_INTERFACE_NAME_PREFIX:
                if (!c->interface_name_prefix)
                        return invalid(c, "detectLocal.interfaceNamePrefix", "pod-interface-name-prefix", "",
                                       "must be set in InterfaceNamePrefix detect-local mode");
                break;
        case DETECT_LOCAL_CLUSTER_CIDR:
                if (c->cluster_cidr)
                        return validate_cluster_cidrs(c);
                break;
        default:
                break;
        }
        return 0;
}

/* component-base's logging options, and the gates some of them need. */
static int validate_logging(const struct kproxy_config *c) {
        if (!config_value_logging_format_valid(c->logging_format))
                return invalid(c, "logging.format", "logging-format", c->logging_format, "must be text or json");
        /* component-base registers the json format behind LoggingBetaOptions
         * (beta, on), so AllBeta=false turns it off too. */
        if (streq(c->logging_format, "json") && !config_feature_enabled(c, "LoggingBetaOptions"))
                return invalid(c, "logging.format", "logging-format", c->logging_format,
                               "the json format is off with the LoggingBetaOptions feature gate");
        /* component-base's alpha options, forbidden without their gate. */
        static const struct {
                const char *field, *flag;
                size_t offset;
                bool is_size;
        } alpha[] = {
                {"logging.options.json.splitStream", "log-json-split-stream",
                 offsetof(struct kproxy_config, log_json.split_stream), false},
                {"logging.options.json.infoBufferSize", "log-json-info-buffer-size",
                 offsetof(struct kproxy_config, log_json.info_buffer_size), true},
                {"logging.options.text.splitStream", "log-text-split-stream",
                 offsetof(struct kproxy_config, log_text.split_stream), false},
                {"logging.options.text.infoBufferSize", "log-text-info-buffer-size",
                 offsetof(struct kproxy_config, log_text.info_buffer_size), true},
        };
        for (size_t i = 0; i < ELEMENTSOF(alpha); i++) {
                const char *p = (const char *) c + alpha[i].offset;
                bool set = alpha[i].is_size ? *(const uint64_t *) p != 0 : *(const bool *) p;
                if (set && !config_feature_enabled(c, "LoggingAlphaOptions"))
                        return invalid(c, alpha[i].field, alpha[i].flag, alpha[i].is_size ? "non-zero" : "true",
                                       "Forbidden: Feature LoggingAlphaOptions is disabled");
        }
        if (c->log_vmodule && !streq(c->logging_format, "text"))
                return invalid(c, "logging.vmodule", "vmodule", c->log_vmodule, "only works with the text format");
        return 0;
}

/* The formats asked of the API server: one kproxy reads (it reads either,
 * whichever answers), and an Accept value that is header text: a control
 * character (CR, LF) would end the header and start another. An empty
 * contentType is the default, as upstream's defaulting makes it. */
static int validate_content_types(const struct kproxy_config *c) {
        const char *t = c->content_type, *a = c->accept_content_types;

        if (t && *t && strcmp(t, "application/vnd.kubernetes.protobuf") != 0 && strcmp(t, "application/json") != 0)
                return invalid(c, "clientConnection.contentType", "kube-api-content-type", t,
                               "kproxy reads application/vnd.kubernetes.protobuf and application/json");
        for (const char *p = a; p && *p; p++)
                if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f)
                        return invalid(c, "clientConnection.acceptContentTypes", NULL, "",
                                       "holds a control or non-ASCII character; it must be an Accept header's "
                                       "media types");
        return 0;
}

/* Upstream's validation.Validate() over the resolved configuration, in its
 * order: only the first problem is reported. */
int config_validate(const struct kproxy_config *c) {
        int r;

        r = validate_numbers(c);
        if (r < 0)
                return r;
        r = validate_content_types(c);
        if (r < 0)
                return r;
        r = validate_addresses(c);
        if (r < 0)
                return r;
        r = validate_detect_local(c);
        if (r < 0)
                return r;
        return validate_logging(c);
}
