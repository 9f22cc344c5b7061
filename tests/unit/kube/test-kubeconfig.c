/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubeconfig: kubeconfigs written into a temporary directory and resolved
 * as kube-proxy would (--kubeconfig, --master, in-cluster), checking the
 * bytes that come out, the precedence, and that each error names the file
 * and the field. No network.
 */
#include <errno.h>
#include <ftw.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/kubeconfig.h"
#include "test.h"
#include "util/buf.h"

#define CA_PEM "-----BEGIN CERTIFICATE-----\nMIIBfakeCA\n-----END CERTIFICATE-----\n"
#define CERT_PEM "-----BEGIN CERTIFICATE-----\nMIIBfakeClient\n-----END CERTIFICATE-----\n"
#define KEY_PEM "-----BEGIN EC PRIVATE KEY-----\nMHcfakeKey\n-----END EC PRIVATE KEY-----\n"

static char tmpdir[] = "/tmp/test-kubeconfig-XXXXXX";

#define CHECK_CONTAINS(hay, needle)                                                             \
        do {                                                                                    \
                const char *_h = (hay), *_n = (needle);                                         \
                if (!_h || !strstr(_h, _n)) {                                                   \
                        fprintf(stderr, "%s:%d: CHECK failed: \"%s\" not in:\n  %s\n", __FILE__, \
                                __LINE__, _n, _h ? _h : "(null)");                              \
                        test_failed_checks++;                                                   \
                }                                                                               \
        } while (0)

/* ---- helpers ---------------------------------------------------------- */

/* Returns tmpdir/name in a static buffer (one at a time is enough). */
static const char *tmp_path(const char *name) {
        static char path[32][512];
        static int next;
        char *p = path[next++ % 32];
        snprintf(p, sizeof path[0], "%s/%s", tmpdir, name);
        return p;
}

/* Writes tmpdir/name (creating one level of subdirectory if needed) with
 * printf-style contents and returns its path. */
