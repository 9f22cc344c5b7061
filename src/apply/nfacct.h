/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Upstream's nfacct counters (nfnetlink_acct): iptables mode's rules count
 * dropped INVALID packets and accepted localhost NodePort packets in them,
 * and the metrics server reads them at scrape time. Both over netlink with
 * libmnl, in the current network namespace; nothing is exec'd.
 */
#include <stdbool.h>
#include <stdint.h>

enum nfacct_counter {
        NFACCT_COUNTER_CT_STATE_INVALID,        /* "ct_state_invalid_dropped_pkts" */
        NFACCT_COUNTER_LOCALHOST_NODEPORTS,     /* "localhost_nps_accepted_pkts" */
        _NFACCT_COUNTER_MAX,
};

const char *nfacct_counter_to_string(enum nfacct_counter c);

/* Creates every counter that does not exist yet (an existing one keeps its
 * count). Returns true when all of them exist afterwards; a counter that
 * cannot be created is logged at verbosity 2 and simply not used. */
bool nfacct_ensure_all(void);

/* A reader of the counters: one netlink socket, kept. */
struct nfacct;
/* Returns 0, or -errno when nfnetlink cannot be opened. */
int nfacct_open(struct nfacct **ret);
struct nfacct *nfacct_close(struct nfacct *a);
/* c's packet count. Returns 0, -ENOENT when the counter does not exist, or
 * -errno. Never blocks: the kernel answers within the request. */
int nfacct_get(struct nfacct *a, enum nfacct_counter c, uint64_t *ret_packets);
