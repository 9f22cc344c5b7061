/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/daemon.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "apply/exec.h"
#include "apply/iptables-known.h"
#include "apply/iptables.h"
#include "apply/nftables.h"
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
#include "proxy/proxier.h"
#include "proxy/setup.h"
#include "util/cleanup.h"
#include "util/log.h"

/* Upstream's informer selectors: services that another proxy serves, and
 * headless ones, never reach the proxier. */
#define SELECTOR "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name"

struct source {
        struct proxier *proxier;
        enum proxier_source src;
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

static void on_signal(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct signalfd_siginfo si;
        (void) events;
        (void) userdata;
        if (read(fd, &si, sizeof si) != sizeof si)
                return;
        log_info("Received signal %s, exiting; the rules stay in place", strsignal((int) si.ssi_signo));
        ev_stop(l);
}

static int setup_signals(struct ev_loop *l) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return -errno;
        int fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd < 0)
                return -errno;
        return ev_io_add(l, fd, EPOLLIN, on_signal, NULL) < 0 ? -EIO : fd;
}

/* IPv6 is programmed when this node's ip6tables works. */
static bool ipv6_usable(const struct iptables_tools *t) {
        const char *argv[] = {iptables_tool_name(t, 6, IPTABLES_TOOL_SAVE), "-t", "nat", NULL};
        return exec_run(argv, NULL, 0, NULL, NULL) == 0;
}

int daemon_cleanup(const struct kproxy_config *c, const struct daemon_opts *o) {
        /* Both modes' state, whatever mode is configured, as upstream, and
         * what --state-dir kept about it. */
        for (unsigned family = 4; family <= 6; family += 2) {
                char path[4096];
                if (iptables_known_file(c->state_dir, family, path, sizeof path) && unlink(path) < 0 &&
                    errno != ENOENT)
                        log_warning_errno(-errno, "Failed to remove %s, ignoring", path);
        }
        /* Each backend's, where a switch of backends (or a kube-proxy
         * image that guessed otherwise) may have left some. */
        int r = 0;
        for (unsigned family = 4; family <= 6; family += 2)
                for (enum iptables_backend b = IPTABLES_BACKEND_NFT; b <= IPTABLES_BACKEND_LEGACY; b++) {
                        if (o->iptables_backend != IPTABLES_BACKEND_AUTO && b != o->iptables_backend)
                                continue;
                        int q = iptables_cleanup_backend(b, (uint8_t) family);
                        if (r == 0 && q < 0)
                                r = q;
                }
        int q = nftables_cleanup();
        if (r == 0)
                r = q;
        if (r < 0) {
                log_error_errno(r, "Cleanup failed");
                return EXIT_FAILURE;
        }
        log_info("Removed kproxy's rules");
        return 0;
}

int daemon_init_only(const struct kproxy_config *c) {
        struct host_facts host = {0};
        int r = setup_node(c, c->hostname_override, sysctl_root(), &host);
        host_facts_done(&host);
        if (r < 0) {
                log_error_errno(r, "Node set-up failed");
                return EXIT_FAILURE;
        }
        log_info("Node set up and --init-only given, exiting");
        return 0;
}