static const char *write_tmp(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *write_tmp(const char *name, const char *fmt, ...) {
        const char *path = tmp_path(name);
        const char *slash = strchr(name, '/');
        va_list ap;
        FILE *f;

        if (slash) {
                char dir[512];
                snprintf(dir, sizeof dir, "%s/%.*s", tmpdir, (int) (slash - name), name);
                mkdir(dir, 0700);
        }
        f = fopen(path, "we");
        if (!f) {
                perror(path);
                abort();
        }
        va_start(ap, fmt);
        vfprintf(f, fmt, ap);
        va_end(ap);
        fclose(f);
        return path;
}

/* base64 of s, as kubectl embeds certificates; owned by a static ring. */
static const char *b64(const char *s) {
        static char out[4][1024];
        static int next;
        char *o = out[next++ % 4];
        EVP_EncodeBlock((unsigned char *) o, (const unsigned char *) s, (int) strlen(s));
        return o;
}

static bool mem_eq(const char *data, size_t len, const char *s) {
        return data && len == strlen(s) && memcmp(data, s, len) == 0 && data[len] == '\0';
}

/* One context "ctx" → cluster "c" (with cluster_body) and user "u" (with
 * user_body); each body is YAML lines indented by 4. */
static const char *write_simple(const char *name, const char *cluster_body, const char *user_body) {
        return write_tmp(name,
                         "apiVersion: v1\n"
                         "kind: Config\n"
                         "current-context: ctx\n"
                         "contexts:\n"
                         "- name: ctx\n"
                         "  context:\n"
                         "    cluster: c\n"
                         "    user: u\n"
                         "clusters:\n"
                         "- name: c\n"
                         "  cluster:\n"
                         "%s"
                         "users:\n"
                         "- name: u\n"
                         "  user:\n"
                         "%s",
                         cluster_body, user_body);
}

static bool conn_is_zero(const struct kube_conn *c) {
        static const struct kube_conn zero;
        return memcmp(c, &zero, sizeof zero) == 0;
}

/* ---- kubeconfig contents ---------------------------------------------- */

static void test_data_fields(void) {
        char err[KUBE_CONN_ERRLEN];
        struct kube_conn c = {0};
        char cluster[2048], user[2048], ca_folded[1200];
        const char *ca = b64(CA_PEM);
        const char *path;

        /* A long value folded over two lines must still decode. */
        snprintf(ca_folded, sizeof ca_folded, "%.20s\n      %s", ca, ca + 20);
        snprintf(cluster, sizeof cluster,
                 "    server: https://api.example.com:6443/\n"
                 "    certificate-authority-data: >-\n      %s\n", ca_folded);
        snprintf(user, sizeof user,
                 "    client-certificate-data: %s\n"
                 "    client-key-data: %s\n", b64(CERT_PEM), b64(KEY_PEM));
        path = write_simple("data.conf", cluster, user);

        CHECK(kube_conn_resolve(path, NULL, &c, err) == 0);
        CHECK_STREQ(err, "");
        CHECK_STREQ(c.server, "https://api.example.com:6443");
        CHECK(mem_eq(c.ca_pem, c.ca_pem_len, CA_PEM));
        CHECK(mem_eq(c.cert_pem, c.cert_pem_len, CERT_PEM));
        CHECK(mem_eq(c.key_pem, c.key_pem_len, KEY_PEM));
        CHECK(c.token == NULL && c.token_file == NULL);
        CHECK(!c.insecure);
        kube_conn_done(&c);
        CHECK(conn_is_zero(&c));
}

/* Every padding length: 0, 1 and 2 "=". */
static void test_base64_padding(void) {
        static const char *const pems[] = {
                "-----BEGIN CERTIFICATE-----\nAB\n", "-----BEGIN CERTIFICATE-----\nABC\n",
                "-----BEGIN CERTIFICATE-----\nABCD\n",
        };
        char err[KUBE_CONN_ERRLEN], cluster[512];

        for (size_t i = 0; i < 3; i++) {
                struct kube_conn c = {0};
                snprintf(cluster, sizeof cluster, "    server: https://h\n    certificate-authority-data: %s\n",
                         b64(pems[i]));
                CHECK(kube_conn_resolve(write_simple("pad.conf", cluster, "    token: t\n"), NULL, &c, err) == 0);
                CHECK(mem_eq(c.ca_pem, c.ca_pem_len, pems[i]));
                kube_conn_done(&c);
        }
}

static void test_file_fields_relative(void) {
        char err[KUBE_CONN_ERRLEN], cwd[512], expect[600];
        struct kube_conn c = {0};
        const char *path;

        write_tmp("ca.crt", CA_PEM);
        write_tmp("pki/client.crt", CERT_PEM);
        write_tmp("pki/client.key", KEY_PEM);
        path = write_tmp("rel.conf",
                         "current-context: ctx\n"
                         "contexts: [{name: ctx, context: {cluster: c, user: u}}]\n"
                         "clusters:\n"
                         "- name: c\n"
                         "  cluster:\n"
                         "    server: https://10.0.0.1:6443\n"
                         "    certificate-authority: ca.crt\n"
                         "users:\n"
                         "- name: u\n"
                         "  user:\n"
                         "    client-certificate: pki/client.crt\n"
                         "    client-key: ./pki/client.key\n");

        CHECK(kube_conn_resolve(path, NULL, &c, err) == 0);
        CHECK_STREQ(err, "");
        CHECK(mem_eq(c.ca_pem, c.ca_pem_len, CA_PEM));
        CHECK(mem_eq(c.cert_pem, c.cert_pem_len, CERT_PEM));
        CHECK(mem_eq(c.key_pem, c.key_pem_len, KEY_PEM));
        kube_conn_done(&c);

        /* The paths are relative to the kubeconfig, not to the working
         * directory, also when the kubeconfig path itself is relative. */
        CHECK(getcwd(cwd, sizeof cwd) != NULL);
        CHECK(chdir("/tmp") == 0);
        CHECK(kube_conn_resolve(path + strlen("/tmp/"), NULL, &c, err) == 0);
        CHECK_STREQ(err, "");
        CHECK(mem_eq(c.key_pem, c.key_pem_len, KEY_PEM));
        kube_conn_done(&c);

        /* A relative tokenFile is stored absolute, for later re-reads. */
        write_tmp("pki/token", "rel-token\n");
        path = write_simple("reltok.conf", "    server: https://h\n", "    tokenFile: pki/token\n");
        CHECK(kube_conn_resolve(path + strlen("/tmp/"), NULL, &c, err) == 0);
        snprintf(expect, sizeof expect, "%s/pki/token", tmpdir);
        CHECK_STREQ(c.token_file, expect);
        CHECK_STREQ(c.token, "rel-token");
        kube_conn_done(&c);
        CHECK(chdir(cwd) == 0);
}

static void test_tokens(void) {
        char err[KUBE_CONN_ERRLEN];
        struct kube_conn c = {0};
        const char *tok = write_tmp("tok", "  file-token \n\n");

        CHECK(kube_conn_resolve(write_simple("t1.conf", "    server: https://h\n", "    token: abc.def-ghi\n"), NULL,
                                &c, err) == 0);
        CHECK_STREQ(c.token, "abc.def-ghi");
        CHECK(c.token_file == NULL);
        CHECK(kube_conn_reload_token(&c) == -ENOENT);
        CHECK_STREQ(c.token, "abc.def-ghi");
        kube_conn_done(&c);

        /* tokenFile alone: read now, whitespace trimmed. */
        CHECK(kube_conn_resolve(write_simple("t2.conf", "    server: https://h\n", "    tokenFile: tok\n"), NULL, &c,
                                err) == 0);
        CHECK_STREQ(c.token, "file-token");
        CHECK_STREQ(c.token_file, tok);
        kube_conn_done(&c);

        /* Both: the inline token wins, the file is kept for reloads. */
        CHECK(kube_conn_resolve(write_simple("t3.conf", "    server: https://h\n",
                                             "    token: inline\n    tokenFile: tok\n"),
                                NULL, &c, err) == 0);
        CHECK_STREQ(c.token, "inline");
        CHECK_STREQ(c.token_file, tok);
        CHECK(kube_conn_reload_token(&c) == 0);
        CHECK_STREQ(c.token, "file-token");
        kube_conn_done(&c);

        /* An empty token file, and a token that would break the header. */
        write_tmp("empty-tok", " \n");
        CHECK(kube_conn_resolve(write_simple("t4.conf", "    server: https://h\n", "    tokenFile: empty-tok\n"),
                                NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "t4.conf: users[0].user.tokenFile: ");
        CHECK_CONTAINS(err, "empty-tok is empty");
        CHECK(conn_is_zero(&c));
        CHECK(kube_conn_resolve(write_simple("t5.conf", "    server: https://h\n", "    token: \"a\\r\\nX-Evil: 1\"\n"),
                                NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "t5.conf: users[0].user.token: contains control characters");
}

static void test_current_context(void) {
        char err[KUBE_CONN_ERRLEN];
        struct kube_conn c = {0};
        const char *path = write_tmp("multi.conf",
                                     "current-context: staging\n"
                                     "contexts:\n"
                                     "- name: prod\n"
                                     "  context: {cluster: prod, user: admin}\n"
                                     "- name: staging\n"
                                     "  context: {cluster: staging, user: proxy, namespace: kube-system}\n"
                                     "- name: dev\n"
                                     "  context: {cluster: dev, user: admin}\n"
                                     "clusters:\n"
                                     "- name: dev\n"
                                     "  cluster: {server: 'https://dev:6443'}\n"
                                     "- name: prod\n"
                                     "  cluster: {server: 'https://prod:6443'}\n"
                                     "- name: staging\n"
                                     "  cluster: {server: 'https://staging:6443', insecure-skip-tls-verify: true}\n"
                                     "users:\n"
                                     "- name: admin\n"
                                     "  user: {token: admin-token}\n"
                                     "- name: proxy\n"
                                     "  user: {token: proxy-token}\n");

        CHECK(kube_conn_resolve(path, NULL, &c, err) == 0);
        CHECK_STREQ(err, "");
        CHECK_STREQ(c.server, "https://staging:6443");
        CHECK_STREQ(c.token, "proxy-token");
        CHECK(c.insecure);
        CHECK(c.ca_pem == NULL);
        kube_conn_done(&c);

        /* JSON is YAML too; kubectl accepts both. */
        path = write_tmp("json.conf",
                         "{\"current-context\": \"b\",\n"
                         " \"contexts\": [{\"name\": \"a\", \"context\": {\"cluster\": \"a\", \"user\": \"a\"}},\n"
                         "              {\"name\": \"b\", \"context\": {\"cluster\": \"b\", \"user\": \"b\"}}],\n"
                         " \"clusters\": [{\"name\": \"a\", \"cluster\": {\"server\": \"https://a\"}},\n"
                         "              {\"name\": \"b\", \"cluster\": {\"server\": \"https://b:443\"}}],\n"
                         " \"users\": [{\"name\": \"a\", \"user\": {\"token\": \"ta\"}},\n"
                         "           {\"name\": \"b\", \"user\": {\"token\": \"tb\"}}]}\n");
        CHECK(kube_conn_resolve(path, NULL, &c, err) == 0);
        CHECK_STREQ(c.server, "https://b:443");
        CHECK_STREQ(c.token, "tb");
        kube_conn_done(&c);
}

static void test_master_override(void) {
        char err[KUBE_CONN_ERRLEN], cluster[1024];
        struct kube_conn c = {0};
        const char *path;

        snprintf(cluster, sizeof cluster,
                 "    server: https://old:6443\n"
                 "    certificate-authority-data: %s\n"
                 "    tls-server-name: only-with-master\n", b64(CA_PEM));
        path = write_simple("master.conf", cluster, "    token: t\n");

        /* --master replaces the server and keeps the rest; client-go also
         * drops tls-server-name then. */
        CHECK(kube_conn_resolve(path, "https://NEW.example:8443/", &c, err) == 0);
        CHECK_STREQ(err, "");
        CHECK_STREQ(c.server, "https://NEW.example:8443");
        CHECK(mem_eq(c.ca_pem, c.ca_pem_len, CA_PEM));
        CHECK_STREQ(c.token, "t");
        kube_conn_done(&c);

        /* Without --master, tls-server-name cannot be honoured: refuse. */
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "master.conf: clusters[0].cluster.tls-server-name: is not supported");

        /* --master alone: just that server. Scheme is case-insensitive. */
        CHECK(kube_conn_resolve(NULL, "HTTPS://[fd00::1]:6443", &c, err) == 0);
        CHECK_STREQ(c.server, "https://[fd00::1]:6443");
        CHECK(c.ca_pem == NULL && c.token == NULL && c.cert_pem == NULL && c.key_pem == NULL && !c.insecure);
        kube_conn_done(&c);
        CHECK(kube_conn_resolve("", "http://127.0.0.1:8080", &c, err) == 0);
        CHECK_STREQ(c.server, "http://127.0.0.1:8080");
        kube_conn_done(&c);

        /* A plain-HTTP --master: like client-go, no credentials or TLS
         * settings are loaded for it. */
        CHECK(kube_conn_resolve(path, "http://127.0.0.1:8080", &c, err) == 0);
        CHECK_STREQ(c.server, "http://127.0.0.1:8080");
        CHECK(c.token == NULL && c.ca_pem == NULL);
        kube_conn_done(&c);

        /* No current-context is fine when --master gives the server. */
        path = write_tmp("nocontext.conf", "apiVersion: v1\nkind: Config\n");
        CHECK(kube_conn_resolve(path, "https://m", &c, err) == 0);
        CHECK_STREQ(c.server, "https://m");
        kube_conn_done(&c);
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "nocontext.conf: current-context: not set");

        CHECK(kube_conn_resolve(NULL, "ftp://x", &c, err) == -EINVAL);
        CHECK_STREQ(err, "--master \"ftp://x\": must be an http:// or https:// URL");
        CHECK(conn_is_zero(&c));
}

/* ---- errors ----------------------------------------------------------- */

static void test_missing_references(void) {
        char err[KUBE_CONN_ERRLEN], expect[KUBE_CONN_ERRLEN];
        struct kube_conn c = {0};
        const char *path;

        path = write_tmp("noctx.conf",
                         "current-context: nope\n"
                         "contexts: [{name: ctx, context: {cluster: c, user: u}}]\n");
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EINVAL);
        snprintf(expect, sizeof expect, "%s: current-context: context \"nope\" not found in contexts", path);
        CHECK_STREQ(err, expect);
        CHECK(conn_is_zero(&c));

        path = write_tmp("nocluster.conf",
                         "current-context: b\n"
                         "contexts:\n"
                         "- {name: a, context: {cluster: c, user: u}}\n"
                         "- {name: b, context: {cluster: gone, user: u}}\n"
                         "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                         "users: [{name: u, user: {token: t}}]\n");
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EINVAL);
        snprintf(expect, sizeof expect, "%s: contexts[1].context.cluster: cluster \"gone\" not found in clusters",
                 path);
        CHECK_STREQ(err, expect);

        path = write_tmp("nouser.conf",
                         "current-context: a\n"
                         "contexts: [{name: a, context: {cluster: c, user: ghost}}]\n"
                         "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                         "users: [{name: u, user: {token: t}}]\n");
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EINVAL);
        snprintf(expect, sizeof expect, "%s: contexts[0].context.user: user \"ghost\" not found in users", path);
        CHECK_STREQ(err, expect);

        path = write_tmp("unset.conf",
                         "current-context: a\n"
                         "contexts: [{name: a, context: {user: u}}]\n"
                         "users: [{name: u, user: {token: t}}]\n");
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "unset.conf: contexts[0].context.cluster: not set");

        /* A context without a user is anonymous, as in client-go. */
        path = write_tmp("anon.conf",
                         "current-context: a\n"
                         "contexts: [{name: a, context: {cluster: c}}]\n"
                         "clusters: [{name: c, cluster: {server: 'https://h'}}]\n");
        CHECK(kube_conn_resolve(path, NULL, &c, err) == 0);
        CHECK(c.token == NULL && c.cert_pem == NULL);
        kube_conn_done(&c);

        path = write_simple("noserver.conf", "    insecure-skip-tls-verify: true\n", "    token: t\n");
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "noserver.conf: clusters[0].cluster.server: not set");

        path = write_tmp("dup.conf",
                         "current-context: a\n"
                         "contexts: [{name: a, context: {cluster: c}}]\n"
                         "clusters:\n"
                         "- {name: c, cluster: {server: 'https://one'}}\n"
                         "- {name: c, cluster: {server: 'https://two'}}\n");
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "dup.conf: clusters[1].name: duplicate name \"c\" (also clusters[0])");
}

