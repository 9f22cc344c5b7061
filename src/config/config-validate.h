/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Upstream's validation of the resolved configuration (config-validate.c).
 * Private to src/config/.
 */
struct kproxy_config;

/* Upstream's validation; prints the first problem and returns -EINVAL. */
int config_validate(const struct kproxy_config *c);
