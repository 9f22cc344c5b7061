/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the embedded HTTP servers: libmicrohttpd in its "external
 * epoll" mode. It keeps its own epoll set (listen socket and connections),
 * and that one fd sits in kproxy's loop. When it is readable, or when MHD's
 * own deadline (MHD_get_timeout: idle connections, data it has buffered but
 * not yet processed) comes due, we call MHD_run(), which never blocks. The
 * deadline is re-read after every run. No threads.
 *
 * The listen socket is ours, not MHD's: MHD_start_daemon() reports a failed
 * bind only as NULL, and callers need the errno (-EADDRINUSE is the usual
 * story of a second kube-proxy on the node).
 *
 * Upstream's servers are Go handlers (an http.ServeMux for the metrics and
 * health servers, one bare handler for a health-check node port): they
 * ignore the method and any request body, and keep connections alive. mhd.c
 * does the same for every owner, so each owner is just a function from a
 * path to a reply.
 */
#include "http/mhd.h"

#include <assert.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "ev/ev.h"
#include "util/cleanup.h"
#include "util/inet.h"
#include "util/log.h"

/* Upstream's Go servers have no timeouts, but they give every connection its
 * own goroutine. Here one thread serves them all, so an idle or stalled
 * client must not hold a slot forever; scrapers and probes send one small
 * request at a time. */
#define MHD_SERVER_CONNECTION_TIMEOUT_S 30u

struct mhd_server {
        struct ev_loop *loop;
        char *name;
        struct inet_addr addr;
        uint16_t want_port;             /* as asked for: 0 lets the kernel pick */
        unsigned max_connections;
        uint64_t retry_ms;              /* 0: a failed bind is the caller's error */
        struct ev_timer *retry;         /* armed while the bind waits for its next try */
        unsigned failures;              /* binds failed in a row */
        struct MHD_Daemon *daemon;
        int epoll_fd;                   /* MHD's own; registered with the loop */
        struct ev_timer *timer;         /* armed while MHD wants a wake-up */
        bool starting;                  /* MHD's messages are warnings until it runs */
        uint16_t port;
        mhd_handler_fn fn;
        void *userdata;
};

struct mhd_request {
        struct MHD_Connection *conn;
        const char *path;
        const char *method;
};

const char *mhd_request_path(const struct mhd_request *r) {
        return r->path;
}

const char *mhd_request_method(const struct mhd_request *r) {
        return r->method;
}

struct mhd_arg_walk {
        void (*fn)(void *userdata, const char *key, const char *value);
        void *userdata;
};

static enum MHD_Result mhd_arg_step(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        struct mhd_arg_walk *w = cls;

        (void) kind;
        w->fn(w->userdata, key, value);
        return MHD_YES;
}

void mhd_request_foreach_arg(const struct mhd_request *r,
                             void (*fn)(void *userdata, const char *key, const char *value), void *userdata) {
        struct mhd_arg_walk w = {fn, userdata};

        (void) MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, mhd_arg_step, &w);
}

void mhd_reply_not_found(struct mhd_reply *reply) {
        reply->status = MHD_HTTP_NOT_FOUND;
        reply->content_type = "text/plain; charset=utf-8";
        reply->nosniff = true;
        buf_clear(&reply->body);
        buf_puts(&reply->body, "404 page not found\n");
}

/* Kept as "name\0value\0" pairs until the response exists. */
void mhd_reply_add_header(struct mhd_reply *reply, const char *name, const char *value) {
        buf_put(&reply->headers, name, strlen(name) + 1);
        buf_put(&reply->headers, value, strlen(value) + 1);
}

static enum MHD_Result mhd_add_headers(struct MHD_Response *r, const struct mhd_reply *reply) {
        const struct buf *h = &reply->headers;