static void test_bad_values(void) {
        static const char *const bad_b64[] = {
                "Q===", "QQ=A", "QUJD!", "QUJDR", "not base64 at all", "=QUJ", "QU==QUJD",
        };
        char err[KUBE_CONN_ERRLEN], body[512];
        struct kube_conn c = {0};
        const char *path;

        for (size_t i = 0; i < sizeof bad_b64 / sizeof bad_b64[0]; i++) {
                snprintf(body, sizeof body, "    server: https://h\n    certificate-authority-data: \"%s\"\n", bad_b64[i]);
                CHECK(kube_conn_resolve(write_simple("b64.conf", body, "    token: t\n"), NULL, &c, err) == -EINVAL);
                CHECK_CONTAINS(err, "b64.conf: clusters[0].cluster.certificate-authority-data: not valid base64");
                CHECK(conn_is_zero(&c));
        }
        snprintf(body, sizeof body, "    client-certificate-data: %s\n    client-key-data: %s\n", b64(CERT_PEM),
                 b64("just some bytes"));
        CHECK(kube_conn_resolve(write_simple("nopem.conf", "    server: https://h\n", body), NULL, &c, err) ==
              -EINVAL);
        CHECK_CONTAINS(err, "nopem.conf: users[0].user.client-key-data: does not contain a PEM private key");

        /* Conflicting and incomplete settings, as client-go validates them. */
        snprintf(body, sizeof body, "    server: https://h\n    certificate-authority: ca.crt\n"
                                    "    certificate-authority-data: %s\n", b64(CA_PEM));
        CHECK(kube_conn_resolve(write_simple("both.conf", body, "    token: t\n"), NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "both.conf: clusters[0].cluster.certificate-authority-data: certificate-authority is set too");
        snprintf(body, sizeof body, "    server: https://h\n    insecure-skip-tls-verify: true\n"
                                    "    certificate-authority-data: %s\n", b64(CA_PEM));
        CHECK(kube_conn_resolve(write_simple("insec.conf", body, "    token: t\n"), NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "insec.conf: clusters[0].cluster.insecure-skip-tls-verify: cannot be combined");
        snprintf(body, sizeof body, "    client-certificate-data: %s\n", b64(CERT_PEM));
        CHECK(kube_conn_resolve(write_simple("nokey.conf", "    server: https://h\n", body), NULL, &c, err) ==
              -EINVAL);
        CHECK_CONTAINS(err, "nokey.conf: users[0].user.client-certificate-data: needs client-key");
        CHECK(kube_conn_resolve(write_simple("insecstr.conf", "    server: https://h\n    insecure-skip-tls-verify: maybe\n",
                                             "    token: t\n"),
                                NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "insecstr.conf: clusters[0].cluster.insecure-skip-tls-verify: must be true or false");

        /* Servers. */
        static const struct {
                const char *server, *problem;
        } servers[] = {
                {"api.example.com:6443", "must be an http:// or https:// URL"},
                {"https://", "has no host"},
                {"https://:6443", "has no host"},
                {"https://h:99999", "has an invalid port"},
                {"https://h:0", "has an invalid port"},
                {"https://h:", "has an invalid port"},
                {"https://h:6443?x=1", "must not have a query or fragment"},
                {"https://user:pw@h", "must not contain user information"},
                {"https://[fd00::1", "has a malformed IPv6 address"},
                {"https://h st", "must not contain spaces"},
        };
        for (size_t i = 0; i < sizeof servers / sizeof servers[0]; i++) {
                snprintf(body, sizeof body, "    server: \"%s\"\n", servers[i].server);
                CHECK(kube_conn_resolve(write_simple("srv.conf", body, "    token: t\n"), NULL, &c, err) == -EINVAL);
                CHECK_CONTAINS(err, "srv.conf: clusters[0].cluster.server: ");
                CHECK_CONTAINS(err, servers[i].problem);
        }
        CHECK(kube_conn_resolve(write_simple("srvpath.conf", "    server: https://lb.example/k8s/api//\n",
                                             "    token: t\n"),
                                NULL, &c, err) == 0);
        CHECK_STREQ(c.server, "https://lb.example/k8s/api");
        kube_conn_done(&c);

        /* Not a kubeconfig at all, and broken YAML: the file is named. */
        path = write_tmp("list.conf", "- a\n- b\n");
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "list.conf: not a kubeconfig");
        path = write_tmp("broken.conf", "current-context: [a\n");
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "broken.conf:");
        path = write_tmp("scalar.conf", "current-context: {a: b}\n");
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "scalar.conf: current-context: must be a string");
        CHECK(conn_is_zero(&c));
}