int daemon_run(const struct kproxy_config *c, const struct daemon_opts *o) {
        struct host_facts host = {0};
        struct kube_conn conn = {0};
        struct ev_loop *loop = NULL;
        struct health_server *health = NULL;
        struct metrics *metrics = NULL;
        struct hcnp *hcnp = NULL;
        struct proxier *proxier = NULL;
        struct kube_client *client = NULL;
        struct source sources[_PROXIER_SOURCE_MAX];
        struct log_flusher flusher = {0};
        char err[KUBE_CONN_ERRLEN], field[300];
        int sigfd = -1, ret = EXIT_FAILURE, r;

        if (c->mode != PROXY_MODE_IPTABLES && c->mode != PROXY_MODE_NFTABLES) {
                log_error("Proxy mode %s is not supported: kproxy runs in iptables or nftables mode",
                          proxy_mode_to_string(c->mode));
                return EXIT_FAILURE;
        }
        signal(SIGPIPE, SIG_IGN);
        /* Restore inputs and table dumps are tens of megabytes at scale.
         * glibc raises its mmap threshold after freeing such a buffer (up to
         * 32 MiB), so the next ones came from the heap and stayed there as
         * freed memory; a fixed threshold keeps every large buffer mapped
         * and returned to the system when freed. */
        mallopt(M_MMAP_THRESHOLD, 1 << 20);
        /* The node set-up failing is not fatal: a proxy that runs with the
         * kernel's defaults serves better than one in a crash loop. */
        r = setup_node(c, c->hostname_override, sysctl_root(), &host);
        if (r == -ENOMEM)
                goto out;
        host_probe_iptables(&host, o->iptables_backend);
        if (host.iptables_missing && c->mode == PROXY_MODE_IPTABLES) {
                log_error("Cannot run in iptables mode: %s", host.iptables_why);
                goto out;
        }
        if (c->mode == PROXY_MODE_IPTABLES)
                log_info("iptables backend %s, run as %s: %s", iptables_backend_to_string(host.iptables.backend),
                         iptables_tool_name(&host.iptables, 4, IPTABLES_TOOL_CMD), host.iptables_why);
        /* nftables mode asks ip6tables only this, and with the nf_tables
         * tools when it can: asking legacy about a table creates it. */
        struct iptables_tools v6 = host.iptables;
        if (c->mode == PROXY_MODE_NFTABLES)
                iptables_tools_find(IPTABLES_BACKEND_NFT, &v6);
        setup_oom_score_adj(c, sysctl_root());
        const char *node = c->hostname_override && *c->hostname_override ? c->hostname_override : host.hostname;
        if (!node || !*node) {
                log_error("Cannot tell this node's name: set --hostname-override");
                goto out;
        }
        r = kube_conn_resolve(c->kubeconfig, c->master, &conn, err);
        if (r < 0) {
                log_error("Cannot configure the API connection: %s", err);
                goto out;
        }
        loop = ev_loop_new();
        if (!loop)
                goto out;
        sigfd = setup_signals(loop);
        if (sigfd < 0) {
                log_error_errno(sigfd, "Failed to set up signal handling");
                goto out;
        }
        if (c->healthz_bind_address) {
                r = health_server_new(loop, c->healthz_bind_address, 2 * config_mode_sync(c)->sync_period_ms,
                                      c->bind_address_hard_fail ? 0 : MHD_BIND_RETRY_MS, &health);
                if (r < 0)
                        goto out;       /* logged, naming the address */
        }
        r = metrics_new(loop, c->metrics_bind_address, c, &metrics);
        if (r < 0)
                goto out;       /* logged, naming the address */
        health_server_set_metrics(health, metrics);
        r = hcnp_new(loop, &hcnp);
        if (r < 0)
                goto out;
        struct proxier_opts po = {
                .config = c,
                .host = &host,
                .node_name = node,
                .health = health,
                .metrics = metrics,
                .hcnp = hcnp,
                .ipv6 = ipv6_usable(&v6),
                /* Only nftables mode has a rule made from them (upstream's
                 * iptables mode watches them and does nothing with them).
                 * The gate is GA and locked on in 1.34. */
                .service_cidrs = c->mode == PROXY_MODE_NFTABLES &&
                                 config_feature_enabled(c, "MultiCIDRServiceAllocator"),
        };
        r = proxier_new(loop, &po, &proxier);
        if (r < 0)
                goto out;
        r = kube_client_new(loop, &conn, &client);
        if (r < 0)
                goto out;
        kube_client_set_rate(client, c->qps, c->burst);
        if (metrics) {
                kube_client_set_observer(client, on_api_request, metrics);
                metrics_api_transport(metrics);
        }

        snprintf(field, sizeof field, "metadata.name=%s", node);
        const struct kube_watch_opts watches[_PROXIER_SOURCE_MAX] = {
                [PROXIER_SERVICES] = {"/api/v1/services", SELECTOR, NULL, 0, o->watch_idle_timeout_ms, on_kube_keys},
                [PROXIER_SLICES] = {"/apis/discovery.k8s.io/v1/endpointslices", SELECTOR, NULL, 0,
                                    o->watch_idle_timeout_ms, on_kube_keys},
                [PROXIER_NODE] = {"/api/v1/nodes", NULL, field, 0, o->watch_idle_timeout_ms, on_kube_keys},
                /* Optional: an API server older than 1.33 answers 404. */
                [PROXIER_SERVICE_CIDRS] = {"/apis/networking.k8s.io/v1/servicecidrs", NULL, NULL, 0,
                                           o->watch_idle_timeout_ms, on_kube_keys, .optional = true},
        };
        for (int i = 0; i < _PROXIER_SOURCE_MAX; i++) {
                if (i == PROXIER_SERVICE_CIDRS && !po.service_cidrs)
                        continue;
                sources[i] = (struct source) {proxier, (enum proxier_source) i};
                r = kube_watch_start(client, &watches[i], on_kube_event, &sources[i], NULL);
                if (r < 0)
                        goto out;
        }
        flusher.period_ms = c->log_flush_frequency_ms ? c->log_flush_frequency_ms : 5000;
        flusher.timer = ev_timer_add(loop, flusher.period_ms, on_log_flush, &flusher);
        log_info("kproxy %s running for node %s against %s (%s mode%s)", KPROXY_VERSION, node, conn.server,
                 proxy_mode_to_string(c->mode),
                 po.ipv6 ? ", IPv4 and IPv6" : ", IPv4");
        r = ev_run(loop);
        if (r < 0) {
                log_error_errno(r, "Event loop failed");
                goto out;
        }
        ret = 0;
out:
        flusher.timer = ev_timer_cancel(loop, flusher.timer);
        log_flush();
        kube_client_free(client);
        proxier_free(proxier);
        hcnp_free(hcnp);
        metrics_free(metrics);
        health_server_free(health);
        if (sigfd >= 0) {
                ev_io_del(loop, sigfd);
                close(sigfd);
        }
        ev_loop_free(loop);
        kube_conn_done(&conn);
        host_facts_done(&host);
        return ret;
}
