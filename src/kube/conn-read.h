/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The primitives both the kubeconfig reader (kubeconfig.c) and the
 * in-cluster configuration (conn.c) read a connection with (secret-aware
 * buffers, file reads, base64, tokens, server URLs). Private to src/kube/.
 */
#include <stdbool.h>
#include <stddef.h>

#define SA_TOKEN_PATH "/var/run/secrets/kubernetes.io/serviceaccount/token"
#define SA_CA_PATH "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
/* Far above any real CA bundle or kubeconfig; stops a mistyped path such
 * as /dev/zero from eating memory. */
#define MAX_FILE_SIZE (16u << 20)

#define PEM_CERT "-----BEGIN CERTIFICATE-----"
#define PEM_KEY "PRIVATE KEY-----"


/* Bytes read from a file or decoded from base64, always NUL-terminated.
 * Keys and tokens pass through these, so they are wiped before free. */
struct blob {
        char *data;
        size_t len;
};

bool kube_conn_isempty(const char *s);
void kube_conn_blob_done(struct blob *b);
void kube_conn_secret_free(char *s, size_t len);
int kube_conn_read_file(const char *path, struct blob *ret);
int kube_conn_base64_decode(const char *in, size_t in_len, struct blob *ret);
const char *kube_conn_token_problem(const char *t);
int kube_conn_token_read(const char *path, char **ret, const char **ret_problem);
int kube_conn_invalid(const char **ret_problem, const char *problem);
int kube_conn_server_normalize(const char *s, char **ret, const char **ret_problem);
bool kube_conn_server_is_https(const char *server);