static void test_unsupported_auth(void) {
        static const struct {
                const char *user, *field, *problem;
        } cases[] = {
                {"    username: admin\n    password: secret\n", "users[0].user.username", "basic authentication"},
                {"    password: secret\n", "users[0].user.password", "is not supported"},
                {"    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n",
                 "users[0].user.exec", "exec credential plugins are not supported"},
                {"    auth-provider:\n      name: oidc\n      config: {id-token: x}\n", "users[0].user.auth-provider",
                 "auth-provider plugins are not supported"},
                {"    token: t\n    as: someone\n", "users[0].user.as", "impersonation is not supported"},
        };
        char err[KUBE_CONN_ERRLEN];
        struct kube_conn c = {0};

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                CHECK(kube_conn_resolve(write_simple("auth.conf", "    server: https://h\n", cases[i].user), NULL, &c,
                                        err) == -EINVAL);
                CHECK_CONTAINS(err, cases[i].field);
                CHECK_CONTAINS(err, cases[i].problem);
                CHECK(conn_is_zero(&c));
        }
        /* Unknown or empty fields are ignored, as client-go ignores them. */
        CHECK(kube_conn_resolve(write_simple("auth.conf", "    server: https://h\n    disable-compression: true\n",
                                             "    token: t\n    username: \"\"\n    as-groups: []\n    future: 1\n"),
                                NULL, &c, err) == 0);
        kube_conn_done(&c);
}

