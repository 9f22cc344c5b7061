/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * `kproxy trace`: the kernel's own account of real packets. A table of
 * kproxy's (ip|ip6 kproxy-trace) marks the packets that match a filter
 * (meta nftrace set 1) at the first hooks they meet, prerouting and
 * output; nf_tables then reports every chain and rule each marked packet
 * passes, in every table of the family (kproxy's, iptables-nft's, a CNI's,
 * a firewall's), as NFT_MSG_TRACE notifications, which are read here and
 * printed with each rule's text. x_tables (iptables-legacy) reads the same
 * mark and reports its rules through nfnetlink_log (trace-xt.c), on the
 * same socket, so a node on the legacy backend is traced too. The table is
 * created with
 * NFT_TABLE_F_OWNER: the kernel removes it when the process's socket
 * closes, however the process ends; kproxy also deletes it on exit, and
 * `kproxy --cleanup` deletes one left by a kernel without that flag.
 *
 *   trace-arm.c    the table, its chains and its rule (netlink)
 *   trace-event.c  one notification, decoded
 *   trace-xt.c     the legacy tables' reports (nfnetlink_log)
 *   trace-rules.c  the text of the rules it names
 *   trace.c        the loop: arm, read, print, disarm
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "trace/trace-filter.h"

struct trace_opts {
        unsigned max_packets;           /* stop after this many packets (> 0) */
        uint64_t timeout_ms;            /* stop after this long (> 0) */
        bool all_connections;           /* not only the first connection's packets */
        bool json;                      /* a JSON object per event, a line each */
};

/* Arms the trace, reads until a limit, SIGINT or SIGTERM, prints to out,
 * disarms. ready (may be NULL) is called once armed. Returns the packets
 * traced (>= 0), or -errno with the problem logged. */
int trace_run(const struct trace_filter *f, const struct trace_opts *o, FILE *out, void (*ready)(void *ctx),
              void *ctx);

/* Deletes kproxy-trace tables left in this network namespace (both
 * families), and puts back (and logs) a packet logger a killed trace left
 * (trace-xt.h). Returns how many tables were deleted, or -errno. */
int trace_cleanup(void);
