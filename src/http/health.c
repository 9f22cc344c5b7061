/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the health server: upstream's ProxyHealthServer, answered on
 * the loop thread. State is two timestamps per IP family (the last
 * successful sync, and the oldest change queued since); a request only reads
 * them, so every answer is computed from the clocks at the moment it is asked.
 * The socket, libmicrohttpd and its place on the loop are http/mhd.c's.
 *
 * Clocks: CLOCK_MONOTONIC decides health (a stepped wall clock must not make
 * a proxy healthy or unhealthy); CLOCK_REALTIME is only printed.
 */
#include "http/health.h"
#include "http/metrics.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/mhd.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/inet.h"
#include "util/log.h"

/* Probes (kubelet's, and load balancers' for externalTrafficPolicy
 * Cluster) send one small request at a time, all of it at once; these only
 * bound what misbehaving clients can hold, and a new probe always gets in
 * (http/mhd.h). */
static const struct mhd_limits health_limits = {
        .connections = 128,
        .per_client = 16,
        .wait_ms = 10000,
};

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
        struct mhd_server *server;
        uint64_t timeout_ns;
        struct timespec started;        /* CLOCK_REALTIME */
        bool node_eligible;
        bool synced_once;               /* a sync has succeeded since start */
        struct metrics *metrics;        /* counts answers by code; may be NULL */
        struct health_family_state families[_HEALTH_FAMILY_MAX];
        char *socket_lb;                /* owned; NULL: not shown */
        bool replaced;                  /* a successor is starting: /healthz not ready */
};

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
                f->oldest_pending_ns = clock_mono_ns();
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
        return h ? mhd_server_port(h->server) : 0;
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
        uint64_t mono = clock_mono_ns();
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
        if (node && (!h->synced_once || h->replaced))
                healthy = false;
        bool ok = healthy && (!node || h->node_eligible);

        buf_puts(b, "{\"lastUpdated\":");
        health_put_time(b, ok ? &now : &last);
        buf_puts(b, ",\"currentTime\":");
        health_put_time(b, &now);
        if (node)
                buf_printf(b, ",\"nodeEligible\":%s", h->node_eligible ? "true" : "false");
        buf_printf(b, ",\"healthy\":%s", healthy ? "true" : "false");
        if (h->socket_lb)
                buf_printf(b, ",\"socketLB\":\"%s\"", h->socket_lb);
        if (node && h->replaced)
                buf_puts(b, ",\"replaced\":\"successor starting\"");
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
        return ok ? 200 : 503;
}

/* Upstream's handlers sit on an http.ServeMux under exact paths and ignore the
 * method, so POST /healthz gets the same answer as GET; anything else is Go's
 * NotFound. */
static void health_handle(void *userdata, const struct mhd_request *req, struct mhd_reply *reply) {
        struct health_server *h = userdata;
        const char *path = mhd_request_path(req);
        bool healthz = strcmp(path, "/healthz") == 0;

        if (!healthz && strcmp(path, "/livez") != 0) {
                mhd_reply_not_found(reply);
                return;
        }
        reply->status = health_body(h, healthz, &reply->body);
        reply->content_type = "application/json";
        reply->nosniff = true;
        metrics_health_answer(h->metrics, healthz ? "healthz" : "livez", reply->status);
}

DEFINE_CLEANUP(struct health_server, health_server_free)

int health_server_new(struct ev_loop *l, const char *bind, uint64_t timeout_ms, uint64_t retry_ms,
                      bool share_port, struct health_server **ret) {
        _cleanup_(health_server_freep) struct health_server *h = NULL;
        struct inet_addr a;
        uint16_t port;
        int r;

        assert(l);
        assert(ret);

        if (!bind) {
                *ret = NULL;
                return 0;
        }
        r = mhd_parse_bind(bind, &a, &port);
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
                .timeout_ns = timeout_ms > UINT64_MAX / 1000000u ? UINT64_MAX : timeout_ms * 1000000u,
                .started = health_realtime(),
                .node_eligible = true,
        };

        /* 0.0.0.0, the default, is one dual-stack socket on [::] (IPv4 only
         * on a kernel without IPv6), as Go's net.Listen makes it. */
        struct mhd_limits limits = health_limits;
        limits.share_port = share_port;
        r = mhd_server_new(l, "healthz server", &a, port, &limits, retry_ms, health_handle, h, &h->server);
        if (r < 0)
                return log_error_errno(r, "Failed to start proxy healthz on %s", bind);

        log_v(3, "Starting healthz HTTP server on %s", bind);
        *ret = TAKE_PTR(h);
        return 0;
}

struct health_server *health_server_free(struct health_server *h) {
        if (!h)
                return NULL;
        mhd_server_free(h->server);
        free(h->socket_lb);
        free(h);
        return NULL;
}

void health_server_set_replaced(struct health_server *h, bool replaced) {
        if (h)
                h->replaced = replaced;
}

void health_server_set_socket_lb(struct health_server *h, const char *state) {
        if (!h)
                return;
        free(h->socket_lb);
        h->socket_lb = NULL;
        /* Our own words only: nothing in them to escape for JSON. */
        if (state && state[strcspn(state, "\"\\\n")] == 0)
                h->socket_lb = strdup(state);
}
