/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the health server: upstream's ProxyHealthServer, answered on
 * the loop thread. State is two timestamps per IP family (the last
 * successful sync, and the oldest change queued since); a request only reads
 * them, so every answer is computed from the clocks at the moment it is asked.
 *
 * libmicrohttpd runs in its "external epoll" mode: it keeps its own epoll
 * set (listen socket and connections), and that one fd sits in kproxy's loop.
 * When it is readable, or when MHD's own deadline (MHD_get_timeout: idle
 * connections, data it has buffered but not yet processed) comes due, we call
 * MHD_run(), which never blocks. The deadline is re-read after every run.
 *
 * The listen socket is ours, not MHD's: MHD_start_daemon() reports a failed
 * bind only as NULL, and callers need the errno (-EADDRINUSE is the usual
 * story of a second kube-proxy on the node).
 *
 * Clocks: CLOCK_MONOTONIC decides health (a stepped wall clock must not make
 * a proxy healthy or unhealthy); CLOCK_REALTIME is only printed.
 */
#include "http/health.h"
#include "http/metrics.h"

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
#include <time.h>
#include <unistd.h>

#include "ev/ev.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/inet.h"
#include "util/log.h"

/* Upstream's Go server has no timeouts, but it gives every connection its own
 * goroutine. Here one thread serves them all, so an idle or stalled client
 * must not hold a slot forever; probes send one small request at a time. */
#define HEALTH_CONNECTION_TIMEOUT_S 30u
#define HEALTH_CONNECTION_LIMIT 256u

enum health_family {
        HEALTH_FAMILY_IPV4,
        HEALTH_FAMILY_IPV6,
        _HEALTH_FAMILY_MAX,
};

/* v1.IPFamily's values: the keys of upstream's "status" map. */
static const char *const health_family_table[_HEALTH_FAMILY_MAX] = {
        [HEALTH_FAMILY_IPV4] = "IPv4",
        [HEALTH_FAMILY_IPV6] = "IPv6",
};

struct health_family_state {
        bool seen;                      /* upstream: present in lastUpdatedMap */
        bool pending;                   /* upstream: present in oldestPendingQueuedMap */
        struct timespec last_updated;   /* CLOCK_REALTIME */
        uint64_t oldest_pending_ns;     /* CLOCK_MONOTONIC */
};

struct health_server {
        struct ev_loop *loop;
        struct MHD_Daemon *daemon;
        int epoll_fd;                   /* MHD's own; registered with the loop */
        struct ev_timer *timer;         /* armed while MHD wants a wake-up */
        bool starting;                  /* MHD's messages are warnings until it runs */
        uint16_t port;
        uint64_t timeout_ns;
        struct timespec started;        /* CLOCK_REALTIME */
        bool node_eligible;
        bool synced_once;               /* a sync has succeeded since start */
        struct metrics *metrics;        /* counts answers by code; may be NULL */
        struct health_family_state families[_HEALTH_FAMILY_MAX];
};

static uint64_t health_monotonic_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static struct timespec health_realtime(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return ts;
}

static bool health_timespec_after(const struct timespec *a, const struct timespec *b) {
        return a->tv_sec != b->tv_sec ? a->tv_sec > b->tv_sec : a->tv_nsec > b->tv_nsec;
}

static struct health_family_state *health_family(struct health_server *h, int family) {
        assert(family == 4 || family == 6);
        return &h->families[family == 4 ? HEALTH_FAMILY_IPV4 : HEALTH_FAMILY_IPV6];
}

/* A family becomes known on its first event. Upstream's proxier marks it
 * updated when its sync loop starts, "in case Sync() never succeeds"; the
 * server's start stands in for that moment, so a family whose first sync never
 * comes reports that time as its lastUpdated. */
static void health_family_see(const struct health_server *h, struct health_family_state *f) {
        if (f->seen)
                return;
        f->seen = true;
        f->last_updated = h->started;
}

void health_server_queued(struct health_server *h, int family) {
        struct health_family_state *f;

        if (!h)
                return;
        f = health_family(h, family);
        health_family_see(h, f);
        /* Only the oldest unsynced change counts: a steady stream of changes
         * must not keep pushing the deadline out. */
        if (!f->pending) {
                f->pending = true;
                f->oldest_pending_ns = health_monotonic_ns();
        }
}

