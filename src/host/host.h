/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What kproxy needs to know about the machine it programs: its interface
 * addresses (for nodePortAddresses), its hostname (the default node name),
 * and three capabilities that change the rules: iptables' --random-fully,
 * the nfacct counters, and the conntrack tcp_be_liberal sysctl; and which
 * iptables backend to program, the one the node's other agents use.
 * Probed once at start-up, read-only; `render` lets each be overridden by a
 * flag.
 */
#include <stdbool.h>
#include <stddef.h>

#include "apply/iptables-backend.h"
#include "util/inet.h"

struct host_facts {
        struct inet_cidr *addrs;        /* interface addresses; addr is the host IP, not masked */
        size_t n_addrs;
        char *hostname;                 /* lower-cased */
        bool random_fully;
        struct iptables_tools iptables; /* the backend kproxy programs, and how its tools are run */
        bool iptables_nft;              /* that backend is nf_tables, whose tables netlink can read */
        bool iptables_missing;          /* that backend's tools are not installed */
        char iptables_why[320];         /* why that backend, for the log */
        bool iptables_explicit;         /* --iptables-backend named it: leave the other alone */
        bool nfacct;
        bool tcp_be_liberal;
};

/* Probes this machine (this network namespace), but for iptables. Never
 * fails on a missing capability, which just reads as false; returns
 * -ENOMEM on allocation failure. */
int host_probe(struct host_facts *ret);
/* This process's effective capabilities (1 << CAP_...) in *ret, and in
 * *ret_last the highest capability the kernel knows (cap_last_cap; CAP_BPF
 * is 39, from Linux 5.8). Returns 0 or -errno. */
int host_caps(uint64_t *ret, int *ret_last);
/* The machine's hostname, lower-cased (the default node name), in *ret to
 * free. Returns 0, -ENOENT when there is none, or -ENOMEM. */
int host_name(char **ret);
/* Chooses the iptables backend: want, or with IPTABLES_BACKEND_AUTO the
 * one the node uses (iptables_backend_detect()); and how to run its tools,
 * and whether they have --random-fully. When auto-detection picks a backend
 * whose tools are not installed, the other's are used if they are, as
 * before there was a choice, and why says so; when the backend's tools
 * are missing all the same, iptables_missing is set (fatal for iptables
 * mode, nothing to the rest) and random_fully is false. Fills h's iptables
 * fields and random_fully. */
void host_probe_iptables(struct host_facts *h, enum iptables_backend want);
void host_facts_done(struct host_facts *h);

/* Parses "ADDR/PREFIX,..." keeping the host part of each address (these are
 * interface addresses, not networks). Returns 0 or -EINVAL. */
int host_parse_addresses(const char *s, struct inet_cidr **ret, size_t *ret_n);
