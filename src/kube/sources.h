/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What the proxy reads from the API server, one watch per intake source
 * (kube/intake.h): Services and EndpointSlices without the headless ones
 * and those of another proxy (upstream's label selector), this Node by
 * name, and the ServiceCIDRs (optional: older servers have none). The
 * daemon watches them; `kproxy explain` lists them once.
 */
#include <stddef.h>
#include <stdint.h>

#include "kube/client.h"
#include "kube/intake.h"

/* Fills ret for node (field holds the node's field selector for as long
 * as ret is used: 300 bytes), with idle_ms and keys in each. */
void kube_sources(const char *node, uint64_t idle_ms, kube_keys_fn keys, char field[300],
                  struct kube_watch_opts ret[_INTAKE_SOURCE_MAX]);
