/* SPDX-License-Identifier: Apache-2.0 */
#include "daemon/daemon.h"

#include <errno.h>
#include <linux/capability.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "apply/sysctl.h"
#include "config/config.h"
#include "ev/ev.h"
#include "host/host.h"
#include "http/hcnp.h"
#include "http/health.h"
#include "http/metrics.h"
#include "http/mhd.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"
#include "kube/sources.h"
#include "proxy/backend.h"
#include "proxy/backends.h"
#include "proxy/proxier.h"
#include "daemon/setup.h"
#include "trace/trace.h"
#include "util/cleanup.h"
#include "util/log.h"

/* Upstream's informer selectors: services that another proxy serves, and
 * headless ones, never reach the proxier. */

struct source {
        struct proxier *proxier;
        enum intake_source src;
};

static void on_kube_event(void *userdata, enum kube_event ev, const char *key, const json_t *obj) {
        struct source *s = userdata;
        if (ev == KUBE_EVENT_SYNCED)
                proxier_synced(s->proxier, s->src);
        else
                proxier_object(s->proxier, s->src, key, ev == KUBE_EVENT_UPSERT ? obj : NULL);
}

static void on_kube_keys(void *userdata, void (*each)(const char *key, void *ctx), void *ctx) {
        struct source *s = userdata;
        proxier_keys(s->proxier, s->src, each, ctx);
}

/* The API client's requests, for client-go's metrics. */
static void on_api_request(void *userdata, const struct kube_request_report *r) {
        metrics_api_request(userdata, r->method, r->host, r->code, r->watch, r->seconds, r->waited,
                            r->response_bytes);
}

/* Buffered info lines (--log-*-info-buffer-size) wait at most
 * --log-flush-frequency. */
struct log_flusher {
        struct ev_timer *timer;
        uint64_t period_ms;
};

static void on_log_flush(struct ev_loop *l, void *userdata) {
        struct log_flusher *f = userdata;
        log_flush();
        f->timer = ev_timer_add(l, f->period_ms, on_log_flush, f);
}

/* The mode's backend; IPVS has none. */
static const struct backend_ops *mode_backend(const struct kproxy_config *c) {
        const struct backend_ops *ops = backend_for_mode(c->mode);
        if (!ops)
                log_error("Proxy mode %s is not supported: kproxy runs in " PROXY_MODE_NAMES " mode",
                          proxy_mode_to_string(c->mode));
        return ops;
}

/* The capabilities that the mode (and --socket-lb) cannot run without,
 * checked before anything changes: a unit or pod that grants too little
 * is refused with what is missing, not left to fail halfway. Returns 0 or
 * -EPERM (logged). */
static int check_caps(const struct backend_ops *ops, const struct backend_ops *companion) {
        static const char *const names[64] = {
                [CAP_NET_ADMIN] = "CAP_NET_ADMIN", [CAP_NET_RAW] = "CAP_NET_RAW",
                [CAP_NET_BIND_SERVICE] = "CAP_NET_BIND_SERVICE", [CAP_BPF] = "CAP_BPF",
                [CAP_PERFMON] = "CAP_PERFMON", [CAP_SYS_ADMIN] = "CAP_SYS_ADMIN",
        };
        const struct backend_ops *const need[] = {ops, companion};
        uint64_t have;
        int last, r = 0;

        if (host_caps(&have, &last) < 0)
                return 0;       /* no /proc: the kernel will say */
        for (size_t i = 0; i < ELEMENTSOF(need); i++) {
                uint64_t want = need[i] ? need[i]->caps : 0;
                /* Before CAP_BPF and CAP_PERFMON (5.8), CAP_SYS_ADMIN. */
                if ((want & 1ULL << CAP_BPF) && last < CAP_BPF)
                        want = (want & ~(1ULL << CAP_BPF | 1ULL << CAP_PERFMON)) | 1ULL << CAP_SYS_ADMIN;
                for (int cap = 0; cap < 64; cap++) {
                        if (!(want & 1ULL << cap) || (have & 1ULL << cap))
                                continue;
                        log_error("%s%s needs %s, which this process does not have: grant it (systemd: "
                                  "CapabilityBoundingSet= and AmbientCapabilities=, docs/deploy.md; Kubernetes: the "
                                  "container's securityContext)",
                                  i == 0 ? need[i]->name : "--socket-lb", i == 0 ? " mode" : "",
                                  names[cap] ? names[cap] : "?");
                        r = -EPERM;
                }
        }
        return r;
}