        if (reply->content_type &&
            MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, reply->content_type) != MHD_YES)
                return MHD_NO;
        if (reply->nosniff && MHD_add_response_header(r, "X-Content-Type-Options", "nosniff") != MHD_YES)
                return MHD_NO;
        for (size_t i = 0; i < h->len;) {
                const char *name = h->data + i, *value = name + strlen(name) + 1;

                if (MHD_add_response_header(r, name, value) != MHD_YES)
                        return MHD_NO;
                i += strlen(name) + 1 + strlen(value) + 1;
        }
        return MHD_YES;
}

static enum MHD_Result mhd_queue(struct MHD_Connection *c, struct mhd_reply *reply) {
        struct MHD_Response *r;
        size_t len = reply->body.len;
        enum MHD_Result ret = MHD_NO;

        /* The body moves to MHD, which frees it with the response. */
        if (len > 0)
                r = MHD_create_response_from_buffer(len, buf_steal(&reply->body), MHD_RESPMEM_MUST_FREE);
        else
                r = MHD_create_response_from_buffer(0, (void *) "", MHD_RESPMEM_PERSISTENT);
        if (!r)
                return MHD_NO;  /* out of memory: MHD closes the connection */
        if (mhd_add_headers(r, reply) == MHD_YES)
                ret = MHD_queue_response(c, reply->status, r);
        MHD_destroy_response(r);
        return ret;
}

/* MHD calls this once when the headers are in, once per piece of request
 * body, and once more at the end. Answering on the first call would make MHD
 * close every connection after the reply (it cannot know the body is
 * unwanted), so the answer waits for the last call and any body is dropped
 * as it comes. */
static enum MHD_Result mhd_handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **req_cls) {
        struct mhd_server *s = cls;
        struct mhd_request req = {c, url, method};
        struct mhd_reply reply = {.status = MHD_HTTP_OK, .body = BUF_INIT, .headers = BUF_INIT};
        enum MHD_Result ret;

        (void) version;
        (void) upload_data;

        if (!*req_cls) {
                *req_cls = s;   /* any non-NULL marks "headers seen" */
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                *upload_data_size = 0;
                return MHD_YES;
        }

