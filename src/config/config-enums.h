/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The configuration's enums by name, one table each (config-enums.c), and
 * the sync settings each proxy mode reads.
 */
#include "config/config-types.h"

const char *proxy_mode_to_string(enum proxy_mode m);
enum proxy_mode proxy_mode_from_string(const char *s);
const char *detect_local_mode_to_string(enum detect_local_mode m);
enum detect_local_mode detect_local_mode_from_string(const char *s);

/* The sync settings of the selected mode (iptables or nftables). */
const struct config_sync *config_mode_sync(const struct kproxy_config *c);
