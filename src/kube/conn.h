/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A connection to the API server, as kube/kubeconfig.h resolves one: its
 * server, CA, client certificate or token; the in-cluster configuration
 * (the service account's token and CA, KUBERNETES_SERVICE_HOST/PORT); and
 * a token re-read.
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

/* In-cluster only, with the paths overridable for tests (NULL: defaults). */
int kube_conn_in_cluster(const char *token_path, const char *ca_path, struct kube_conn *ret,
                         char err[KUBE_CONN_ERRLEN]);
/* Re-reads token_file into token; 0, or -errno. */
int kube_conn_reload_token(struct kube_conn *c);
void kube_conn_done(struct kube_conn *c);
