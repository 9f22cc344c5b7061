/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The configuration's enums by name, one table each (config-enums.c), and
 * the sync settings each proxy mode reads.
 */
#include "config/config-types.h"

/* The release of Kubernetes whose kube-proxy kproxy follows (its flags,
 * fields, feature gates and metrics): what --version prints, in upstream's
 * form, for the scripts that parse it. */
#define CONFIG_KUBE_VERSION "v1.34.2"

/* The modes kproxy runs in, as --help and every message name them. ipvs,
 * upstream's third, is parsed (configurations written for kube-proxy name
 * it) and refused at start-up: this kernel interface is not kproxy's. */
#define PROXY_MODE_NAMES "iptables, nftables or userspace"
#define PROXY_MODE_CHOICE "must be " PROXY_MODE_NAMES " (ipvs is parsed, and refused at start-up)"

const char *proxy_mode_to_string(enum proxy_mode m);
enum proxy_mode proxy_mode_from_string(const char *s);
const char *detect_local_mode_to_string(enum detect_local_mode m);
enum detect_local_mode detect_local_mode_from_string(const char *s);

/* The sync settings of the selected mode (iptables or nftables). */
const struct config_sync *config_mode_sync(const struct kproxy_config *c);
