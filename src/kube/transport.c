/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libcurl's multi-socket API on kproxy's event loop: libcurl says which
 * sockets to watch for what (socket_cb) and when to call it back
 * (timer_cb); the loop tells it what happened, and finished transfers are
 * handed to their owners. No thread, no blocking call: a slow API server
 * holds up nothing else on the loop.
 */
#include "kube/transport.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <time.h>

#include "ev/ev.h"
#include "kube/kubeconfig.h"
#include "util/buf.h"

struct kube_transport {
        struct ev_loop *loop;
        struct kube_conn *conn;
        CURLM *multi;
        struct ev_timer *curl_timer;
        char *host;             /* the server's host[:port], for the observer */
        char *accept;           /* "Accept: ..." of every request */
};

struct kube_request {
        struct kube_transport *transport;
        CURL *easy;
        struct curl_slist *headers;
        const struct kube_request_ops *ops;
        void *userdata;
        char retry_after[64];   /* the response's Retry-After value, "" without one */
};

/* --- libcurl multi-socket glue --- */

static void check_done(struct kube_transport *t) {
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(t->multi, &left))) {
                if (m->msg != CURLMSG_DONE)
                        continue;
                struct kube_request *r = NULL;
                CURLcode res = m->data.result;
                curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **) &r);
                if (!r || r->easy != m->easy_handle)
                        continue;
                r->ops->done(r->userdata,
                             res == CURLE_OK            ? KUBE_REQUEST_COMPLETE :
                             res == CURLE_WRITE_ERROR   ? KUBE_REQUEST_ABORTED :
                                                          KUBE_REQUEST_FAILED,
                             res == CURLE_OK ? NULL : curl_easy_strerror(res));
        }
}

static void on_socket_event(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct kube_transport *t = userdata;
        int flags = 0, running;
        (void) l;
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                flags |= CURL_CSELECT_IN;
        if (events & EPOLLOUT)
                flags |= CURL_CSELECT_OUT;
        if (events & EPOLLERR)
                flags |= CURL_CSELECT_ERR;
        curl_multi_socket_action(t->multi, fd, flags, &running);
        check_done(t);
}

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
        struct kube_transport *t = userp;
        uint32_t events = 0;
        (void) easy;

        if (what == CURL_POLL_REMOVE) {
                ev_io_del(t->loop, fd);
                curl_multi_assign(t->multi, fd, NULL);
                return 0;
        }
        if (what & CURL_POLL_IN)
                events |= EPOLLIN;
        if (what & CURL_POLL_OUT)
                events |= EPOLLOUT;
        if (socketp) {
                ev_io_mod(t->loop, fd, events);
        } else {
                if (ev_io_add(t->loop, fd, events, on_socket_event, t) < 0)
                        return -1;
                curl_multi_assign(t->multi, fd, t);
        }
        return 0;
}

static void on_curl_timer(struct ev_loop *l, void *userdata) {
        struct kube_transport *t = userdata;
        int running;
        (void) l;
        t->curl_timer = NULL;
        curl_multi_socket_action(t->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        check_done(t);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp) {
        struct kube_transport *t = userp;
        (void) multi;
        t->curl_timer = ev_timer_cancel(t->loop, t->curl_timer);
        if (timeout_ms >= 0)
                t->curl_timer = ev_timer_add(t->loop, (uint64_t) timeout_ms, on_curl_timer, t);
        return 0;
}

/* --- requests --- */

static size_t on_data(char *data, size_t size, size_t nmemb, void *userdata) {
        struct kube_request *r = userdata;
        size_t n = size * nmemb;

        return r->ops->data(r->userdata, data, n) ? n : 0;
}

/* Keeps the value of a Retry-After header, trimmed; a status line (a new
 * response) forgets it. */
static void note_header(struct kube_request *r, const char *data, size_t n) {
        static const char name[] = "retry-after:";
        size_t k = sizeof name - 1;

        if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) {
                r->retry_after[0] = '\0';
                return;
        }
        if (n <= k || strncasecmp(data, name, k) != 0)
                return;
        data += k;
        n -= k;
        while (n > 0 && isspace((unsigned char) *data))
                data++, n--;
        while (n > 0 && isspace((unsigned char) data[n - 1]))
                n--;
        if (n < sizeof r->retry_after) {
                memcpy(r->retry_after, data, n);
                r->retry_after[n] = '\0';
        }
}