        s->fn(s->userdata, &req, &reply);
        ret = mhd_queue(c, &reply);
        buf_done(&reply.body);
        buf_done(&reply.headers);
        return ret;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void mhd_log(void *cls, const char *fmt, va_list ap) {
        const struct mhd_server *s = cls;
        char msg[512];
        size_t n;

        vsnprintf(msg, sizeof msg, fmt, ap);
        n = strlen(msg);
        while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
                msg[--n] = '\0';
        /* At start MHD explains a failure the caller is about to report;
         * later it mostly narrates clients that hung up. */
        if (s->starting)
                log_warning("%s: %s", s->name, msg);
        else
                log_v(2, "%s: %s", s->name, msg);
}

static void mhd_on_timer(struct ev_loop *l, void *userdata);

static void mhd_rearm(struct mhd_server *s) {
        MHD_UNSIGNED_LONG_LONG ms;

        s->timer = ev_timer_cancel(s->loop, s->timer);
        if (MHD_get_timeout(s->daemon, &ms) != MHD_YES)
                return;
        s->timer = ev_timer_add(s->loop, (uint64_t) ms, mhd_on_timer, s);
        if (!s->timer)
                log_warning("%s: out of memory arming a timer, idle connections stay open until the next "
                            "request, ignoring", s->name);
}

static void mhd_run(struct mhd_server *s) {
        if (MHD_run(s->daemon) != MHD_YES)
                log_warning("%s: MHD_run() failed, ignoring", s->name);
        mhd_rearm(s);
}

static void mhd_on_timer(struct ev_loop *l, void *userdata) {
        struct mhd_server *s = userdata;

        (void) l;
        s->timer = NULL;        /* fired: the loop has freed it */
        mhd_run(s);
}

static void mhd_on_io(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        (void) l;
        (void) fd;
        (void) events;
        mhd_run(userdata);
}

int mhd_parse_bind(const char *s, struct inet_addr *ret_addr, uint16_t *ret_port) {
        char host[INET_ADDR_STRLEN];
        const char *h, *p;
        size_t hl;
        unsigned long port = 0;
        struct inet_addr a;

        if (!s)
                return -EINVAL;
        if (s[0] == '[') {
                const char *end = strchr(s, ']');

                if (!end || end[1] != ':')
                        return -EINVAL;
                h = s + 1;
                hl = (size_t) (end - h);
                p = end + 2;
        } else {
                const char *colon = strchr(s, ':');

                if (!colon || strchr(colon + 1, ':'))
                        return -EINVAL;
                h = s;
                hl = (size_t) (colon - s);
                p = colon + 1;
        }
        if (hl == 0 || hl >= sizeof host)
                return -EINVAL;
        memcpy(host, h, hl);
        host[hl] = '\0';
        if (inet_addr_parse(host, &a) < 0)
                return -EINVAL;

        if (!*p)
                return -EINVAL;
        for (; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                port = port * 10 + (unsigned long) (*p - '0');
                if (port > 65535)
                        return -EINVAL;
        }
        *ret_addr = a;
        *ret_port = (uint16_t) port;
        return 0;
}

/* The listening socket, the way Go's net.Listen("tcp", addr) makes
 * upstream's: SO_REUSEADDR, and IPV6_V6ONLY off, so an unspecified address
 * (0.0.0.0 as much as ::) gets one dual-stack socket, falling back to IPv4
 * only on a kernel without IPv6. */
static int mhd_listen(const struct inet_addr *a, uint16_t port, int *ret_fd, uint16_t *ret_port) {
        struct sockaddr_storage ss = {};
        socklen_t len;
        int one = 1, zero = 0;
        bool wildcard4 = a->family == 4 && inet_addr_is_unspecified(a);
        _cleanup_close_ int fd = -1;

        if (a->family == 6 || wildcard4) {
                struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *) &ss;

                sin6->sin6_family = AF_INET6;
                sin6->sin6_port = htons(port);
                if (!wildcard4)
                        memcpy(&sin6->sin6_addr, a->bytes, 16);
                len = sizeof *sin6;
                fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fd < 0 && errno != EAFNOSUPPORT)
                        return -errno;
                if (fd < 0 && !wildcard4)
                        return -EAFNOSUPPORT;
        }
        if (fd < 0) {
                struct sockaddr_in *sin = (struct sockaddr_in *) &ss;

                memset(&ss, 0, sizeof ss);
                sin->sin_family = AF_INET;
                sin->sin_port = htons(port);
                memcpy(&sin->sin_addr, a->bytes, 4);
                len = sizeof *sin;
                fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        return -errno;
        }

        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
                return -errno;
        if (ss.ss_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero) < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &ss, len) < 0)
                return -errno;
        if (listen(fd, SOMAXCONN) < 0)
                return -errno;
        if (getsockname(fd, (struct sockaddr *) &ss, &len) < 0)
                return -errno;
        *ret_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &ss)->sin6_port
                                                   : ((struct sockaddr_in *) &ss)->sin_port);
        *ret_fd = fd;
        fd = -1;
        return 0;
}

static void mhd_server_freep(struct mhd_server **s) {
        mhd_server_free(*s);
}