int daemon_cleanup(const struct kproxy_config *c, const struct daemon_opts *o) {
        struct host_facts host = {0};
        int r = 0;

        /* Every mode's rules, whatever mode is configured, as upstream,
         * and what --state-dir kept about them. */
        host_probe_iptables(&host, o->iptables_backend);
        for (const struct backend_ops *const *b = backend_all; *b; b++) {
                int q = (*b)->cleanup(c, &host);
                if (r == 0 && q < 0)
                        r = q;
        }
        for (const struct backend_ops *const *b = backend_companions; *b; b++) {
                int q = (*b)->cleanup(c, &host);
                if (r == 0 && q < 0)
                        r = q;
        }
        host_facts_done(&host);
        /* A kproxy trace's table, if a kernel without owned tables kept it
         * after the trace was killed. */
        int t = trace_cleanup();
        if (t > 0)
                log_info("Removed %d table%s %s left by kproxy trace", t, t == 1 ? "" : "s", TRACE_TABLE);
        else if (t < 0)
                log_warning_errno(t, "Could not look for kproxy trace's table %s, ignoring", TRACE_TABLE);
        if (r < 0) {
                log_error_errno(r, "Cleanup failed");
                return EXIT_FAILURE;
        }
        log_info("Removed kproxy's rules");
        return 0;
}

int daemon_init_only(const struct kproxy_config *c) {
        struct host_facts host = {0};
        _cleanup_(kube_conn_done) struct kube_conn conn = {0};
        const struct backend_ops *ops = mode_backend(c);
        char err[KUBE_CONN_ERRLEN];
        if (!ops || check_caps(ops, NULL) < 0)
                return EXIT_FAILURE;
        /* As upstream's: the API connection is configured (never used)
         * before the node is touched, so --init-only refuses what the
         * daemon would. */
        if (kube_conn_resolve(c->kubeconfig, c->master, &conn, err) < 0) {
                log_error("Cannot configure the API connection: %s", err);
                return EXIT_FAILURE;
        }
        int r = setup_node(c, ops, c->hostname_override, sysctl_root(), &host);
        host_facts_done(&host);
        if (r < 0) {
                log_error_errno(r, "Node set-up failed");
                return EXIT_FAILURE;
        }
        log_info("Node set up and --init-only given, exiting");
        return 0;
}

/* What runs on the loop, freed in reverse. */
struct daemon {
        const struct backend_ops *ops;
        struct host_facts host;
        struct kube_conn conn;
        struct ev_loop *loop;
        struct health_server *health;
        struct metrics *metrics;
        struct hcnp *hcnp;
        struct proxier *proxier;
        struct kube_client *client;
        struct source sources[_INTAKE_SOURCE_MAX];
        struct log_flusher flusher;
        struct ev_timer *drain;         /* after a hand-over: waiting for the last connections */
        uint64_t drain_until_ms;
        int sigfd;
};

/* After a hand-over, at most this long for the connections the process
 * still carries; SIGTERM (the old pod deleted) ends it sooner. */
#define DRAIN_MAX_MS (10 * 60 * 1000)
#define DRAIN_CHECK_MS 500

static void on_drain(struct ev_loop *l, void *userdata) {
        struct daemon *d = userdata;
        size_t busy = proxier_busy(d->proxier);

        d->drain = NULL;
        if (busy == 0 || ev_now_ms(l) >= d->drain_until_ms) {
                log_info("Finished the connections this process carried (%zu left open), exiting", busy);
                ev_stop(l);
                return;
        }
        d->drain = ev_timer_add(l, DRAIN_CHECK_MS, on_drain, d);
}

/* The successor serves the node now: the ports of the health, metrics
 * and health-check node port servers are its, and the API is its to
 * watch. Run from a timer, outside the callback that reported it. */
static void on_retire(struct ev_loop *l, void *userdata) {
        struct daemon *d = userdata;

        d->drain = NULL;
        proxier_detach_servers(d->proxier);
        d->client = kube_client_free(d->client);
        d->hcnp = hcnp_free(d->hcnp);
        d->metrics = metrics_free(d->metrics);
        d->health = health_server_free(d->health);
        d->drain_until_ms = ev_now_ms(l) + DRAIN_MAX_MS;
        log_info("Handed the node over to a successor; finishing the connections this process carries");
        d->drain = ev_timer_add(l, 0, on_drain, d);
}