/* The headers end with an empty line. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata) {
        struct kube_request *r = userdata;
        size_t n = size * nmemb;

        if ((n == 2 && data[0] == '\r' && data[1] == '\n') || (n == 1 && data[0] == '\n')) {
                if (r->ops->headers_done)
                        r->ops->headers_done(r->userdata);
        } else {
                note_header(r, data, n);
        }
        return n;
}

static void set_tls(CURL *e, const struct kube_conn *conn) {
        if (conn->ca_pem) {
                struct curl_blob ca = {conn->ca_pem, conn->ca_pem_len, CURL_BLOB_NOCOPY};
                curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &ca);
        }
        if (conn->cert_pem && conn->key_pem) {
                struct curl_blob cert = {conn->cert_pem, conn->cert_pem_len, CURL_BLOB_NOCOPY};
                struct curl_blob key = {conn->key_pem, conn->key_pem_len, CURL_BLOB_NOCOPY};
                curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cert);
                curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
                curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &key);
                curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
        }
        if (conn->insecure) {
                curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
                curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
        }
}

int kube_request_start(struct kube_transport *t, const char *url, long timeout_s, const struct kube_request_ops *ops,
                       void *userdata, struct kube_request **ret) {
        struct kube_conn *conn = t->conn;
        struct kube_request *r = calloc(1, sizeof *r);
        CURL *e = curl_easy_init();
        if (!r || !e) {
                free(r);
                curl_easy_cleanup(e);
                return -ENOMEM;
        }
        *r = (struct kube_request) {.transport = t, .easy = e, .ops = ops, .userdata = userdata};

        r->headers = curl_slist_append(NULL, t->accept ? t->accept : "Accept: " KUBE_ACCEPT_DEFAULT);
        if (conn->token) {
                struct buf h = BUF_INIT;
                buf_printf(&h, "Authorization: Bearer %s", conn->token);
                r->headers = curl_slist_append(r->headers, h.data);
                explicit_bzero(h.data, h.len);
                buf_done(&h);
        }
        curl_easy_setopt(e, CURLOPT_URL, url);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
        curl_easy_setopt(e, CURLOPT_USERAGENT, "kproxy/" KPROXY_VERSION);
        /* As Go's transport asks: the API server compresses large lists
         * (APIResponseCompression); libcurl inflates them. */
        curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "gzip");
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https,http");
        curl_easy_setopt(e, CURLOPT_PRIVATE, r);
        set_tls(e, conn);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
        if (timeout_s > 0)
                curl_easy_setopt(e, CURLOPT_TIMEOUT, timeout_s);
        if (curl_multi_add_handle(t->multi, e) != CURLM_OK) {
                kube_request_free(r);
                return -ENOMEM;
        }
        *ret = r;
        return 0;
}

int kube_transport_set_accept(struct kube_transport *t, const char *value) {
        struct buf h = BUF_INIT;

        for (const char *p = value; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        return -EINVAL;         /* a header of its own, or worse */
        buf_printf(&h, "Accept: %s", value);
        free(t->accept);
        t->accept = h.data;
        return 0;
}

const char *kube_request_content_type(const struct kube_request *r) {
        char *ct = NULL;

        curl_easy_getinfo(r->easy, CURLINFO_CONTENT_TYPE, &ct);
        return ct;
}

long kube_request_status(const struct kube_request *r) {
        long code = 0;

        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
        return code;
}

int64_t kube_retry_after_ms(const char *value, int64_t now_ms) {
        size_t n = value ? strlen(value) : 0;

        if (n == 0)
                return -1;
        if (strspn(value, "0123456789") == n) {
                /* Delay-seconds. More digits than fit are a long wait. */
                if (n > 9)
                        return INT64_MAX / 2;
                return (int64_t) strtol(value, NULL, 10) * 1000;
        }
        time_t at = curl_getdate(value, NULL);
        if (at == (time_t) -1)
                return -1;
        return (int64_t) at * 1000 <= now_ms ? 0 : (int64_t) at * 1000 - now_ms;
}

int64_t kube_request_retry_after(const struct kube_request *r) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return kube_retry_after_ms(r->retry_after, (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

struct kube_request *kube_request_free(struct kube_request *r) {
        if (!r)
                return NULL;
        curl_multi_remove_handle(r->transport->multi, r->easy);
        curl_easy_cleanup(r->easy);
        curl_slist_free_all(r->headers);
        free(r);
        return NULL;
}

void kube_url_param(struct buf *url, const char *name, const char *value) {
        char *esc = curl_easy_escape(NULL, value, 0);
        buf_printf(url, "%c%s=%s", strchr(url->data, '?') ? '&' : '?', name, esc ? esc : "");
        curl_free(esc);
}

/* --- the transport --- */

/* client-go's label: the URL's host, with its port when the URL has one
 * ("https://10.96.0.1:443/x" gives "10.96.0.1:443"). */
char *kube_transport_host_of(const char *server) {
        const char *p = server ? strstr(server, "://") : NULL;
        p = p ? p + 3 : server ? server : "";
        size_t n = strcspn(p, "/?#");
        const char *at = memchr(p, '@', n);
        if (at) {
                n -= (size_t) (at + 1 - p);
                p = at + 1;
        }
        return strndup(p, n);
}

int kube_transport_new(struct ev_loop *l, struct kube_conn *conn, struct kube_transport **ret) {
        static bool global_init;
        struct kube_transport *t;

        if (!global_init) {
                if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                        return -ENOMEM;
                global_init = true;
        }
        t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        t->loop = l;
        t->conn = conn;
        t->host = kube_transport_host_of(conn->server);
        t->multi = curl_multi_init();
        if (!t->host || !t->multi) {
                kube_transport_free(t);
                return -ENOMEM;
        }
        curl_multi_setopt(t->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
        curl_multi_setopt(t->multi, CURLMOPT_SOCKETDATA, t);
        curl_multi_setopt(t->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
        curl_multi_setopt(t->multi, CURLMOPT_TIMERDATA, t);
        *ret = t;
        return 0;
}

struct kube_transport *kube_transport_free(struct kube_transport *t) {
        if (!t)
                return NULL;
        t->curl_timer = ev_timer_cancel(t->loop, t->curl_timer);
        if (t->multi)
                curl_multi_cleanup(t->multi);
        free(t->host);
        free(t->accept);
        free(t);
        return NULL;
}

const char *kube_transport_server(const struct kube_transport *t) {
        return t->conn->server;
}

const char *kube_transport_host(const struct kube_transport *t) {
        return t->host;
}

void kube_transport_reload_token(struct kube_transport *t) {
        if (t->conn->token_file)
                kube_conn_reload_token(t->conn);
}