void health_server_synced(struct health_server *h, int family) {
        struct health_family_state *f;

        if (!h)
                return;
        f = health_family(h, family);
        h->synced_once = true;
        f->seen = true;
        f->pending = false;
        f->last_updated = health_realtime();
}

/* Node eligibility belongs to the Node watch, which is not wired yet; until a
 * caller feeds it, it stays at upstream's starting value, true. */
void health_server_set_metrics(struct health_server *h, struct metrics *m) {
        if (h)
                h->metrics = m;
}

void health_server_set_node_eligible(struct health_server *h, bool eligible) {
        if (h)
                h->node_eligible = eligible;
}

int health_server_port(const struct health_server *h) {
        return h ? h->port : 0;
}

/* Go's RFC 3339 with nanoseconds (time.RFC3339Nano, what encoding/json
 * prints): trailing zeros of the fraction dropped, no fraction at all on a
 * whole second. {0, 0} is Go's zero time.Time. Always UTC: kube-proxy's
 * image has no time zone, so Local is UTC there too. */
static void health_put_time(struct buf *b, const struct timespec *ts) {
        struct tm tm;
        char frac[24];

        if (ts->tv_sec == 0 && ts->tv_nsec == 0) {
                buf_puts(b, "\"0001-01-01T00:00:00Z\"");
                return;
        }
        gmtime_r(&ts->tv_sec, &tm);
        buf_printf(b, "\"%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                   tm.tm_hour, tm.tm_min, tm.tm_sec);
        if (ts->tv_nsec != 0) {
                int n = snprintf(frac, sizeof frac, "%09ld", (long) ts->tv_nsec);
                while (n > 0 && frac[n - 1] == '0')
                        frac[--n] = '\0';
                buf_printf(b, ".%s", frac);
        }
        buf_puts(b, "Z\"");
}

/* The body of /healthz (node = true) or /livez, and its status code.
 * Upstream v1.33 marshals a ProxyHealth struct with encoding/json, so the
 * layout is Go's: fields in struct order without spaces, nodeEligible only on
 * /healthz, status left out while no family is known, map keys sorted.
 * "healthy" is the proxier's health alone; node eligibility only changes the
 * status code. A healthy answer reports lastUpdated as now, which upstream
 * keeps for compatibility with releases that stamped every sync loop run; an
 * unhealthy one the newest sync of any family.
 *
 * v1.31 and v1.32 printed only lastUpdated, currentTime (and nodeEligible)
 * with fmt's %q, i.e. Go's time.String() ("2006-01-02 15:04:05.999999999
 * +0000 UTC m=+12.3"), whose monotonic suffix has no meaning outside the Go
 * process; kproxy follows v1.33, the newest it targets. */
static unsigned health_body(const struct health_server *h, bool node, struct buf *b) {
        struct timespec now = health_realtime(), last = {0, 0};
        uint64_t mono = health_monotonic_ns();
        bool healthy = true, any = false, family_healthy[_HEALTH_FAMILY_MAX];

        for (size_t i = 0; i < _HEALTH_FAMILY_MAX; i++) {
                const struct health_family_state *f = &h->families[i];

                family_healthy[i] = true;
                if (!f->seen)
                        continue;
                any = true;
                if (health_timespec_after(&f->last_updated, &last))
                        last = f->last_updated;
                /* Upstream: healthy while now - oldestPendingQueued < healthTimeout. */
                if (f->pending && mono - f->oldest_pending_ns >= h->timeout_ns)
                        family_healthy[i] = healthy = false;
        }
        /* kproxy's one departure from upstream: /healthz (readiness) also
         * waits for the first successful sync, so a DaemonSet rollout moves
         * on only once the new proxy has programmed the node; /livez keeps
         * upstream's meaning (alive while starting). */
        if (node && !h->synced_once)
                healthy = false;
        bool ok = healthy && (!node || h->node_eligible);

        buf_puts(b, "{\"lastUpdated\":");
        health_put_time(b, ok ? &now : &last);
        buf_puts(b, ",\"currentTime\":");
        health_put_time(b, &now);
        if (node)
                buf_printf(b, ",\"nodeEligible\":%s", h->node_eligible ? "true" : "false");
        buf_printf(b, ",\"healthy\":%s", healthy ? "true" : "false");
        if (any) {
                const char *sep = "";

                buf_puts(b, ",\"status\":{");
                for (size_t i = 0; i < _HEALTH_FAMILY_MAX; i++) {
                        if (!h->families[i].seen)
                                continue;
                        buf_printf(b, "%s\"%s\":{\"lastUpdated\":", sep, health_family_table[i]);
                        health_put_time(b, &h->families[i].last_updated);
                        buf_printf(b, ",\"healthy\":%s}", family_healthy[i] ? "true" : "false");
                        sep = ",";
                }
                buf_putc(b, '}');
        }
        buf_putc(b, '}');
        return ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE;
}

static enum MHD_Result health_respond(struct MHD_Connection *c, unsigned status, const char *type,
                                      const struct buf *body) {
        struct MHD_Response *r;
        enum MHD_Result ret = MHD_NO;

        r = MHD_create_response_from_buffer(body->len, body->data, MHD_RESPMEM_MUST_COPY);
        if (!r)
                return MHD_NO;  /* out of memory: MHD closes the connection */
        if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type) == MHD_YES &&
            MHD_add_response_header(r, "X-Content-Type-Options", "nosniff") == MHD_YES)
                ret = MHD_queue_response(c, status, r);
        MHD_destroy_response(r);
        return ret;
}

