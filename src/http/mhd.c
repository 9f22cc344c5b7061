/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the embedded HTTP servers: libmicrohttpd in its "external
 * epoll" mode. It keeps its own epoll set of connections, and that one fd
 * sits in kproxy's loop. When it is readable, when a connection has been
 * handed over, or when a deadline comes due (MHD's own from
 * MHD_get_timeout(): idle connections, data it has buffered but not yet
 * processed; or one of http/mhd-conns.h), we call MHD_run(), which never
 * blocks. The deadlines are re-read after every run. No threads.
 *
 * The listen socket is ours, and so is accept(): MHD runs without one
 * (MHD_USE_NO_LISTEN_SOCKET) and is handed each connection with
 * MHD_add_connection().
 *  - MHD_start_daemon() reports a failed bind only as NULL, and callers
 *    need the errno (-EADDRINUSE is the usual story of a second
 *    kube-proxy on the node).
 *  - At its connection limit MHD takes its listen socket out of its epoll
 *    set, and puts it back only at the start of a later MHD_run() that
 *    begins below the limit (MHD_epoll(), 0.9.75). When the connections
 *    that filled it all hung up at once, one run closed them all (it
 *    began at the limit), and nothing called another: no connection was
 *    left to make MHD's epoll fd readable, and MHD_get_timeout() has no
 *    deadline without connections. A burst that reached the limit and
 *    closed left the server deaf for good, its backlog growing; a burst
 *    that closed in two runs did not, hence "sometimes".
 *  - At a limit MHD can only refuse, so connections held open (idle, or
 *    trickling their headers) kept everyone else out for as long as they
 *    stayed. MHD's own options do not help (0.9.75): its per-IP limit
 *    refuses too, so a kubelet sharing an address with the flood is kept
 *    out, and its connection timeout counts inactivity, which every
 *    trickled header line resets. kproxy always takes the new connection
 *    and closes the one that has waited longest (http/mhd-conns.h decides
 *    which). MHD owns the descriptors, so the one chosen is shut down: MHD
 *    sees the hang-up on its next run and closes it the ordinary way, and
 *    its notices keep the book of connections in step.
 *
 * Upstream's servers are Go handlers (an http.ServeMux for the metrics and
 * health servers, one bare handler for a health-check node port): they
 * ignore the method and any request body, and keep connections alive. mhd.c
 * does the same for every owner, so each owner is just a function from a
 * path to a reply. Upstream's http.Server has neither timeouts nor a
 * connection limit: a goroutine per connection, bounded by the process's
 * open files. Here one thread serves them all within the limits above.
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
#include <unistd.h>

#include "ev/ev.h"
#include "http/mhd-conns.h"
#include "util/cleanup.h"
#include "util/inet.h"
#include "util/log.h"

/* A busy connection (a request read, its answer not yet taken) on which
 * nothing moves for this long is closed by MHD: a client that stopped
 * reading. Idle ones wait for much less (mhd_limits.wait_ms). */
#define MHD_SERVER_CONNECTION_TIMEOUT_S 30u

/* Connections accepted per wake-up before MHD runs: the connections just
 * taken are served, and the loop's other work gets its turn, between
 * batches of a flood. */
#define MHD_ACCEPT_BATCH 32u

/* How long accepting pauses when the process is out of file descriptors
 * and none of this server's connections can make room. */
#define MHD_ACCEPT_PAUSE_MS 100u

