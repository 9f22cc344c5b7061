/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * How to reach the API server: from --kubeconfig (clusters, users, contexts
 * as kubectl reads them), from --master, or in-cluster (the service
 * account's token and CA, KUBERNETES_SERVICE_HOST/PORT), with upstream's
 * precedence. Certificates and keys are kept as PEM bytes whether they came
 * from a file or from *-data fields, so the HTTP client uses one path.
 */
#include <stdbool.h>
#include <stddef.h>

#include "kube/conn.h"


/* Upstream's order: --kubeconfig (its current context, with --master
 * overriding the server) if given; else --master alone; else in-cluster.
 * Returns 0, or -errno with one line in err naming the file and field. */
int kube_conn_resolve(const char *kubeconfig, const char *master, struct kube_conn *ret,
                      char err[KUBE_CONN_ERRLEN]);
