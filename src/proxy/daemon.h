/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The node proxy: wires the API client, the sync loop, the health server
 * and signals onto one event loop, and runs until SIGTERM/SIGINT, which
 * leave every rule in place (traffic keeps flowing; changes wait for the
 * next start). Also --cleanup and --init-only.
 */
#include <stdint.h>

struct kproxy_config;

struct daemon_opts {
        uint64_t watch_idle_timeout_ms;         /* 0: the API client's default */
};

/* Returns the process exit status. */
int daemon_run(const struct kproxy_config *c, const struct daemon_opts *o);
int daemon_cleanup(const struct kproxy_config *c);
/* --init-only: the node set-up (proxy/setup.h), without contacting the API
 * server; fails when a setting could not be written for another reason
 * than not being allowed here. */
int daemon_init_only(const struct kproxy_config *c);
