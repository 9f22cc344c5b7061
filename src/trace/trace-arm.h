/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The trace's table in the kernel (trace.h): created, owned by the
 * socket that creates it, deleted. Internal to src/trace/.
 */
#include <stddef.h>
#include <stdint.h>

struct mnl_socket;
struct trace_filter;

/* A NETLINK_NETFILTER socket that also hears trace notifications.
 * Returns 0 or -errno. */
int trace_socket_open(struct mnl_socket **ret);
/* Sends the messages in buf (len bytes) and reads one ack for each of
 * the sequence numbers first..last, passing over anything else the socket
 * hears. Returns 0 or the first error the kernel acked. */
int trace_nl_send(struct mnl_socket *nl, char *buf, size_t len, uint32_t first, uint32_t last);
/* A fresh block of 16 sequence numbers: its first. */
uint32_t trace_nl_seq(void);
/* Creates table TRACE_TABLE of f's family, owned by nl, with chains on
 * prerouting and output (priority -350, before conntrack and every other
 * table) holding the rule that marks f's packets. Returns 0 or -errno. */
int trace_arm(struct mnl_socket *nl, const struct trace_filter *f);
/* Deletes table TRACE_TABLE of family 4 or 6 through nl. Returns 0,
 * -ENOENT when there is none, or -errno. */
int trace_disarm(struct mnl_socket *nl, uint8_t family);
