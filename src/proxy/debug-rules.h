/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The daemon's /debug/rules: what the running mode writes for the model
 * the daemon holds, per IP family (the text `kproxy render` prints for
 * that model: the iptables-restore input, the nft script, userspace mode's
 * plan; socket load balancing's map entries beside them), headed by
 * whether changes are still on their way to the kernel. Read-only.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct backend_ops;
struct host_facts;
struct inet_cidr;
struct kproxy_config;
struct mhd_reply;
struct model;

struct debug_rules_node {
        const struct model *m;
        const struct kproxy_config *cfg;
        const char *node_name;
        const struct host_facts *host;
        const struct inet_cidr *service_cidrs;
        size_t n_service_cidrs;
        const struct backend_ops *ops;          /* the mode */
        const struct backend_ops *companion;    /* socket load balancing, when it runs; or NULL */
        const uint8_t *families;
        size_t n_families;
        size_t pending;                         /* services changed since the last successful sync */
        bool too_soon;                          /* asked again within its period: 429, nothing rendered */
};

void debug_rules(const struct debug_rules_node *n, struct mhd_reply *reply);