struct mhd_server {
        struct ev_loop *loop;
        char *name;
        struct inet_addr addr;
        uint16_t want_port;             /* as asked for: 0 lets the kernel pick */
        struct mhd_limits limits;
        uint64_t retry_ms;              /* 0: a failed bind is the caller's error */
        struct ev_timer *retry;         /* armed while the bind waits for its next try */
        unsigned failures;              /* binds failed in a row */
        struct MHD_Daemon *daemon;
        int epoll_fd;                   /* MHD's own; registered with the loop */
        int listen_fd;                  /* ours; registered with the loop while accepting */
        struct ev_timer *timer;         /* armed while MHD or the book wants a wake-up */
        struct ev_timer *resume;        /* armed while accepting pauses */
        int accept_error;               /* the last accept() failure logged; 0 after a success */
        struct mhd_conns *conns;        /* the connections held */
        struct mhd_conn *adding;        /* during MHD_add_connection(): for MHD's start notice */
        bool told_full;                 /* the first time room was made has been logged */
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

/* The book's record of an MHD connection (its socket context, set by
 * MHD's start notice). */
static struct mhd_conn *mhd_conn_of(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return info ? info->socket_context : NULL;
}

/* MHD's notice that a connection starts (inside MHD_add_connection(): the
 * record mhd_take() made becomes its socket context) or is closed (its
 * record goes). */
static void mhd_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                              enum MHD_ConnectionNotificationCode code) {
        struct mhd_server *s = cls;

        (void) c;
        if (code == MHD_CONNECTION_NOTIFY_STARTED) {
                *socket_context = TAKE_PTR(s->adding);
                return;
        }
        if (*socket_context)
                mhd_conns_remove(*socket_context);
        *socket_context = NULL;
}

/* MHD's notice that a request is over (its answer sent, or the connection
 * lost): the connection waits for the next one. */
static void mhd_on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                             enum MHD_RequestTerminationCode toe) {
        struct mhd_server *s = cls;
        struct mhd_conn *conn = mhd_conn_of(c);

        (void) req_cls;
        (void) toe;
        if (conn)
                mhd_conns_idle(conn, ev_now_ms(s->loop));
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
                struct mhd_conn *conn = mhd_conn_of(c);

                *req_cls = s;   /* any non-NULL marks "headers seen" */
                if (conn)
                        mhd_conns_busy(conn, ev_now_ms(s->loop));
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
         * later it narrates clients that hung up, a line per connection
         * that anyone who can connect could have written by the thousand:
         * debugging detail, below kube-proxy's usual -v=2. */
        if (s->starting)
                log_warning("%s: %s", s->name, msg);
        else
                log_v(4, "%s: %s", s->name, msg);
}

static void mhd_on_timer(struct ev_loop *l, void *userdata);

/* The next wake-up: MHD's deadline or the book's, whichever comes first. */
static void mhd_rearm(struct mhd_server *s) {
        MHD_UNSIGNED_LONG_LONG mhd_ms;
        uint64_t now = ev_now_ms(s->loop), due, after = UINT64_MAX;

        s->timer = ev_timer_cancel(s->loop, s->timer);
        if (MHD_get_timeout(s->daemon, &mhd_ms) == MHD_YES)
                after = (uint64_t) mhd_ms;
        if (mhd_conns_deadline(s->conns, &due) && (due <= now || due - now < after))
                after = due <= now ? 0 : due - now;
        if (after == UINT64_MAX)
                return;
        s->timer = ev_timer_add(s->loop, after, mhd_on_timer, s);
        if (!s->timer)
                log_warning("%s: out of memory arming a timer, idle connections stay open until the next "
                            "request, ignoring", s->name);
}

/* Lets go of c: its socket is shut down, and MHD's next run sees the
 * hang-up and closes it. */
static void mhd_let_go(struct mhd_conn *c) {
        (void) shutdown(mhd_conn_fd(c), SHUT_RDWR);
        mhd_conns_closing(c);
}

/* Closes the idle connections past their time, runs MHD (which also
 * closes what was let go of), and re-reads the deadlines. */
