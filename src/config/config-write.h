/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The effective configuration written out: --write-config-to's YAML and
 * /configz's JSON (config-write.c).
 */
struct buf;
struct kproxy_config;

/* Writes the effective configuration as a KubeProxyConfiguration YAML
 * document (what --write-config-to does). Returns 0 or -errno. */
int config_write(const struct kproxy_config *c, const char *path);

/* Appends the effective configuration to out as the JSON object upstream's
 * /configz serves under "kubeproxy.config.k8s.io": its internal
 * KubeProxyConfiguration as encoding/json writes it (Go field names, compact,
 * durations as Go strings), holding the same settings as config_write().
 * Returns 0 (out of memory aborts, as everywhere buf is used). */
int config_format_json(const struct kproxy_config *c, struct buf *out);