/* Upstream's handlers sit on an http.ServeMux under exact paths and ignore the
 * method, so POST /healthz gets the same answer as GET; anything else is Go's
 * NotFound. HEAD loses the body in MHD, keeping Content-Length, as in Go.
 *
 * MHD calls this once when the headers are in, once per piece of request body,
 * and once more at the end. Answering on the first call would make MHD close
 * every connection after the reply (it cannot know the body is unwanted), so
 * the answer waits for the last call and any body is dropped as it comes:
 * connections stay alive as they do with Go's server. */
static enum MHD_Result health_handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                     const char *version, const char *upload_data, size_t *upload_data_size,
                                     void **req_cls) {
        struct health_server *h = cls;
        _cleanup_(buf_done) struct buf body = BUF_INIT;
        unsigned status;

        (void) method;
        (void) version;
        (void) upload_data;

        if (!*req_cls) {
                *req_cls = h;   /* any non-NULL marks "headers seen" */
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                *upload_data_size = 0;
                return MHD_YES;
        }

        bool healthz = strcmp(url, "/healthz") == 0;
        if (healthz || strcmp(url, "/livez") == 0) {
                status = health_body(h, healthz, &body);
                metrics_health_answer(h->metrics, healthz ? "healthz" : "livez", status);
                return health_respond(c, status, "application/json", &body);
        }
        buf_puts(&body, "404 page not found\n");
        return health_respond(c, MHD_HTTP_NOT_FOUND, "text/plain; charset=utf-8", &body);
}

static void health_mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void health_mhd_log(void *cls, const char *fmt, va_list ap) {
        const struct health_server *h = cls;
        char msg[512];
        size_t n;

        vsnprintf(msg, sizeof msg, fmt, ap);
        n = strlen(msg);
        while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
                msg[--n] = '\0';
        /* At start MHD explains a failure we are about to report; later it
         * mostly narrates clients that hung up. */
        if (h->starting)
                log_warning("healthz server: %s", msg);
        else
                log_v(2, "healthz server: %s", msg);
}

static void health_on_timer(struct ev_loop *l, void *userdata);

static void health_rearm(struct health_server *h) {
        MHD_UNSIGNED_LONG_LONG ms;

        h->timer = ev_timer_cancel(h->loop, h->timer);
        if (MHD_get_timeout(h->daemon, &ms) != MHD_YES)
                return;
        h->timer = ev_timer_add(h->loop, (uint64_t) ms, health_on_timer, h);
        if (!h->timer)
                log_warning("healthz server: out of memory arming a timer, idle connections stay open until "
                            "the next request, ignoring");
}

static void health_run(struct health_server *h) {
        if (MHD_run(h->daemon) != MHD_YES)
                log_warning("healthz server: MHD_run() failed, ignoring");
        health_rearm(h);
}

static void health_on_timer(struct ev_loop *l, void *userdata) {
        struct health_server *h = userdata;

        (void) l;
        h->timer = NULL;        /* fired: the loop has freed it */
        health_run(h);
}

static void health_on_io(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        (void) l;
        (void) fd;
        (void) events;
        health_run(userdata);
}

/* "IP:PORT", "[IP]:PORT" (Go's SplitHostPort: an IPv6 address needs the
 * brackets, an IPv4 one may have them). No host names, no zones, no empty
 * port. */
