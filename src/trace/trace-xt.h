/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The trace in x_tables, the kernel's tables behind iptables-legacy. The
 * mark that the trace's own nf_tables chain sets (meta nftrace) is the
 * packet's nf_trace bit, which x_tables reads too: for a marked packet,
 * every rule it passes in a legacy table is reported to the network
 * namespace's logger of the family as "TRACE: table:chain:type:number".
 * While the trace runs, that logger is nfnetlink_log, whose default group
 * (0) the trace's socket takes, one message a packet event; when it ends
 * the logger the namespace had is put back. Nothing is armed when the
 * family has no legacy table. Internal to src/trace/.
 */
#include <stdbool.h>
#include <stdint.h>

struct mnl_socket;
struct nlmsghdr;
struct trace_event;

struct trace_xt {
        uint8_t family;                 /* 4 or 6 */
        bool armed;
        char logger[32];                /* the namespace's logger before ("NONE": none) */
};

/* Takes nfnetlink_log's group 0 on nl and makes nfnetlink_log the
 * family's logger, when the family (4 or 6) has a legacy table; x->armed
 * says whether it did. Returns 0 or -errno (-EBUSY: another program,
 * ulogd say, holds group 0). */
int trace_xt_arm(struct mnl_socket *nl, uint8_t family, struct trace_xt *x);
/* Puts the logger back and gives group 0 up. Returns 0 or -errno. */
int trace_xt_disarm(struct mnl_socket *nl, struct trace_xt *x);
/* Decodes one nfnetlink_log message into e (e->xt set, e->handle the
 * rule's number). Returns 0, 1 when n is not an x_tables trace, or
 * -EINVAL for a malformed one. */
int trace_xt_parse(const struct nlmsghdr *n, struct trace_event *e);
/* A trace killed before it disarmed leaves nfnetlink_log as the family's
 * logger with nobody in group 0: puts the kernel's own logger of the
 * family back. Returns 1 when it did, 0 when there was nothing to do, or
 * -errno. */
int trace_xt_cleanup(uint8_t family);
