/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A struct kproxy_config's life: config_init() gives it upstream's
 * defaults (step 1 of the principle in config.c), config_done() frees what
 * it owns.
 */
struct kproxy_config;

/* Fills c with upstream's defaults. Returns 0 or -ENOMEM. */
int config_init(struct kproxy_config *c);
/* Frees what c owns and zeroes it; c may be half-built, or zeroed. */
void config_done(struct kproxy_config *c);