static void mhd_run(struct mhd_server *s) {
        struct mhd_conn *c;

        while ((c = mhd_conns_expired(s->conns, ev_now_ms(s->loop))))
                mhd_let_go(c);
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

/* Books a connection just accepted, making room first if a limit is
 * reached, and hands it to MHD. */
static void mhd_take(struct mhd_server *s, int fd, const struct sockaddr *sa, socklen_t len) {
        struct mhd_conn *victim = mhd_conns_victim(s->conns, sa), *c;

        if (victim) {
                if (!s->told_full)
                        log_info("%s: a connection limit is reached (%u in all, %u from one client): from now "
                                 "on the connection waiting longest makes room for each new one", s->name,
                                 s->limits.connections, s->limits.per_client);
                s->told_full = true;
                mhd_let_go(victim);
        }
        c = mhd_conns_add(s->conns, fd, sa, ev_now_ms(s->loop));
        if (!c) {
                close(fd);
                log_warning("%s: out of memory taking a connection, closing it", s->name);
                return;
        }
        s->adding = c;
        /* Fails only out of memory, or past MHD's backstop limit, which the
         * book keeps it under. */
        if (MHD_add_connection(s->daemon, fd, sa, len) != MHD_YES)
                log_warning("%s: cannot serve a new connection, closing it: %s", s->name, strerror(errno));
        /* MHD's start notice took the record, or MHD never started the
         * connection (and has closed fd). */
        if (s->adding) {
                mhd_conns_remove(s->adding);
                s->adding = NULL;
        }
}

static void mhd_on_listen(struct ev_loop *l, int fd, uint32_t events, void *userdata);

static void mhd_on_resume(struct ev_loop *l, void *userdata) {
        struct mhd_server *s = userdata;
        int r;

        s->resume = NULL;
        r = ev_io_add(l, s->listen_fd, EPOLLIN, mhd_on_listen, s);
        if (r < 0) {
                log_warning_errno(r, "%s: cannot watch the listening socket, retrying in %u ms", s->name,
                                  MHD_ACCEPT_PAUSE_MS);
                s->resume = ev_timer_add(l, MHD_ACCEPT_PAUSE_MS, mhd_on_resume, s);
        }
}

static bool mhd_short_of(int r) {
        return r == -EMFILE || r == -ENFILE || r == -ENOBUFS || r == -ENOMEM;
}

/* accept() failed with r at the first try of a wake-up, for the listening
 * socket (not one connection): a connection waits. Out of file descriptors
 * or memory, the connection waiting longest makes room if this server has
 * one; otherwise accepting pauses for a moment, as the waiting connection
 * would wake the loop again at once. A new failure is logged once. */
static void mhd_accept_failed(struct mhd_server *s, int r) {
        struct mhd_conn *c = mhd_conns_oldest(s->conns);

        if (c && mhd_short_of(r)) {
                mhd_let_go(c);
                return;
        }
        if (r != s->accept_error)
                log_warning_errno(r, "%s: cannot accept connections, pausing for %u ms", s->name,
                                  MHD_ACCEPT_PAUSE_MS);
        s->accept_error = r;
        s->resume = ev_timer_add(s->loop, MHD_ACCEPT_PAUSE_MS, mhd_on_resume, s);
        if (s->resume)
                (void) ev_io_del(s->loop, s->listen_fd);
}

/* A batch of accepts, then one run of MHD for the connections taken. */
static void mhd_on_listen(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct mhd_server *s = userdata;
        unsigned taken = 0;

        (void) l;
        (void) events;
        for (unsigned n = 0; n < MHD_ACCEPT_BATCH; n++) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof ss;
                int cfd = accept4(fd, (struct sockaddr *) &ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (cfd >= 0) {
                        s->accept_error = 0;
                        taken++;
                        mhd_take(s, cfd, (struct sockaddr *) &ss, len);
                        continue;
                }
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                        break;
                /* That one connection failed (reset while queued, refused
                 * by a rule): the next may not. */
                if (errno == EINTR || errno == ECONNABORTED || errno == EPERM || errno == EPROTO)
                        continue;
                /* The kernel reports a want of descriptors before it looks
                 * at the queue, so after a connection taken it says nothing
                 * of another waiting: MHD runs first (serving the ones
                 * taken), and the socket, readable while one waits, brings
                 * us back. */
                if (taken == 0 || !mhd_short_of(-errno))
                        mhd_accept_failed(s, -errno);
                break;
        }
        mhd_run(s);
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
static int mhd_listen(const struct inet_addr *a, uint16_t port, bool share, int *ret_fd, uint16_t *ret_port) {
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
        if (share && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
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

DEFINE_CLEANUP(struct mhd_server, mhd_server_free)

/* Binds, starts MHD on s and puts both on the loop. On failure nothing of
 * it is left open. */
static int mhd_start(struct mhd_server *s) {
        _cleanup_close_ int fd = -1;
        const union MHD_DaemonInfo *info;
        int r;

        r = mhd_listen(&s->addr, s->want_port, s->limits.share_port, &fd, &s->port);
        if (r < 0)
                return r;

        /* No MHD_USE_INTERNAL_POLLING_THREAD: MHD runs only inside MHD_run(),
         * on this thread. MHD's own connection limit is a backstop only: it
         * also counts the connections let go of until its next run closes
         * them (a batch at most), so it sits well above the book's. */
        s->starting = true;
        errno = 0;
        s->daemon = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL,
                                     mhd_handle, s,
                                     MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                                     MHD_OPTION_CONNECTION_TIMEOUT, MHD_SERVER_CONNECTION_TIMEOUT_S,
                                     MHD_OPTION_CONNECTION_LIMIT, 2 * s->limits.connections + MHD_ACCEPT_BATCH,
                                     MHD_OPTION_NOTIFY_CONNECTION, mhd_on_connection, s,
                                     MHD_OPTION_NOTIFY_COMPLETED, mhd_on_completed, s,
                                     MHD_OPTION_END);
        s->starting = false;
        if (!s->daemon) {
                s->port = 0;
                return errno > 0 ? -errno : -EIO;
        }

        info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        r = !info || info->epoll_fd < 0 ? -EIO : ev_io_add(s->loop, info->epoll_fd, EPOLLIN, mhd_on_io, s);
        if (r >= 0) {
                r = ev_io_add(s->loop, fd, EPOLLIN, mhd_on_listen, s);
                if (r < 0)
                        (void) ev_io_del(s->loop, info->epoll_fd);
        }
        if (r < 0) {
                MHD_stop_daemon(s->daemon);
                s->daemon = NULL;
                s->port = 0;
                return r;
        }
        s->epoll_fd = info->epoll_fd;
        s->listen_fd = fd;
        fd = -1;
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
                   const struct mhd_limits *limits, uint64_t retry_ms, mhd_handler_fn fn, void *userdata,
                   struct mhd_server **ret) {
        _cleanup_(mhd_server_freep) struct mhd_server *s = NULL;
        int r;

        assert(l);
        assert(name);
        assert(addr);
        assert(limits && limits->connections > 0);
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
                .limits = *limits,
                .retry_ms = retry_ms,
                .epoll_fd = -1,
                .listen_fd = -1,
                .conns = mhd_conns_new(limits->connections, limits->per_client, limits->wait_ms),
                .fn = fn,
                .userdata = userdata,
        };
        if (!s->name || !s->conns)
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
        s->resume = ev_timer_cancel(s->loop, s->resume);
        if (s->listen_fd >= 0)
                (void) ev_io_del(s->loop, s->listen_fd);
        if (s->epoll_fd >= 0)
                (void) ev_io_del(s->loop, s->epoll_fd);
        /* Closes the connections (their close notices empty the book) and
         * the epoll fd. */
        if (s->daemon)
                MHD_stop_daemon(s->daemon);
        if (s->listen_fd >= 0)
                close(s->listen_fd);
        mhd_conns_free(s->conns);
        free(s->name);
        free(s);
        return NULL;
}

uint16_t mhd_server_port(const struct mhd_server *s) {
        return s ? s->port : 0;
}

unsigned mhd_server_connections(const struct mhd_server *s) {
        return s ? mhd_conns_held(s->conns) : 0;
}
