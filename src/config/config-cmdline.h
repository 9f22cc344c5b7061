/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What the command line holds beyond struct kproxy_config: which flags were
 * given, and the flags upstream binds outside its configuration. Set up by
 * config_init(), written by the flags (config-flags.c), read by
 * config_finish() and the file's precedence (config-file.c). Private to
 * src/config/.
 */
#include <stdbool.h>
#include <stdint.h>

#define MAX_FLAGS 96

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
