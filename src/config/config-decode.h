/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A KubeProxyConfiguration YAML document onto a struct kproxy_config
 * (config-decode.c). Private to src/config/.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kproxy_config;
struct yaml_document_s;         /* yaml_document_t */

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
