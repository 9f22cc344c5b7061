/* SPDX-License-Identifier: Apache-2.0 */
#include "kube/sources.h"

#include <stdio.h>

#define SELECTOR "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name"

void kube_sources(const char *node, uint64_t idle_ms, kube_keys_fn keys, char field[300],
                  struct kube_watch_opts ret[_INTAKE_SOURCE_MAX]) {
        snprintf(field, 300, "metadata.name=%s", node);
        ret[INTAKE_SERVICES] = (struct kube_watch_opts) {"/api/v1/services", SELECTOR, NULL, 0, idle_ms, keys};
        ret[INTAKE_SLICES] = (struct kube_watch_opts) {"/apis/discovery.k8s.io/v1/endpointslices", SELECTOR, NULL, 0,
                                                       idle_ms, keys};
        ret[INTAKE_NODE] = (struct kube_watch_opts) {"/api/v1/nodes", NULL, field, 0, idle_ms, keys};
        /* Optional: an API server older than 1.33 answers 404. */
        ret[INTAKE_SERVICE_CIDRS] = (struct kube_watch_opts) {"/apis/networking.k8s.io/v1/servicecidrs", NULL, NULL,
                                                              0, idle_ms, keys, .optional = true};
}
