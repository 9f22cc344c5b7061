/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a connection is read from, checked (conn-read.h): secret-aware
 * buffers wiped before free, bounded file reads, base64, tokens, server
 * URLs.
 */
#include "kube/conn-read.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/load.h"
#include "util/cleanup.h"
#include "util/log.h"

bool kube_conn_isempty(const char *s) {
        return !s || !*s;
}

/* --- Secrets-aware buffers ---------------------------------------------- */


void kube_conn_blob_done(struct blob *b) {
        if (b->data) {
                explicit_bzero(b->data, b->len);
                free(b->data);
        }
        *b = (struct blob) {NULL, 0};
}

void kube_conn_secret_free(char *s, size_t len) {
        if (!s)
                return;
        explicit_bzero(s, len ? len : strlen(s));
        free(s);
}

/* Reads all of path. Grows by copying rather than realloc() so that no
 * stale copy of a key is left behind unwiped. */
int kube_conn_read_file(const char *path, struct blob *ret) {
        _cleanup_close_ int fd = -1;
        _cleanup_(kube_conn_blob_done) struct blob b = {NULL, 0};
        size_t cap = 0;
        struct stat st;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (S_ISREG(st.st_mode) && (size_t) st.st_size > MAX_FILE_SIZE)
                return -EFBIG;
        for (;;) {
                if (b.len + 1 >= cap) {
                        size_t ncap = cap ? cap * 2 : S_ISREG(st.st_mode) ? (size_t) st.st_size + 2 : 4096;
                        char *n = malloc(ncap);
                        if (!n)
                                return -ENOMEM;
                        if (b.data)
                                memcpy(n, b.data, b.len);
                        kube_conn_blob_done(&(struct blob) {b.data, b.len});
                        b.data = n;
                        cap = ncap;
                }
                ssize_t k = read(fd, b.data + b.len, cap - b.len - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                b.len += (size_t) k;
                if (b.len > MAX_FILE_SIZE)
                        return -EFBIG;
        }
        b.data[b.len] = '\0';
        *ret = b;
        b = (struct blob) {NULL, 0};
        return 0;
}

/* Standard base64 with padding, as Go's encoding/json decodes []byte
 * fields; line breaks and other whitespace are skipped (YAML folds long
 * values). EVP_DecodeBlock() does the arithmetic, but it accepts "Q===" and
 * "QQ=A" and counts padding as output, so the shape is checked here first. */
int kube_conn_base64_decode(const char *in, size_t in_len, struct blob *ret) {
        _cleanup_(kube_conn_blob_done) struct blob packed = {NULL, 0}, out = {NULL, 0};
        size_t n = 0, pad = 0;

        packed.data = malloc(in_len + 1);
        if (!packed.data)
                return -ENOMEM;
        for (size_t i = 0; i < in_len; i++)
                if (!isspace((unsigned char) in[i]))
                        packed.data[n++] = in[i];
        packed.len = n;
        if (n == 0 || n % 4 != 0)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                unsigned char ch = (unsigned char) packed.data[i];
                if (ch == '=') {
                        if (i < n - 2)
                                return -EINVAL;
                        pad++;
                } else if (pad > 0 || !(isalnum(ch) || ch == '+' || ch == '/')) {
                        return -EINVAL;
                }
        }
        out.data = malloc(n / 4 * 3 + 1);
        if (!out.data)
                return -ENOMEM;
        int k = EVP_DecodeBlock((unsigned char *) out.data, (const unsigned char *) packed.data, (int) n);
        if (k < 0 || (size_t) k < pad)
                return -EINVAL;
        out.len = (size_t) k - pad;
        out.data[out.len] = '\0';
        *ret = out;
        out = (struct blob) {NULL, 0};
        return 0;
}

/* --- Tokens -------------------------------------------------------------- */

/* A token goes into an HTTP header verbatim; a control character there
 * would end the header (or start another one). */
const char *kube_conn_token_problem(const char *t) {
        for (; *t; t++)
                if ((unsigned char) *t < 0x20 || *t == 0x7f)
                        return "contains control characters";
        return NULL;
}

/* Reads a bearer token as client-go's file token source does: whitespace
 * around it (the trailing newline of `echo`) is dropped and an empty file
 * is an error. On -EINVAL, *ret_problem says what is wrong; other errors
 * are from reading the file. */