static void on_handed_over(void *ctx) {
        struct daemon *d = ctx;
        d->drain = ev_timer_add(d->loop, 0, on_retire, d);
}

/* A mode that carries connections itself (userspace) finishes them, for
 * at most this long, before the process exits. */
#define STOP_DRAIN_MS 5000

static void on_signal(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct daemon *d = userdata;
        struct signalfd_siginfo si;
        (void) events;
        if (read(fd, &si, sizeof si) != sizeof si)
                return;
        const char *name = strsignal((int) si.ssi_signo);
        if (!d->drain && d->proxier && proxier_quiesce(d->proxier) > 0) {
                log_info("Received signal %s: taking no new connections, finishing the open ones "
                         "(at most %d s; signal again to exit now)", name, STOP_DRAIN_MS / 1000);
                d->drain_until_ms = ev_now_ms(l) + STOP_DRAIN_MS;
                d->drain = ev_timer_add(l, DRAIN_CHECK_MS, on_drain, d);
                return;
        }
        log_info("Received signal %s, exiting; %s", name, d->ops->stopped);
        ev_stop(l);
}

static int setup_signals(struct ev_loop *l, struct daemon *d) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return -errno;
        int fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd < 0)
                return -errno;
        return ev_io_add(l, fd, EPOLLIN, on_signal, d) < 0 ? -EIO : fd;
}

static void daemon_done(struct daemon *d) {
        d->flusher.timer = ev_timer_cancel(d->loop, d->flusher.timer);
        d->drain = ev_timer_cancel(d->loop, d->drain);
        log_flush();
        kube_client_free(d->client);
        proxier_free(d->proxier);
        hcnp_free(d->hcnp);
        metrics_free(d->metrics);
        health_server_free(d->health);
        if (d->sigfd >= 0) {
                ev_io_del(d->loop, d->sigfd);
                close(d->sigfd);
        }
        ev_loop_free(d->loop);
        kube_conn_done(&d->conn);
        host_facts_done(&d->host);
}

/* The loop, signals, /healthz, /metrics, health-check node ports. Returns
 * 0 or -errno (logged). */
static int start_servers(struct daemon *d, const struct kproxy_config *c, const struct backend_ops *ops) {
        int r;

        d->loop = ev_loop_new();
        if (!d->loop)
                return -ENOMEM;
        d->sigfd = setup_signals(d->loop, d);
        if (d->sigfd < 0)
                return log_error_errno(d->sigfd, "Failed to set up signal handling");
        if (c->healthz_bind_address) {
                r = health_server_new(d->loop, c->healthz_bind_address, 2 * config_mode_sync(c)->sync_period_ms,
                                      c->bind_address_hard_fail ? 0 : MHD_BIND_RETRY_MS, ops->hands_over, &d->health);
                if (r < 0)
                        return r;       /* logged, naming the address */
        }
        r = metrics_new(d->loop, c->metrics_bind_address, c, ops->name, &d->metrics);
        if (r < 0)
                return r;       /* logged, naming the address */
        health_server_set_metrics(d->health, d->metrics);
        return hcnp_new(d->loop, &d->hcnp);
}

