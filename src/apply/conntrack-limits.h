/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The node's conntrack set-up, as kube-proxy does it before its first sync
 * (its --conntrack-* flags and the config file's conntrack section): the
 * table size, its hash size, and the TCP and UDP timeouts.
 *
 * Where kproxy differs from upstream 1.34, on purpose:
 *  - nf_conntrack_max is only ever raised, never lowered (upstream writes
 *    any other value, and fails where the file is read-only even when the
 *    node already allows more: kubernetes/kubernetes#141943, fixed the same
 *    way later in #142035);
 *  - a setting that cannot be written is a warning naming it, never the
 *    end of the process: a read-only /sys or /proc/sys (containers, LXC,
 *    kind, or nf_conntrack_max seen from a network namespace) must not
 *    put the proxy in a crash loop.
 */
#include <stdbool.h>
#include <stdint.h>

struct config_conntrack;

/* What to write; a zero (false) field leaves the kernel's value alone. */
struct conntrack_limits {
        uint64_t max;                   /* nf_conntrack_max; the hash size follows (max / 4) */
        uint64_t tcp_established_s;     /* nf_conntrack_tcp_timeout_established */
        uint64_t tcp_close_wait_s;      /* nf_conntrack_tcp_timeout_close_wait */
        bool tcp_be_liberal;            /* nf_conntrack_tcp_be_liberal = 1 */
        uint64_t udp_s;                 /* nf_conntrack_udp_timeout */
        uint64_t udp_stream_s;          /* nf_conntrack_udp_timeout_stream */
};

/* The CPUs upstream counts: those online in /sys/devices/system/cpu/online
 * (under root, see apply/sysctl.h), not the process's affinity, so a
 * CPU-limited pod still sizes the table for the node. At least 1. */
unsigned conntrack_limits_cpus(const char *root);

/* Upstream's arithmetic: max = maxPerCore x cpus, or min if that is more,
 * and 0 (leave alone) when maxPerCore is 0; timeouts in whole seconds. */
void conntrack_limits_from_config(const struct config_conntrack *c, unsigned cpus, struct conntrack_limits *ret);

/* Writes the settings that differ from the kernel's, each logged. A
 * setting that may not be changed here (sysctl_not_permitted()) is a
 * warning naming it; the others are still written. Returns 0 when every
 * setting is as asked or only not permitted, else the first other -errno
 * (also logged, as a warning: the caller decides whether it is fatal). */
int conntrack_limits_apply(const char *root, const struct conntrack_limits *l);