int kube_conn_token_read(const char *path, char **ret, const char **ret_problem) {
        _cleanup_(kube_conn_blob_done) struct blob b = {NULL, 0};
        const char *s, *problem;
        size_t len;
        char *t;
        int r;

        r = kube_conn_read_file(path, &b);
        if (r < 0)
                return r;
        s = b.data;
        len = b.len;
        while (len > 0 && isspace((unsigned char) *s))
                s++, len--;
        while (len > 0 && isspace((unsigned char) s[len - 1]))
                len--;
        if (len == 0) {
                *ret_problem = "is empty";
                return -EINVAL;
        }
        if (memchr(s, '\0', len)) {
                *ret_problem = "contains NUL bytes";
                return -EINVAL;
        }
        t = strndup(s, len);
        if (!t)
                return -ENOMEM;
        problem = kube_conn_token_problem(t);
        if (problem) {
                kube_conn_secret_free(t, len);
                *ret_problem = problem;
                return -EINVAL;
        }
        *ret = t;
        return 0;
}

/* --- Server URLs --------------------------------------------------------- */

int kube_conn_invalid(const char **ret_problem, const char *problem) {
        *ret_problem = problem;
        return -EINVAL;
}

/* Accepts http(s)://host[:port][/prefix], host a name, an IPv4 address or
 * a bracketed IPv6 address. client-go also takes a bare host:port, but then
 * guesses the scheme from whether TLS settings exist, and at the point it
 * decides whether to send credentials it guesses plain HTTP; an explicit
 * scheme avoids that trap. Returns the URL with a lowercase scheme and no
 * trailing slash. */
int kube_conn_server_normalize(const char *s, char **ret, const char **ret_problem) {
        const char *p, *end, *host_end, *path_end, *scheme;

        if (strncasecmp(s, "https://", 8) == 0)
                scheme = "https://", p = s + 8;
        else if (strncasecmp(s, "http://", 7) == 0)
                scheme = "http://", p = s + 7;
        else
                return kube_conn_invalid(ret_problem, "must be an http:// or https:// URL");
        for (const char *q = s; *q; q++)
                if ((unsigned char) *q <= ' ' || *q == 0x7f)
                        return kube_conn_invalid(ret_problem, "must not contain spaces or control characters");
        if (strpbrk(p, "?#"))
                return kube_conn_invalid(ret_problem, "must not have a query or fragment");
        end = p + strcspn(p, "/");
        if (memchr(p, '@', (size_t) (end - p)))
                return kube_conn_invalid(ret_problem, "must not contain user information");
        if (*p == '[') {
                const char *close = memchr(p, ']', (size_t) (end - p));
                if (!close || close == p + 1)
                        return kube_conn_invalid(ret_problem, "has a malformed IPv6 address");
                for (const char *q = p + 1; q < close; q++)
                        if (!isalnum((unsigned char) *q) && *q != ':' && *q != '.' && *q != '%')
                                return kube_conn_invalid(ret_problem, "has a malformed IPv6 address");
                host_end = close + 1;
        } else {
                host_end = p + strcspn(p, ":/");
                if (host_end == p)
                        return kube_conn_invalid(ret_problem, "has no host");
                for (const char *q = p; q < host_end; q++)
                        if (!isalnum((unsigned char) *q) && *q != '-' && *q != '.' && *q != '_')
                                return kube_conn_invalid(ret_problem, "has an invalid host");
        }
        if (host_end < end) {
                unsigned long port = 0;
                size_t digits = (size_t) (end - host_end - 1);
                if (*host_end != ':')
                        return kube_conn_invalid(ret_problem, "has an invalid host");
                for (const char *q = host_end + 1; q < end; q++) {
                        if (!isdigit((unsigned char) *q))
                                return kube_conn_invalid(ret_problem, "has an invalid port");
                        port = port * 10 + (unsigned long) (*q - '0');
                        if (port > 65535)
                                break;
                }
                if (digits == 0 || port == 0 || port > 65535)
                        return kube_conn_invalid(ret_problem, "has an invalid port");
        }
        path_end = p + strlen(p);
        while (path_end > end && path_end[-1] == '/')
                path_end--;
        if (asprintf(ret, "%s%.*s", scheme, (int) (path_end - p), p) < 0)
                return -ENOMEM;
        return 0;
}

bool kube_conn_server_is_https(const char *server) {
        return strncmp(server, "https://", 8) == 0;
}
