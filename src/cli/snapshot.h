/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The cluster as the API server holds it now, for a command that reads it
 * once (`kproxy explain` without a STATE file): the daemon's four lists
 * (Services, EndpointSlices, this Node, ServiceCIDRs), through the same
 * client and intake, then nothing more. No watch is kept.
 */
#include <stdint.h>

struct admit_policy;
struct intake;
struct kproxy_config;

/* Lists through c's API connection (--kubeconfig, --master, or in
 * cluster) into a new intake for node, waiting at most timeout_ms; the
 * services' claimed addresses are then decided by admit (NULL: all
 * admitted; borrowed by the intake, which reads it no more since no
 * object comes in). Returns 0, or -errno with the problem logged. */
int cli_snapshot(const struct kproxy_config *c, const char *node, const struct admit_policy *admit,
                 uint64_t timeout_ms, struct intake **ret);