static void test_unreadable(void) {
        char err[KUBE_CONN_ERRLEN], expect[KUBE_CONN_ERRLEN];
        struct kube_conn c = {0};
        const char *path;

        path = write_simple("unread.conf", "    server: https://h\n",
                            "    client-certificate: /nonexistent/client.crt\n    client-key: missing.key\n");
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -ENOENT);
        snprintf(expect, sizeof expect,
                 "%s: users[0].user.client-certificate: cannot read /nonexistent/client.crt: No such file or directory",
                 path);
        CHECK_STREQ(err, expect);

        write_tmp("client.crt", CERT_PEM);
        path = write_simple("unread2.conf", "    server: https://h\n",
                            "    client-certificate: client.crt\n    client-key: missing.key\n");
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -ENOENT);
        snprintf(expect, sizeof expect,
                 "%s: users[0].user.client-key: cannot read %s/missing.key: No such file or directory", path, tmpdir);
        CHECK_STREQ(err, expect);
        CHECK(conn_is_zero(&c));

        path = write_simple("dirca.conf", "    server: https://h\n    certificate-authority: /tmp\n", "    token: t\n");
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EISDIR);
        CHECK_CONTAINS(err, "dirca.conf: clusters[0].cluster.certificate-authority: cannot read /tmp: Is a directory");

        path = write_simple("derca.conf", "    server: https://h\n    certificate-authority: client.key.der\n",
                            "    token: t\n");
        write_tmp("client.key.der", "0\202\001\n binary");
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "client.key.der does not contain a PEM certificate");

        CHECK(kube_conn_resolve(tmp_path("does-not-exist.conf"), NULL, &c, err) == -ENOENT);
        CHECK_CONTAINS(err, "does-not-exist.conf: cannot read kubeconfig: No such file or directory");
        CHECK(conn_is_zero(&c));
}

