/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The source filter of a frontend socket: loadBalancerSourceRanges in
 * userspace mode. A classic BPF socket filter on the listening TCP socket
 * (or the bound UDP one) lets through only packets whose source address is
 * in the allowed CIDRs, so a SYN or datagram from anywhere else is dropped
 * in the kernel before any handshake or read, as iptables mode's
 * KUBE-PROXY-FIREWALL drops it: such a client gets nothing, not even a
 * reset. Accepted connections inherit the filter of their listener.
 */
#include <stddef.h>
#include <stdint.h>

#include "util/inet.h"

/* The most CIDRs of one family a filter can hold (the kernel's 4096
 * instructions, at most 13 an IPv6 CIDR). */
#define FWD_FILTER_MAX_CIDRS 300

/* Attaches to fd (a socket of family 4 or 6) a filter passing only sources
 * in allow (those of other families are left out); with n == 0, removes
 * any filter (every source passes). Replaces what fd had. Returns 0,
 * -E2BIG for more than FWD_FILTER_MAX_CIDRS CIDRs of the family, or
 * -errno from the kernel. */
int fwd_filter_sources(int fd, uint8_t family, const struct inet_cidr *allow, size_t n);
