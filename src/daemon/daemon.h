/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The node proxy: wires the API client, the sync loop, the health server
 * and signals onto one event loop, and runs until SIGTERM/SIGINT, which
 * leave every rule in place (traffic keeps flowing; changes wait for the
 * next start). Also --cleanup and --init-only.
 */
#include <stdint.h>

#include "apply/iptables-backend.h"

struct kproxy_config;

struct daemon_opts {
        uint64_t watch_idle_timeout_ms;         /* 0: the API client's default */
        enum iptables_backend iptables_backend; /* --iptables-backend; 0 is auto */
};

/* Returns the process exit status. */
int daemon_run(const struct kproxy_config *c, const struct daemon_opts *o);
/* --cleanup: both modes' rules, iptables mode's from each backend that
 * holds some (only from o's iptables_backend when not auto). */
int daemon_cleanup(const struct kproxy_config *c, const struct daemon_opts *o);
/* --init-only: the node set-up (daemon/setup.h), without contacting the API
 * server; fails when a setting could not be written for another reason
 * than not being allowed here. */
int daemon_init_only(const struct kproxy_config *c);
