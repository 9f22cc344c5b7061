/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * --config: reading the file, its defaulting and precedence (config-file.c).
 * Private to src/config/.
 */
struct kproxy_config;

/* Reads c->config_file and adopts it with upstream's precedence. */
int config_file_load(struct kproxy_config *c);
