/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of resolving the connection: do what kube-proxy's createClient()
 * does through client-go's clientcmd, and where kproxy cannot do the same
 * (exec and auth-provider plugins, basic auth, impersonation, proxies,
 * tls-server-name), refuse at startup with the file and field named rather
 * than connect differently. Everything a request needs is read here, once,
 * so the HTTP client never touches the kubeconfig or its paths again; the
 * only exception is the token file, which service-account tokens rotate.
 *
 * Where kproxy is stricter than client-go, on purpose: a context, cluster or
 * user that is named but missing is an error (client-go quietly goes on
 * with an empty one), and so is a client key without a certificate.
 */
#include "kube/kubeconfig.h"
#include "kube/conn-read.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/decode-field.h"
#include "kube/load.h"
#include "util/cleanup.h"
#include "util/log.h"

_Static_assert(KUBE_LOAD_ERRLEN <= KUBE_CONN_ERRLEN, "YAML errors are written into the caller's buffer");

/* --- Reading a kubeconfig ------------------------------------------------ */

struct kc {
        const char *path;       /* as given, for messages */
        char *dir;              /* absolute directory of path, for relative paths */
        json_t *root;
        char *err;
};

/* Writes "path: at.key: message" into k->err and returns r. */
static int kc_fail(const struct kc *k, int r, const char *at, const char *key, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
static int kc_fail(const struct kc *k, int r, const char *at, const char *key, const char *fmt, ...) {
        char raw[KUBE_CONN_ERRLEN];
        va_list ap;
        int n;

        if (!at && !key)
                n = snprintf(raw, sizeof raw, "%s: ", k->path);
        else
                n = snprintf(raw, sizeof raw, "%s: %s%s%s: ", k->path, at ? at : "", at && key ? "." : "",
                             key ? key : "");
        /* A long path may truncate the line; it stays one line. */
        if (n >= 0 && n < KUBE_CONN_ERRLEN) {
                va_start(ap, fmt);
                vsnprintf(raw + n, (size_t) (KUBE_CONN_ERRLEN - n), fmt, ap);
                va_end(ap);
        }
        /* Names from the file are quoted in it: a newline in one (YAML
         * folds a CR into one) is escaped, not a line break. */
        kube_field_escape(k->err, KUBE_CONN_ERRLEN, raw);
        return r;
}

/* Whether a field is set in the sense Go's omitempty uses: null, "", [] and
 * {} are all "not set". */
static bool json_present(const json_t *v) {
        if (!v || json_is_null(v))
                return false;
        if (json_is_string(v))
                return json_string_length(v) > 0;
        if (json_is_array(v))
                return json_array_size(v) > 0;
        if (json_is_object(v))
                return json_object_size(v) > 0;
        return true;
}

/* obj.key as a string; NULL when absent, null or "" (Go's zero value). */
static int kc_string(const struct kc *k, const json_t *obj, const char *at, const char *key, const char **ret) {
        const json_t *v = obj ? json_object_get(obj, key) : NULL;

        if (!v || json_is_null(v)) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_string(v))
                return kc_fail(k, -EINVAL, at, key, "must be a string");
        if (strlen(json_string_value(v)) != json_string_length(v))
                return kc_fail(k, -EINVAL, at, key, "must not contain NUL bytes");
        *ret = json_string_length(v) > 0 ? json_string_value(v) : NULL;
        return 0;
}

static int kc_bool(const struct kc *k, const json_t *obj, const char *at, const char *key, bool *ret) {
        const json_t *v = obj ? json_object_get(obj, key) : NULL;

        if (v && !json_is_null(v) && !json_is_boolean(v))
                return kc_fail(k, -EINVAL, at, key, "must be true or false");
        *ret = v && json_is_true(v);
        return 0;
}

static int kc_object(const struct kc *k, const json_t *obj, const char *at, const char *key, const json_t **ret) {
        const json_t *v = obj ? json_object_get(obj, key) : NULL;

        if (v && !json_is_null(v) && !json_is_object(v))
                return kc_fail(k, -EINVAL, at, key, "must be a mapping");
        *ret = v && json_is_object(v) ? v : NULL;
        return 0;
}

