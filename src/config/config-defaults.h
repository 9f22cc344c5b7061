/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Upstream's values that more than one file of src/config/ needs:
 * config_init(), the file's v1alpha1 defaulting, --help and the writer
 * must agree on them. Private to src/config/.
 */
#include <stdint.h>

#define API_VERSION "kubeproxy.config.k8s.io/v1alpha1"
#define KIND "KubeProxyConfiguration"
#define HEALTHZ_PORT 10256              /* ports.ProxyHealthzPort */
#define METRICS_PORT 10249              /* ports.ProxyStatusPort */
#define DEFAULT_OOM_SCORE_ADJ (-999)    /* qos.KubeProxyOOMScoreAdj */
#define DEFAULT_CONTENT_TYPE "application/vnd.kubernetes.protobuf"
#define DEFAULT_MASQUERADE_BIT 14

/* Durations are kept in milliseconds. */
#define MS_SECOND UINT64_C(1000)
#define MS_MINUTE (60 * MS_SECOND)
#define MS_HOUR (60 * MS_MINUTE)