/* A kubeconfig built to cost its reader: a billion laughs fails on the
 * alias that passes the cap, before the copies are made; a huge file at
 * the size cap. */
static void test_input_caps(void) {
        char err[KUBE_CONN_ERRLEN], expect[KUBE_CONN_ERRLEN];
        struct kube_conn c = {0};
        struct buf b = BUF_INIT;
        const char *path;

        buf_puts(&b, "apiVersion: v1\nkind: Config\nl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for (int i = 1; i < 10; i++)
                buf_printf(&b, "l%d: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d]\n", i, i,
                           i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
        path = write_tmp("laughs.conf", "%s", b.data);
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EINVAL);
        snprintf(expect, sizeof expect, "%s:7:45: aliases expand to more than 100000 nodes (the YAML alias expansion cap)",
                 path);
        CHECK_STREQ(err, expect);
        CHECK(conn_is_zero(&c));

        buf_clear(&b);
        while (b.len <= (16u << 20))
                buf_puts(&b, "# a comment that goes on and on and on\n");
        path = write_tmp("huge.conf", "%s", b.data);
        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EFBIG);
        snprintf(expect, sizeof expect, "%s: larger than 16 MiB (the kubeconfig size cap)", path);
        CHECK_STREQ(err, expect);
        buf_done(&b);
}