/* The API client and a watch per source. Returns 0 or -errno (logged). */
static int start_watches(struct daemon *d, const struct kproxy_config *c, const struct daemon_opts *o,
                         const char *node, bool service_cidrs) {
        char field[300];
        int r = kube_client_new(d->loop, &d->conn, &d->client);
        if (r < 0)
                return r;
        kube_client_set_rate(d->client, c->qps, c->burst);
        r = kube_client_set_content_type(d->client, c->content_type, c->accept_content_types);
        if (r < 0)
                return log_error_errno(r, "clientConnection.acceptContentTypes: not an Accept header's value");
        if (d->metrics) {
                kube_client_set_observer(d->client, on_api_request, d->metrics);
                metrics_api_transport(d->metrics);
        }
        struct kube_watch_opts watches[_INTAKE_SOURCE_MAX];
        kube_sources(node, o->watch_idle_timeout_ms, on_kube_keys, field, watches);
        for (int i = 0; i < _INTAKE_SOURCE_MAX; i++) {
                if (i == INTAKE_SERVICE_CIDRS && !service_cidrs)
                        continue;
                d->sources[i] = (struct source) {d->proxier, (enum intake_source) i};
                r = kube_watch_start(d->client, &watches[i], on_kube_event, &d->sources[i], NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

int daemon_run(const struct kproxy_config *c, const struct daemon_opts *o) {
        const struct backend_ops *ops = mode_backend(c);
        struct daemon d = {.ops = ops, .sigfd = -1};
        _cleanup_free_ char *hostname = NULL;
        char err[KUBE_CONN_ERRLEN];
        int ret = EXIT_FAILURE, r;

        if (!ops)
                return EXIT_FAILURE;
        if (c->socket_lb && !ops->conntrack) {
                log_error("--socket-lb works beside iptables or nftables mode, not %s mode", ops->name);
                return EXIT_FAILURE;
        }
        if (check_caps(ops, c->socket_lb ? backend_companions[0] : NULL) < 0)
                return EXIT_FAILURE;
        /* Principle of the start-up order (upstream's): whatever can make
         * kproxy refuse to run is found before anything on the node is
         * changed, so a bad flag, file or credential leaves the node as it
         * was (route_localnet=1 without the rule that guards it would be
         * CVE-2020-8558's set-up). The API connection's configuration, the
         * node's name and the servers' addresses first; then the node. */
        r = kube_conn_resolve(c->kubeconfig, c->master, &d.conn, err);
        if (r < 0) {
                log_error("Cannot configure the API connection: %s", err);
                goto out;
        }
        const char *node = c->hostname_override && *c->hostname_override ? c->hostname_override : NULL;
        if (!node && host_name(&hostname) == 0)
                node = hostname;
        if (!node) {
                log_error("Cannot tell this node's name: set --hostname-override");
                goto out;
        }
        signal(SIGPIPE, SIG_IGN);
        /* Restore inputs and table dumps are tens of megabytes at scale.
         * glibc raises its mmap threshold after freeing such a buffer (up to
         * 32 MiB), so the next ones came from the heap and stayed there as
         * freed memory; a fixed threshold keeps every large buffer mapped
         * and returned to the system when freed. */
        mallopt(M_MMAP_THRESHOLD, 1 << 20);
        if (start_servers(&d, c, ops) < 0)
                goto out;
        /* The node set-up failing is not fatal: a proxy that runs with the
         * kernel's defaults serves better than one in a crash loop. */
        r = setup_node(c, ops, node, sysctl_root(), &d.host);
        if (r == -ENOMEM)
                goto out;
        host_probe_iptables(&d.host, o->iptables_backend);
        setup_oom_score_adj(c, sysctl_root());
        struct proxier_opts po = {
                .config = c,
                .backend = ops,
                .host = &d.host,
                .node_name = node,
                .health = d.health,
                .metrics = d.metrics,
                .hcnp = d.hcnp,
                .ipv6 = ops->ipv6_usable(&d.host),
                /* Only a mode with a rule made from them watches them
                 * (upstream's iptables mode watches them and does nothing
                 * with them). The gate is GA and locked on in 1.34. */
                .service_cidrs = ops->service_cidrs && config_feature_enabled(c, "MultiCIDRServiceAllocator"),
                .handed_over = on_handed_over,
                .ctx = &d,
                .companion = c->socket_lb ? backend_companions[0] : NULL,
        };
        if (proxier_new(d.loop, &po, &d.proxier) < 0 || start_watches(&d, c, o, node, po.service_cidrs) < 0)
                goto out;
        d.flusher.period_ms = c->log_flush_frequency_ms ? c->log_flush_frequency_ms : 5000;
        d.flusher.timer = ev_timer_add(d.loop, d.flusher.period_ms, on_log_flush, &d.flusher);
        log_info("kproxy %s running for node %s against %s (%s mode%s)", KPROXY_VERSION, node, d.conn.server,
                 ops->name, po.ipv6 ? ", IPv4 and IPv6" : ", IPv4");
        r = ev_run(d.loop);
        if (r < 0) {
                log_error_errno(r, "Event loop failed");
                goto out;
        }
        ret = 0;
out:
        daemon_done(&d);
        return ret;
}
