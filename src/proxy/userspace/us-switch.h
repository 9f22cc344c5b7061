/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Userspace mode and the node around it: its set-up, what is left when
 * the node switches between it and a NAT mode or cleans up, and the
 * conntrack entries each switch leaves misleading. Private to
 * proxy/userspace/; the operations of the same names in struct
 * backend_ops.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct host_facts;
struct kproxy_config;
struct us_frontends;

int us_switch_setup(const struct kproxy_config *c, struct host_facts *host, const char *node_name, const char *root);
bool us_switch_leftovers(const struct host_facts *h, bool running);
int us_switch_remove_leftovers(const struct host_facts *h, bool running);
int us_switch_cleanup(const struct kproxy_config *c, const struct host_facts *h);
/* Into this mode, once it serves (after its first sync): the conntrack
 * entries DNAT-ed by the NAT mode before it, to the addresses and ports
 * of the frontends, go (for each of the families). */
void us_switch_flush_nat(const struct us_frontends *f, const uint8_t *families, size_t n_families);
