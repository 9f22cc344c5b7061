/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Step 1 of the precedence (config.c): the defaults upstream's flags start
 * from, and the destructor of everything a struct kproxy_config owns.
 */
#include "config/config-init.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/config-cmdline.h"
#include "config/config-defaults.h"
#include "config/config-features.h"
#include "config/config-types.h"
#include "config/config-value.h"

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
        free(c->socket_lb_cgroup);
        free(c->socket_lb_pin_dir);
        config_value_strv_free(c->external_ip_cidrs.v, c->external_ip_cidrs.n);
        config_value_strv_free(c->lb_ip_cidrs.v, c->lb_ip_cidrs.n);
        if (c->cmdline)
                free(c->cmdline->hostname_override);
        free(c->cmdline);
        *c = (struct kproxy_config) {};
}
