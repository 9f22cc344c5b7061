/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The node set-up kube-proxy does before its first sync, and all that
 * --init-only does (an init container runs it with privileges so that the
 * proxy itself can run with fewer):
 *
 *  1. conntrack (modes whose traffic it carries: backend_ops.conntrack):
 *     the table and hash sizes, TCP and UDP timeouts,
 *     tcp_be_liberal (apply/conntrack-limits.h), before the host is probed,
 *     so a tcp_be_liberal just written already leaves out iptables mode's
 *     INVALID drop rule in the first sync;
 *  2. the host probe (host/host.h);
 *  3. the mode's own (backend_ops.setup: iptables mode's
 *     net.ipv4.conf.all.route_localnet=1 when localhost NodePorts are on,
 *     and upstream's nfacct counters).
 *
 * Settings live under a root directory (apply/sysctl.h), the machine's
 * own unless the tests point it elsewhere.
 */
struct backend_ops;
struct kproxy_config;
struct host_facts;

/* Sets the node up and probes it into *ret_host (to free with
 * host_facts_done()). Every failure is logged as a warning naming the
 * setting. Returns 0 when everything is set or could only not be set
 * because this process may not (a read-only /sys, say); -ENOMEM; or the
 * first other -errno, which the daemon carries on after and --init-only
 * exits on. *ret_host is written in every case but -ENOMEM. */
int setup_node(const struct kproxy_config *c, const struct backend_ops *ops, const char *node_name, const char *root,
               struct host_facts *ret_host);

/* --oom-score-adj: /proc/self/oom_score_adj (under root). A value the
 * process may not set (lowering it needs CAP_SYS_RESOURCE) is a warning.
 * Returns 0 or -errno (logged). */
int setup_oom_score_adj(const struct kproxy_config *c, const char *root);