static const char *entry_name(const json_t *item) {
        const char *n = json_string_value(json_object_get(item, "name"));
        return n ? n : "";
}

/* Finds the entry called name in the top-level list (contexts, clusters,
 * users) and returns its inner mapping (NULL if empty) and index. Returns
 * 1 if found, 0 if not. Like client-go's conversion, a name used twice is
 * an error even when it is not the one asked for. */
static int kc_find(const struct kc *k, const char *list_key, const char *inner_key, const char *name,
                   const json_t **ret, size_t *ret_index) {
        const json_t *list = json_object_get(k->root, list_key), *item, *inner = NULL;
        size_t i, found_index = 0;
        bool found = false;
        char at[64];
        int r;

        if (!list || json_is_null(list))
                return 0;
        if (!json_is_array(list))
                return kc_fail(k, -EINVAL, NULL, list_key, "must be a list");
        json_array_foreach(list, i, item) {
                const char *n;

                snprintf(at, sizeof at, "%s[%zu]", list_key, i);
                if (!json_is_object(item))
                        return kc_fail(k, -EINVAL, at, NULL, "must be a mapping");
                r = kc_string(k, item, at, "name", &n);
                if (r < 0)
                        return r;
                n = n ? n : "";
                for (size_t j = 0; j < i; j++)
                        if (strcmp(entry_name(json_array_get(list, j)), n) == 0)
                                return kc_fail(k, -EINVAL, at, "name", "duplicate name \"%s\" (also %s[%zu])", n,
                                               list_key, j);
                if (!found && strcmp(n, name) == 0) {
                        r = kc_object(k, item, at, inner_key, &inner);
                        if (r < 0)
                                return r;
                        found = true;
                        found_index = i;
                }
        }
        if (!found)
                return 0;
        *ret = inner;
        *ret_index = found_index;
        return 1;
}

/* Relative paths in a kubeconfig are relative to the file's directory, as
 * client-go's ResolveLocalPaths() makes them, whatever the working
 * directory. */
static int kc_path(const struct kc *k, const char *p, char **ret) {
        if (p[0] == '/')
                *ret = strdup(p);
        else if (asprintf(ret, "%s%s%s", k->dir, strcmp(k->dir, "/") == 0 ? "" : "/", p) < 0)
                *ret = NULL;
        return *ret ? 0 : -ENOMEM;
}

/* Loads PEM bytes from obj.data_key (base64) or obj.file_key (a path). They
 * must contain marker, so that a DER file or doubly-encoded data fails here,
 * naming the field, and not later inside the TLS library. *ret stays NULL
 * when neither is set. */
static int kc_pem(const struct kc *k, const json_t *obj, const char *at, const char *file_key, const char *data_key,
                  const char *marker, const char *what, char **ret, size_t *ret_len) {
        _cleanup_(kube_conn_blob_done) struct blob b = {NULL, 0};
        _cleanup_free_ char *path = NULL;
        const char *file, *data;
        int r;

        r = kc_string(k, obj, at, file_key, &file);
        if (r < 0)
                return r;
        r = kc_string(k, obj, at, data_key, &data);
        if (r < 0)
                return r;
        /* client-go's validation rejects both; say which one to drop. */
        if (file && data)
                return kc_fail(k, -EINVAL, at, data_key, "%s is set too; set only one of them", file_key);
        if (data) {
                r = kube_conn_base64_decode(data, strlen(data), &b);
                if (r == -EINVAL)
                        return kc_fail(k, r, at, data_key, "not valid base64");
                if (r < 0)
                        return r;
                if (!memmem(b.data, b.len, marker, strlen(marker)))
                        return kc_fail(k, -EINVAL, at, data_key, "does not contain a PEM %s", what);
        } else if (file) {
                r = kc_path(k, file, &path);
                if (r < 0)
                        return r;
                r = kube_conn_read_file(path, &b);
                if (r < 0)
                        return kc_fail(k, r, at, file_key, "cannot read %s: %s", path, strerror(-r));
                if (!memmem(b.data, b.len, marker, strlen(marker)))
                        return kc_fail(k, -EINVAL, at, file_key, "%s does not contain a PEM %s", path, what);
        } else {
                *ret = NULL;
                *ret_len = 0;
                return 0;
        }
        *ret = TAKE_PTR(b.data);
        *ret_len = b.len;
        b.len = 0;
        return 0;
}

