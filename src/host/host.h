/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What kproxy needs to know about the machine it programs: its interface
 * addresses (for nodePortAddresses), its hostname (the default node name),
 * and three capabilities that change the rules: iptables' --random-fully,
 * the nfacct counters, and the conntrack tcp_be_liberal sysctl; and whether
 * the iptables tools are iptables-nft. Probed once at start-up, read-only;
 * `render` lets each be overridden by a flag.
 */
#include <stdbool.h>
#include <stddef.h>

#include "util/inet.h"

struct host_facts {
        struct inet_cidr *addrs;        /* interface addresses; addr is the host IP, not masked */
        size_t n_addrs;
        char *hostname;                 /* lower-cased */
        bool random_fully;
        bool iptables_nft;              /* the iptables tools are iptables-nft, not legacy */
        bool nfacct;
        bool tcp_be_liberal;
};

/* Probes this machine (this network namespace). Never fails on a missing
 * capability, which just reads as false; returns -ENOMEM on allocation
 * failure. */
int host_probe(struct host_facts *ret);
void host_facts_done(struct host_facts *h);

/* Parses "ADDR/PREFIX,..." keeping the host part of each address (these are
 * interface addresses, not networks). Returns 0 or -EINVAL. */
int host_parse_addresses(const char *s, struct inet_cidr **ret, size_t *ret_n);
