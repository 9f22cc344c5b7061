/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What a trace marks (trace/trace.h): the packets of one filter, in the
 * table of its name. The bottom of src/trace/.
 */
#include <stdbool.h>
#include <stdint.h>

#include "util/inet.h"

#define TRACE_TABLE "kproxy-trace"

struct trace_filter {
        uint8_t family;                 /* 4 or 6 */
        struct inet_addr src, dst;
        bool has_src, has_dst;
        int proto;                      /* IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP; 0: any */
        uint16_t dport, sport;          /* 0: any */
};