static int health_parse_bind(const char *s, struct inet_addr *ret_addr, uint16_t *ret_port) {
        char host[INET_ADDR_STRLEN];
        const char *h, *p;
        size_t hl;
        unsigned long port = 0;
        struct inet_addr a;

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

/* The listening socket, the way Go's net.Listen("tcp", addr) makes upstream's:
 * SO_REUSEADDR, and IPV6_V6ONLY off, so an unspecified address (0.0.0.0 as
 * much as ::) gets one dual-stack socket, falling back to IPv4 only on a
 * kernel without IPv6. */
static int health_listen(const struct inet_addr *a, uint16_t port, int *ret_fd) {
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
        *ret_fd = fd;
        fd = -1;
        return 0;
}

static void health_server_freep(struct health_server **h) {
        health_server_free(*h);
}

int health_server_new(struct ev_loop *l, const char *bind, uint64_t timeout_ms, struct health_server **ret) {
        _cleanup_(health_server_freep) struct health_server *h = NULL;
        _cleanup_close_ int fd = -1;
        const union MHD_DaemonInfo *info;
        struct inet_addr a;
        uint16_t port;
        int r;

        assert(l);
        assert(ret);

        if (!bind) {
                *ret = NULL;
                return 0;
        }
        r = health_parse_bind(bind, &a, &port);
        if (r < 0)
                return log_error_errno(r, "Invalid healthz bind address \"%s\" (must be IP:port)", bind);
        if (port == 0) {
                log_v(2, "Healthz server disabled (port 0 in \"%s\")", bind);
                *ret = NULL;
                return 0;
        }

        h = calloc(1, sizeof *h);
        if (!h)
                return log_error_errno(-ENOMEM, "Failed to start proxy healthz on %s", bind);
        *h = (struct health_server) {
                .loop = l,
                .epoll_fd = -1,
                .port = port,
                .timeout_ns = timeout_ms > UINT64_MAX / 1000000u ? UINT64_MAX : timeout_ms * 1000000u,
                .started = health_realtime(),
                .node_eligible = true,
        };

        r = health_listen(&a, port, &fd);
        if (r < 0)
                return log_error_errno(r, "Failed to start proxy healthz on %s", bind);

        /* No MHD_USE_INTERNAL_POLLING_THREAD: MHD runs only inside MHD_run(),
         * on this thread. MHD_USE_DUAL_STACK is not needed: the socket is
         * ours and already has IPV6_V6ONLY off. */
        h->starting = true;
        errno = 0;
        h->daemon = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, health_handle, h,
                                     MHD_OPTION_EXTERNAL_LOGGER, health_mhd_log, h,
                                     MHD_OPTION_LISTEN_SOCKET, fd,
                                     MHD_OPTION_CONNECTION_TIMEOUT, HEALTH_CONNECTION_TIMEOUT_S,
                                     MHD_OPTION_CONNECTION_LIMIT, HEALTH_CONNECTION_LIMIT,
                                     MHD_OPTION_END);
        h->starting = false;
        if (!h->daemon)
                /* On failure the socket is still ours (closed on return). */
                return log_error_errno(errno > 0 ? -errno : -EIO, "Failed to start proxy healthz on %s", bind);
        fd = -1;        /* MHD_stop_daemon() closes it */

        info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info || info->epoll_fd < 0)
                return log_error_errno(-EIO, "Failed to start proxy healthz on %s: no epoll fd from libmicrohttpd",
                                       bind);
        h->epoll_fd = info->epoll_fd;
        r = ev_io_add(l, h->epoll_fd, EPOLLIN, health_on_io, h);
        if (r < 0)
                return log_error_errno(r, "Failed to start proxy healthz on %s", bind);
        health_rearm(h);

        log_v(3, "Starting healthz HTTP server on %s", bind);
        *ret = TAKE_PTR(h);
        return 0;
}

struct health_server *health_server_free(struct health_server *h) {
        if (!h)
                return NULL;
        h->timer = ev_timer_cancel(h->loop, h->timer);
        if (h->epoll_fd >= 0)
                (void) ev_io_del(h->loop, h->epoll_fd);
        /* Closes the connections, the listen socket and the epoll fd. */
        if (h->daemon)
                MHD_stop_daemon(h->daemon);
        free(h);
        return NULL;
}
