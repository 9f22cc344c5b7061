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

struct kube_conn {
        char *server;           /* "https://host:port" (no trailing slash) */
        char *ca_pem;           /* NULL: the system's CA store */
        size_t ca_pem_len;
        char *cert_pem, *key_pem;       /* client certificate, or NULL */
        size_t cert_pem_len, key_pem_len;
        char *token;            /* bearer token, or NULL */
        char *token_file;       /* re-read on 401 (service-account tokens rotate), or NULL */
        bool insecure;          /* insecure-skip-tls-verify */
};

#define KUBE_CONN_ERRLEN 512

/* Upstream's order: --kubeconfig (its current context, with --master
 * overriding the server) if given; else --master alone; else in-cluster.
 * Returns 0, or -errno with one line in err naming the file and field. */
int kube_conn_resolve(const char *kubeconfig, const char *master, struct kube_conn *ret,
                      char err[KUBE_CONN_ERRLEN]);
/* In-cluster only, with the paths overridable for tests (NULL: defaults). */
int kube_conn_in_cluster(const char *token_path, const char *ca_path, struct kube_conn *ret,
                         char err[KUBE_CONN_ERRLEN]);
/* Re-reads token_file into token; 0, or -errno. */
int kube_conn_reload_token(struct kube_conn *c);
void kube_conn_done(struct kube_conn *c);
