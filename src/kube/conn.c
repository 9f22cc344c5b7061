/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The API connection's parts that do not come from a kubeconfig: the
 * in-cluster configuration (service-account token and CA, the
 * KUBERNETES_SERVICE_* environment), token re-reads, and freeing one.
 */
#include "kube/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/conn-read.h"
#include "kube/load.h"
#include "util/cleanup.h"
#include "util/log.h"


int kube_conn_in_cluster(const char *token_path, const char *ca_path, struct kube_conn *ret,
                         char err[KUBE_CONN_ERRLEN]) {
        _cleanup_(kube_conn_done) struct kube_conn c = {0};
        _cleanup_(kube_conn_blob_done) struct blob ca = {NULL, 0};
        _cleanup_free_ char *url = NULL;
        const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT"), *problem;
        bool brackets;
        int r;

        err[0] = '\0';
        token_path = token_path ? token_path : SA_TOKEN_PATH;
        ca_path = ca_path ? ca_path : SA_CA_PATH;
        if (kube_conn_isempty(host) || kube_conn_isempty(port)) {
                snprintf(err, KUBE_CONN_ERRLEN,
                         "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set "
                         "(or give --kubeconfig or --master)");
                return -EINVAL;
        }
        /* net.JoinHostPort(): an IPv6 address needs brackets before ":port". */
        brackets = strchr(host, ':') && host[0] != '[';
        if (asprintf(&url, "https://%s%s%s:%s", brackets ? "[" : "", host, brackets ? "]" : "", port) < 0)
                return -ENOMEM;
        r = kube_conn_server_normalize(url, &c.server, &problem);
        if (r == -EINVAL)
                snprintf(err, KUBE_CONN_ERRLEN, "in-cluster config: KUBERNETES_SERVICE_HOST/PORT give \"%s\", which %s",
                         url, problem);
        if (r < 0)
                return r;

        r = kube_conn_token_read(token_path, &c.token, &problem);
        if (r == -EINVAL)
                snprintf(err, KUBE_CONN_ERRLEN, "in-cluster config: service account token %s %s", token_path, problem);
        else if (r < 0)
                snprintf(err, KUBE_CONN_ERRLEN, "in-cluster config: cannot read service account token %s: %s",
                         token_path, strerror(-r));
        if (r < 0)
                return r;
        c.token_file = strdup(token_path);
        if (!c.token_file)
                return -ENOMEM;

        /* As rest.InClusterConfig(): a CA that cannot be loaded is logged and
         * the system's store is used, which will then fail to verify the
         * API server, with an error that points at TLS. */
        r = kube_conn_read_file(ca_path, &ca);
        if (r < 0)
                log_warning_errno(r, "Cannot read in-cluster CA %s, using the system's CA store", ca_path);
        else if (!memmem(ca.data, ca.len, PEM_CERT, strlen(PEM_CERT)))
                log_warning("In-cluster CA %s holds no PEM certificate, using the system's CA store", ca_path);
        else {
                c.ca_pem = TAKE_PTR(ca.data);
                c.ca_pem_len = ca.len;
                ca.len = 0;
        }

        *ret = c;
        c = (struct kube_conn) {0};
        return 0;
}

int kube_conn_reload_token(struct kube_conn *c) {
        const char *problem;
        char *t;
        int r;

        if (!c->token_file)
                return -ENOENT;
        r = kube_conn_token_read(c->token_file, &t, &problem);
        if (r < 0)
                return r;
        kube_conn_secret_free(c->token, 0);
        c->token = t;
        return 0;
}

void kube_conn_done(struct kube_conn *c) {
        if (!c)
                return;
        kube_conn_secret_free(c->token, 0);
        kube_conn_secret_free(c->key_pem, c->key_pem_len);
        free(c->server);
        free(c->ca_pem);
        free(c->cert_pem);
        free(c->token_file);
        *c = (struct kube_conn) {0};
}