/* ---- in-cluster ------------------------------------------------------- */

static void test_in_cluster(void) {
        char err[KUBE_CONN_ERRLEN];
        struct kube_conn c = {0};
        const char *tok = write_tmp("sa/token", "eyJhbGciOi.sa-token\n");
        const char *ca = write_tmp("sa/ca.crt", CA_PEM);

        setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
        setenv("KUBERNETES_SERVICE_PORT", "443", 1);
        CHECK(kube_conn_in_cluster(tok, ca, &c, err) == 0);
        CHECK_STREQ(err, "");
        CHECK_STREQ(c.server, "https://10.96.0.1:443");
        CHECK_STREQ(c.token, "eyJhbGciOi.sa-token");
        CHECK_STREQ(c.token_file, tok);
        CHECK(mem_eq(c.ca_pem, c.ca_pem_len, CA_PEM));
        CHECK(c.cert_pem == NULL && c.key_pem == NULL && !c.insecure);
        kube_conn_done(&c);

        /* net.JoinHostPort() brackets an IPv6 host. */
        setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
        setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
        CHECK(kube_conn_in_cluster(tok, ca, &c, err) == 0);
        CHECK_STREQ(c.server, "https://[fd00:10:96::1]:6443");
        kube_conn_done(&c);

        /* A CA that cannot be read falls back to the system store (logged),
         * as rest.InClusterConfig() does. */
        fprintf(stderr, "(a warning about a missing CA is expected next)\n");
        CHECK(kube_conn_in_cluster(tok, tmp_path("sa/no-ca.crt"), &c, err) == 0);
        CHECK(c.ca_pem == NULL && c.ca_pem_len == 0);
        CHECK_STREQ(c.token, "eyJhbGciOi.sa-token");
        kube_conn_done(&c);

        /* The token is required. */
        CHECK(kube_conn_in_cluster(tmp_path("sa/no-token"), ca, &c, err) == -ENOENT);
        CHECK_CONTAINS(err, "in-cluster config: cannot read service account token ");
        CHECK_CONTAINS(err, "sa/no-token: No such file or directory");
        CHECK(conn_is_zero(&c));

        setenv("KUBERNETES_SERVICE_PORT", "https", 1);
        CHECK(kube_conn_in_cluster(tok, ca, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "has an invalid port");

        unsetenv("KUBERNETES_SERVICE_HOST");
        unsetenv("KUBERNETES_SERVICE_PORT");
}

static void test_in_cluster_missing_env(void) {
        char err[KUBE_CONN_ERRLEN];
        struct kube_conn c = {0};
        const char *tok = write_tmp("sa/token", "t\n");

        unsetenv("KUBERNETES_SERVICE_HOST");
        setenv("KUBERNETES_SERVICE_PORT", "443", 1);
        CHECK(kube_conn_in_cluster(tok, NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
        CHECK(conn_is_zero(&c));

        setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
        setenv("KUBERNETES_SERVICE_PORT", "", 1);
        CHECK(kube_conn_in_cluster(tok, NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "must be set");

        /* Neither --kubeconfig nor --master: kube_conn_resolve() goes
         * in-cluster, and fails the same way without the environment. */
        unsetenv("KUBERNETES_SERVICE_HOST");
        unsetenv("KUBERNETES_SERVICE_PORT");
        CHECK(kube_conn_resolve(NULL, NULL, &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "in-cluster config: KUBERNETES_SERVICE_HOST");
        CHECK(kube_conn_resolve("", "", &c, err) == -EINVAL);
        CHECK_CONTAINS(err, "in-cluster config:");
        CHECK(conn_is_zero(&c));
}

static void test_reload_token(void) {
        char err[KUBE_CONN_ERRLEN];
        struct kube_conn c = {0};
        const char *tok = write_tmp("sa/rotating", "first\n");

        setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
        setenv("KUBERNETES_SERVICE_PORT", "443", 1);
        CHECK(kube_conn_in_cluster(tok, write_tmp("sa/ca.crt", CA_PEM), &c, err) == 0);
        CHECK_STREQ(c.token, "first");

        write_tmp("sa/rotating", "second\r\n");
        CHECK(kube_conn_reload_token(&c) == 0);
        CHECK_STREQ(c.token, "second");

        /* A failed re-read keeps the token we have. */
        CHECK(unlink(tok) == 0);
        CHECK(kube_conn_reload_token(&c) == -ENOENT);
        CHECK_STREQ(c.token, "second");
        write_tmp("sa/rotating", "\n");
        CHECK(kube_conn_reload_token(&c) == -EINVAL);
        CHECK_STREQ(c.token, "second");
        write_tmp("sa/rotating", "third");
        CHECK(kube_conn_reload_token(&c) == 0);
        CHECK_STREQ(c.token, "third");

        kube_conn_done(&c);
        CHECK(conn_is_zero(&c));
        unsetenv("KUBERNETES_SERVICE_HOST");
        unsetenv("KUBERNETES_SERVICE_PORT");
}

static void test_done_half_filled(void) {
        struct kube_conn c = {0};

        kube_conn_done(&c);
        CHECK(conn_is_zero(&c));
        c.server = strdup("https://h");
        c.token = strdup("secret");
        c.key_pem = strdup(KEY_PEM);        /* length not filled in */
        kube_conn_done(&c);
        CHECK(conn_is_zero(&c));
        kube_conn_done(&c);
        kube_conn_done(NULL);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) st, (void) flag, (void) ftw;
        return remove(path);
}

/* A name quoted in an error keeps it one line: YAML folds a quoted name's
 * escaped newline into one, written back as \n (found by
 * tests/fuzz/fuzz-kubeconfig.c). */
static void test_error_one_line(void) {
        char err[KUBE_CONN_ERRLEN], expect[KUBE_CONN_ERRLEN];
        struct kube_conn c = {0};
        const char *path = write_tmp("newline.conf",
                                     "current-context: a\n"
                                     "contexts: [{name: a, context: {cluster: \"x\\nE0101 forged\", user: u}}]\n");

        CHECK(kube_conn_resolve(path, NULL, &c, err) == -EINVAL);
        snprintf(expect, sizeof expect,
                 "%s: contexts[0].context.cluster: cluster \"x\\nE0101 forged\" not found in clusters", path);
        CHECK_STREQ(err, expect);
}

int main(void) {
        if (!mkdtemp(tmpdir)) {
                perror("mkdtemp");
                return 1;
        }

        TEST_RUN(test_data_fields);
        TEST_RUN(test_base64_padding);
        TEST_RUN(test_file_fields_relative);
        TEST_RUN(test_tokens);
        TEST_RUN(test_current_context);
        TEST_RUN(test_master_override);
        TEST_RUN(test_missing_references);
        TEST_RUN(test_error_one_line);
        TEST_RUN(test_bad_values);
        TEST_RUN(test_unsupported_auth);
        TEST_RUN(test_unreadable);
        TEST_RUN(test_input_caps);
        TEST_RUN(test_in_cluster);
        TEST_RUN(test_in_cluster_missing_env);
        TEST_RUN(test_reload_token);
        TEST_RUN(test_done_half_filled);

        if (nftw(tmpdir, remove_entry, 8, FTW_DEPTH | FTW_PHYS) < 0)
                fprintf(stderr, "could not remove %s\n", tmpdir);
        TEST_DONE();
}
