/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * One NFT_MSG_TRACE notification: where a marked packet was (table,
 * chain, rule) and what the kernel did there, with the packet's headers
 * as they were then. Internal to src/trace/.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/inet.h"

struct nlmsghdr;

struct trace_event {
        uint32_t id;                    /* the packet's, the same in all its events */
        uint8_t family;                 /* 4 or 6 */
        char table[64];
        char chain[256];
        uint64_t handle;                /* the rule's; 0: none (a policy, a return); in an
                                         * x_tables event, the rule's number in its chain */
        bool xt;                        /* from an x_tables (iptables-legacy) table: trace-xt.c */
        uint32_t type;                  /* NFT_TRACETYPE_RULE, _RETURN, _POLICY */
        int32_t verdict;                /* NF_ACCEPT, NF_DROP, NFT_JUMP, ...; for policy: the policy */
        bool has_verdict;
        char target[256];               /* the chain of a jump or goto */
        uint32_t iif, oif;              /* interface indexes; 0: none */
        uint32_t mark;
        /* The packet's addresses and ports as they were then. */
        struct inet_addr src, dst;
        uint8_t proto;
        uint16_t sport, dport;
        bool has_tuple;
};

/* Decodes n. Returns 0, 1 when n is not a trace notification, or -EINVAL
 * for a malformed one. */
int trace_event_parse(const struct nlmsghdr *n, struct trace_event *ret);
/* Reads the addresses, protocol and ports into e (of e->family) from a
 * network header (n bytes) and the transport header after it (tn bytes;
 * t may be NULL); sets has_tuple when the network header is whole. */
void trace_event_headers(struct trace_event *e, const uint8_t *net, size_t n, const uint8_t *t, size_t tn);
/* "accept", "drop", "jump", "goto", "return", "continue", ... */
const char *trace_verdict_name(int32_t verdict);