static int kc_cluster(const struct kc *k, const json_t *cl, const char *at, bool master_given, struct kube_conn *c) {
        const char *s;
        int r;

        r = kc_string(k, cl, at, "proxy-url", &s);
        if (r < 0)
                return r;
        if (s)
                return kc_fail(k, -EINVAL, at, "proxy-url", "is not supported; kproxy connects to the server directly");
        r = kc_string(k, cl, at, "tls-server-name", &s);
        if (r < 0)
                return r;
        /* client-go drops tls-server-name when --master overrides the server. */
        if (s && !master_given)
                return kc_fail(k, -EINVAL, at, "tls-server-name",
                               "is not supported; use a server address that the certificate names");
        r = kc_bool(k, cl, at, "insecure-skip-tls-verify", &c->insecure);
        if (r < 0)
                return r;
        r = kc_pem(k, cl, at, "certificate-authority", "certificate-authority-data", PEM_CERT, "certificate",
                   &c->ca_pem, &c->ca_pem_len);
        if (r < 0)
                return r;
        /* client-go's transport refuses the same combination. */
        if (c->insecure && c->ca_pem)
                return kc_fail(k, -EINVAL, at, "insecure-skip-tls-verify",
                               "cannot be combined with a certificate authority; remove one of them");
        return 0;
}

static int kc_user(const struct kc *k, const json_t *u, const char *at, struct kube_conn *c) {
        static const struct {
                const char *key, *problem;
        } unsupported[] = {
                {"username", "basic authentication (username/password) is not supported; use a token or a client certificate"},
                {"password", "basic authentication (username/password) is not supported; use a token or a client certificate"},
                {"exec", "exec credential plugins are not supported; use a token, tokenFile or client certificate"},
                {"auth-provider", "auth-provider plugins are not supported; use a token, tokenFile or client certificate"},
                {"as", "impersonation is not supported"},
                {"as-uid", "impersonation is not supported"},
                {"as-groups", "impersonation is not supported"},
                {"as-user-extra", "impersonation is not supported"},
        };
        const char *token, *token_file, *cert, *cert_data, *key, *key_data, *problem;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(unsupported); i++)
                if (json_present(json_object_get(u, unsupported[i].key)))
                        return kc_fail(k, -EINVAL, at, unsupported[i].key, "%s", unsupported[i].problem);

        if ((r = kc_string(k, u, at, "token", &token)) < 0 ||
            (r = kc_string(k, u, at, "tokenFile", &token_file)) < 0 ||
            (r = kc_string(k, u, at, "client-certificate", &cert)) < 0 ||
            (r = kc_string(k, u, at, "client-certificate-data", &cert_data)) < 0 ||
            (r = kc_string(k, u, at, "client-key", &key)) < 0 ||
            (r = kc_string(k, u, at, "client-key-data", &key_data)) < 0)
                return r;
        if ((cert || cert_data) && !(key || key_data))
                return kc_fail(k, -EINVAL, at, cert ? "client-certificate" : "client-certificate-data",
                               "needs client-key or client-key-data too");
        if ((key || key_data) && !(cert || cert_data))
                return kc_fail(k, -EINVAL, at, key ? "client-key" : "client-key-data",
                               "needs client-certificate or client-certificate-data too");
        r = kc_pem(k, u, at, "client-certificate", "client-certificate-data", PEM_CERT, "certificate", &c->cert_pem,
                   &c->cert_pem_len);
        if (r < 0)
                return r;
        r = kc_pem(k, u, at, "client-key", "client-key-data", PEM_KEY, "private key", &c->key_pem, &c->key_pem_len);
        if (r < 0)
                return r;

        /* token wins over tokenFile, but the file is still kept: client-go
         * re-reads it too, so a rotated file takes over on the next 401. */
        if (token) {
                problem = kube_conn_token_problem(token);
                if (problem)
                        return kc_fail(k, -EINVAL, at, "token", "%s", problem);
                c->token = strdup(token);
                if (!c->token)
                        return -ENOMEM;
        }
        if (token_file) {
                r = kc_path(k, token_file, &c->token_file);
                if (r < 0)
                        return r;
                if (!token) {
                        r = kube_conn_token_read(c->token_file, &c->token, &problem);
                        if (r == -EINVAL)
                                return kc_fail(k, r, at, "tokenFile", "%s %s", c->token_file, problem);
                        if (r < 0)
                                return kc_fail(k, r, at, "tokenFile", "cannot read %s: %s", c->token_file,
                                               strerror(-r));
                }
        }
        return 0;
}