/* Binds and starts MHD on s. On failure nothing of it is left open. */
static int mhd_start(struct mhd_server *s) {
        _cleanup_close_ int fd = -1;
        const union MHD_DaemonInfo *info;
        int r;

        r = mhd_listen(&s->addr, s->want_port, &fd, &s->port);
        if (r < 0)
                return r;

        /* No MHD_USE_INTERNAL_POLLING_THREAD: MHD runs only inside MHD_run(),
         * on this thread. MHD_USE_DUAL_STACK is not needed: the socket is
         * ours and already has IPV6_V6ONLY off. */
        s->starting = true;
        errno = 0;
        s->daemon = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, mhd_handle, s,
                                     MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                                     MHD_OPTION_LISTEN_SOCKET, fd,
                                     MHD_OPTION_CONNECTION_TIMEOUT, MHD_SERVER_CONNECTION_TIMEOUT_S,
                                     MHD_OPTION_CONNECTION_LIMIT, s->max_connections,
                                     MHD_OPTION_END);
        s->starting = false;
        if (!s->daemon) {
                /* On failure the socket is still ours (closed on return). */
                s->port = 0;
                return errno > 0 ? -errno : -EIO;
        }
        fd = -1;        /* MHD_stop_daemon() closes it */

        info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        r = !info || info->epoll_fd < 0 ? -EIO : ev_io_add(s->loop, info->epoll_fd, EPOLLIN, mhd_on_io, s);
        if (r < 0) {
                MHD_stop_daemon(s->daemon);
                s->daemon = NULL;
                s->port = 0;
                return r;
        }
        s->epoll_fd = info->epoll_fd;
        mhd_rearm(s);
        return 0;
}

static void mhd_on_retry(struct ev_loop *l, void *userdata);

/* Upstream without --bind-address-hard-fail: the error is logged and the
 * bind tried again every few seconds while the proxy carries on. Every
 * failure after the first is logged at V(2) only: the first said it all. */
static void mhd_retry_later(struct mhd_server *s, int r) {
        char a[INET_ADDR_STRLEN];
        inet_addr_format(&s->addr, a);
        s->failures++;
        if (s->failures == 1)
                log_error_errno(r, "%s: cannot listen on %s%s%s:%u, retrying every %llu ms", s->name,
                                s->addr.family == 6 ? "[" : "", a, s->addr.family == 6 ? "]" : "", s->want_port,
                                (unsigned long long) s->retry_ms);
        else
                log_v(2, "%s: cannot listen on %s:%u yet (%s), attempt %u", s->name, a, s->want_port, strerror(-r),
                      s->failures);
        s->retry = ev_timer_add(s->loop, s->retry_ms, mhd_on_retry, s);
}

static void mhd_on_retry(struct ev_loop *l, void *userdata) {
        struct mhd_server *s = userdata;
        (void) l;
        s->retry = NULL;
        int r = mhd_start(s);
        if (r < 0) {
                mhd_retry_later(s, r);
                return;
        }
        log_info("%s: listening on port %u after %u failed attempts", s->name, s->port, s->failures);
        s->failures = 0;
}

int mhd_server_new(struct ev_loop *l, const char *name, const struct inet_addr *addr, uint16_t port,
                   unsigned max_connections, uint64_t retry_ms, mhd_handler_fn fn, void *userdata,
                   struct mhd_server **ret) {
        _cleanup_(mhd_server_freep) struct mhd_server *s = NULL;
        int r;

        assert(l);
        assert(name);
        assert(addr);
        assert(fn);
        assert(ret);

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        *s = (struct mhd_server) {
                .loop = l,
                .name = strdup(name),
                .addr = *addr,
                .want_port = port,
                .max_connections = max_connections,
                .retry_ms = retry_ms,
                .epoll_fd = -1,
                .fn = fn,
                .userdata = userdata,
        };
        if (!s->name)
                return -ENOMEM;
        r = mhd_start(s);
        if (r == -ENOMEM || (r < 0 && retry_ms == 0))
                return r;
        if (r < 0)
                mhd_retry_later(s, r);
        *ret = TAKE_PTR(s);
        return 0;
}

struct mhd_server *mhd_server_free(struct mhd_server *s) {
        if (!s)
                return NULL;
        s->timer = ev_timer_cancel(s->loop, s->timer);
        s->retry = ev_timer_cancel(s->loop, s->retry);
        if (s->epoll_fd >= 0)
                (void) ev_io_del(s->loop, s->epoll_fd);
        /* Closes the connections, the listen socket and the epoll fd. */
        if (s->daemon)
                MHD_stop_daemon(s->daemon);
        free(s->name);
        free(s);
        return NULL;
}

uint16_t mhd_server_port(const struct mhd_server *s) {
        return s ? s->port : 0;
}