/* current-context → context → cluster and user, then --master on top. */
static int kc_resolve(const struct kc *k, const char *master, struct kube_conn *c) {
        const json_t *ctx = NULL, *cl = NULL, *u = NULL;
        const char *cur, *cl_name = NULL, *u_name = NULL, *server = master, *problem;
        char ctx_at[64] = "", cl_at[64] = "", u_at[64] = "";
        size_t i = 0;
        int r;

        if (!json_is_object(k->root))
                return kc_fail(k, -EINVAL, NULL, NULL, "not a kubeconfig (the document is not a mapping)");
        r = kc_string(k, k->root, NULL, "current-context", &cur);
        if (r < 0)
                return r;
        if (!cur && !master)
                return kc_fail(k, -EINVAL, NULL, "current-context", "not set (and no --master given)");
        if (cur) {
                r = kc_find(k, "contexts", "context", cur, &ctx, &i);
                if (r < 0)
                        return r;
                if (r == 0)
                        return kc_fail(k, -EINVAL, NULL, "current-context", "context \"%s\" not found in contexts",
                                       cur);
                snprintf(ctx_at, sizeof ctx_at, "contexts[%zu].context", i);
                if ((r = kc_string(k, ctx, ctx_at, "cluster", &cl_name)) < 0 ||
                    (r = kc_string(k, ctx, ctx_at, "user", &u_name)) < 0)
                        return r;
                if (!cl_name && !master)
                        return kc_fail(k, -EINVAL, ctx_at, "cluster", "not set");
        }
        if (cl_name) {
                r = kc_find(k, "clusters", "cluster", cl_name, &cl, &i);
                if (r < 0)
                        return r;
                if (r == 0)
                        return kc_fail(k, -EINVAL, ctx_at, "cluster", "cluster \"%s\" not found in clusters", cl_name);
                snprintf(cl_at, sizeof cl_at, "clusters[%zu].cluster", i);
        }
        /* No user is allowed, as in client-go: the connection is anonymous. */
        if (u_name) {
                r = kc_find(k, "users", "user", u_name, &u, &i);
                if (r < 0)
                        return r;
                if (r == 0)
                        return kc_fail(k, -EINVAL, ctx_at, "user", "user \"%s\" not found in users", u_name);
                snprintf(u_at, sizeof u_at, "users[%zu].user", i);
        }

        if (!master) {
                r = kc_string(k, cl, cl_at, "server", &server);
                if (r < 0)
                        return r;
                if (!server)
                        return kc_fail(k, -EINVAL, cl_at, "server", "not set");
        }
        r = kube_conn_server_normalize(server, &c->server, &problem);
        if (r == -EINVAL && master) {
                snprintf(k->err, KUBE_CONN_ERRLEN, "--master \"%s\": %s", master, problem);
                return r;
        }
        if (r == -EINVAL)
                return kc_fail(k, r, cl_at, "server", "\"%s\" %s", server, problem);
        if (r < 0)
                return r;

        /* client-go reads neither credentials nor TLS settings for a plain
         * HTTP server, so a token never crosses the wire in clear text. */
        if (!kube_conn_server_is_https(c->server))
                return 0;
        if (cl) {
                r = kc_cluster(k, cl, cl_at, master, c);
                if (r < 0)
                        return r;
        }
        if (u) {
                r = kc_user(k, u, u_at, c);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* jansson frees without wiping; clear the values that are secrets first.
 * (libyaml's own buffers are beyond reach and stay as they are.) */
static void kc_wipe_secrets(json_t *root) {
        static const char *const keys[] = {"token", "password", "client-key-data"};
        json_t *users = json_object_get(root, "users"), *item, *u, *v;
        size_t i;

        json_array_foreach(users, i, item) {
                u = json_object_get(item, "user");
                for (size_t j = 0; j < ELEMENTSOF(keys); j++) {
                        v = json_object_get(u, keys[j]);
                        if (json_is_string(v))
                                explicit_bzero((char *) json_string_value(v), json_string_length(v));
                }
        }
}

static void kc_done(struct kc *k) {
        if (k->root) {
                kc_wipe_secrets(k->root);
                json_decref(k->root);
        }
        free(k->dir);
}

struct kc_docs {
        json_t *root;
        unsigned n;
};

static int kc_take_document(void *userdata, const json_t *doc) {
        struct kc_docs *d = userdata;

        if (json_is_null(doc))
                return 0;
        if (d->n++ > 0)
                return -E2BIG;
        d->root = json_incref((json_t *) doc);
        return 0;
}

static int kc_dir(const char *path, char **ret) {
        const char *slash = strrchr(path, '/');
        _cleanup_free_ char *cwd = NULL;

        if (path[0] == '/') {
                *ret = strndup(path, slash == path ? 1 : (size_t) (slash - path));
                return *ret ? 0 : -ENOMEM;
        }
        cwd = getcwd(NULL, 0);
        if (!cwd)
                return -errno;
        if (!slash)
                *ret = TAKE_PTR(cwd);
        else if (asprintf(ret, "%s/%.*s", cwd, (int) (slash - path), path) < 0)
                return -ENOMEM;
        return 0;
}

static int kc_read(struct kc *k) {
        _cleanup_(kube_conn_blob_done) struct blob b = {NULL, 0};
        struct kc_docs docs = {NULL, 0};
        int r;

        r = kube_conn_read_file(k->path, &b);
        if (r == -EFBIG)
                snprintf(k->err, KUBE_CONN_ERRLEN, "%s: larger than %u MiB (the kubeconfig size cap)", k->path,
                         MAX_FILE_SIZE >> 20);
        else if (r < 0)
                snprintf(k->err, KUBE_CONN_ERRLEN, "%s: cannot read kubeconfig: %s", k->path, strerror(-r));
        if (r < 0)
                return r;
        r = kube_yaml_parse(k->path, b.data, b.len, kc_take_document, &docs, k->err);
        if (r == -E2BIG) {
                json_decref(docs.root);
                return kc_fail(k, -EINVAL, NULL, NULL, "holds more than one YAML document");
        }
        if (r < 0) {
                json_decref(docs.root);
                return r;
        }
        /* An empty file is an empty config, as in client-go's Load(). */
        k->root = docs.root ? docs.root : json_object();
        if (!k->root)
                return -ENOMEM;
        return kc_dir(k->path, &k->dir);
}

/* --- The API ------------------------------------------------------------- */

int kube_conn_resolve(const char *kubeconfig, const char *master, struct kube_conn *ret,
                      char err[KUBE_CONN_ERRLEN]) {
        _cleanup_(kube_conn_done) struct kube_conn c = {0};
        _cleanup_(kc_done) struct kc k = {.path = kubeconfig, .err = err};
        const char *problem;
        int r;

        err[0] = '\0';
        master = kube_conn_isempty(master) ? NULL : master;
        if (kube_conn_isempty(kubeconfig)) {
                if (!master)
                        return kube_conn_in_cluster(NULL, NULL, ret, err);
                /* --master alone: that server, no credentials (client-go's
                 * empty config with the server overridden). */
                r = kube_conn_server_normalize(master, &c.server, &problem);
                if (r == -EINVAL)
                        snprintf(err, KUBE_CONN_ERRLEN, "--master \"%s\": %s", master, problem);
        } else {
                r = kc_read(&k);
                if (r >= 0)
                        r = kc_resolve(&k, master, &c);
        }
        if (r < 0) {
                if (!err[0])
                        snprintf(err, KUBE_CONN_ERRLEN, "%s: %s", kube_conn_isempty(kubeconfig) ? "--master" : kubeconfig,
                                 strerror(-r));
                return r;
        }
        *ret = c;
        c = (struct kube_conn) {0};
        return 0;
}

/* Returns -ENOENT when there is no token file to re-read. On failure the
 * old token stays, as client-go keeps serving a stale token when the file
 * cannot be read. */
