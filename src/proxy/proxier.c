/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the sync loop: events are cheap (the intake decodes, stores
 * and marks the service changed) and never touch the kernel; a sync asks
 * the mode's backend (proxy/backend.h) to make each family's rules equal
 * to the model, which it does in whole transactions, so the kernel only
 * ever sees whole rulesets. The loop decides when, and how much: partial
 * (the changed services), resync (everything, trusting what the backend
 * wrote) or full (everything, trusting nothing: at first, after a failure,
 * when the backend saw someone else change the kernel). A failed sync is
 * logged, counted and retried as a full one. Nothing here knows which mode
 * runs.
 */
#include "host/render-params.h"
#include "proxy/proxier.h"
#include "proxy/debug-explain.h"
#include "proxy/debug-rules.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "ev/ev.h"
#include "host/admission.h"
#include "host/host.h"
#include "http/hcnp.h"
#include "http/health.h"
#include "http/metrics.h"
#include "kube/intake.h"
#include "model/admit.h"
#include "model/model.h"
#include "proxy/backend.h"
#include "proxy/backends.h"
#include "proxy/hcnp-feed.h"
#include "proxy/udp-stale.h"
#include "render/render.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/log.h"

#define FULL_SYNC_PERIOD_MS (3600 * 1000)

struct family_state {
        uint8_t family;
        /* The kernel holds what the backend last wrote: the next full sync
         * may be a resync. False at first, after a failure, and when the
         * backend saw someone else change the kernel. */
        bool trusted;
        bool reported;          /* such a finding was logged, and no sync has trusted the kernel since */
};

struct proxier {
        struct ev_loop *loop;
        const struct kproxy_config *cfg;
        struct host_facts host;         /* shallow copy: addrs borrowed */
        char *node_name;
        struct health_server *health;
        struct metrics *metrics;
        struct hcnp *hcnp;
        struct intake *intake;          /* the model and what changed in it */
        struct udp_stale *udp;
        const struct backend_ops *ops;  /* the mode */
        struct backend *backend;
        const struct backend_ops *companion_ops;        /* asked for (--socket-lb), or NULL */
        struct backend *companion;      /* NULL if not asked for or not created */
        bool companion_stale[2];        /* per family: its last sync failed, the next rewrites everything */
        bool watch_cidrs;               /* ServiceCIDRs come from a watch */
        bool synced[_INTAKE_SOURCE_MAX];
        bool initialized;
        bool need_full;                 /* the next sync writes everything */
        bool all_changed;               /* ... and every service may have changed (first sync, a Node change) */
        bool recheck;                   /* a full sync to check again on one that could not tell */
        bool leftovers;                 /* other modes' rules, to remove after the first sync */
        bool udp_changed;               /* a changed service has (or had) a UDP port */
        bool hcnp_changed;              /* ... or a health-check node port */
        bool retired;                   /* the backend handed the node over: no more syncs */
        void (*handed_over)(void *ctx);
        void *handed_over_ctx;
        uint64_t last_full_ms, last_sync_ms;
        uint64_t last_rules_ms;         /* /debug/rules' last render */
        uint64_t sync_due;              /* when sync_timer fires */
        struct ev_timer *sync_timer, *check_timer;
        struct family_state fam[2];
        uint8_t families[2];            /* lent to the backend */
        size_t n_fam;
        uint64_t n_syncs, n_failures;
        uint64_t n_kernel_changes;      /* findings of the backend's (env.changed) */
        /* The allow-lists of the addresses services claim, and their
         * refusals: now (a gauge), and since the start (a counter). */
        struct admit_policy admit;
        uint64_t refused_now[_ADMIT_LIST_MAX][_ADMIT_REASON_MAX];
        uint64_t refused_total[_ADMIT_LIST_MAX][_ADMIT_REASON_MAX];
};

static void schedule_sync(struct proxier *p, uint64_t delay_ms);

static const char *family_name(uint8_t family) {
        return family == 6 ? "IPv6" : "IPv4";
}

static double realtime_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* Asks for a sync as soon as min-sync-period allows. A sync already due
 * sooner (a pending change) is kept; one due later (the hourly full sync,
 * a retry) is brought forward. */
static void request_sync(struct proxier *p) {
        if (!p->initialized)
                return;
        for (size_t i = 0; i < p->n_fam; i++)
                metrics_sync_queued(p->metrics, p->fam[i].family);
        uint64_t min = config_mode_sync(p->cfg)->min_sync_period_ms;
        uint64_t now = ev_now_ms(p->loop);
        uint64_t next = p->last_sync_ms + min;
        uint64_t delay = p->n_syncs + p->n_failures == 0 || next <= now ? 0 : next - now;
        if (p->sync_timer && p->sync_due <= now + delay)
                return;
        schedule_sync(p, delay);
}

/* --- intake --- */

/* What a change to s means beyond its own rules: stale UDP conntrack
 * entries to look for, health-check node ports to update. Called with the
 * service before and after the change. */
static void note_service(struct proxier *p, const struct svc *s) {
        if (!s)
                return;
        if (udp_stale_applies(s))
                p->udp_changed = true;
        if (s->health_check_node_port)
                p->hcnp_changed = true;
}

static void on_replacing(void *ctx, const struct svc *old) {
        struct proxier *p = ctx;
        note_service(p, old);
        udp_stale_remember(p->udp, old);
}

static void on_marked(void *ctx, const char *key) {
        struct proxier *p = ctx;
        note_service(p, model_service_get(intake_model(p->intake), key));
        if (p->initialized)
                for (size_t i = 0; i < p->n_fam; i++)
                        health_server_queued(p->health, p->fam[i].family);
        request_sync(p);
}

static void on_refusal(void *ctx, const struct svc_refusal *r, bool refused) {
        struct proxier *p = ctx;
        if (r->list >= _ADMIT_LIST_MAX || r->reason >= _ADMIT_REASON_MAX)
                return;
        if (refused) {
                p->refused_now[r->list][r->reason]++;
                p->refused_total[r->list][r->reason]++;
        } else if (p->refused_now[r->list][r->reason] > 0) {
                p->refused_now[r->list][r->reason]--;
        }
}

void proxier_object(struct proxier *p, enum intake_source src, const char *key, const json_t *obj) {
        static const char *const kinds[_INTAKE_SOURCE_MAX] = {
                [INTAKE_SERVICES] = "Service",
                [INTAKE_SLICES] = "EndpointSlice",
                [INTAKE_NODE] = "Node",
                [INTAKE_SERVICE_CIDRS] = "ServiceCIDR",
        };
        /* Each object as it arrives (benchmarks time changes by it). */
        log_v(5, "%s %s: %s", kinds[src], key, obj ? "upsert" : "delete");
        unsigned fx = intake_object(p->intake, src, key, obj);

        if (fx & INTAKE_SERVICE_CHANGE)
                metrics_change_queued(p->metrics, false);
        if (fx & INTAKE_ENDPOINTS_CHANGE)
                metrics_change_queued(p->metrics, true);
        if (fx & (INTAKE_NODE_ELIGIBLE | INTAKE_NODE_INELIGIBLE))
                health_server_set_node_eligible(p->health, fx & INTAKE_NODE_ELIGIBLE);
        if (fx & INTAKE_ALL_CHANGED) {
                /* Labels (zone) and addresses change rules everywhere. */
                p->need_full = true;
                p->all_changed = true;
                if (p->initialized) {
                        log_info("Node %s changed, scheduling a full sync", key);
                        request_sync(p);
                }
        }
        /* A mode with a rule made of the ServiceCIDRs writes it anew (its
         * services are checked against their records, not rewritten). */
        if ((fx & INTAKE_SERVICE_CIDRS_CHANGED) && p->ops->service_cidrs) {
                p->need_full = true;
                request_sync(p);
        }
}

void proxier_keys(struct proxier *p, enum intake_source src, void (*each)(const char *key, void *ctx), void *ctx) {
        intake_keys(p->intake, src, each, ctx);
}

void proxier_synced(struct proxier *p, enum intake_source src) {
        p->synced[src] = true;
        if (p->initialized)
                return;
        for (int i = 0; i < _INTAKE_SOURCE_MAX; i++)
                if (!p->synced[i])
                        return;
        log_info("Initial lists of Services, EndpointSlices%s and Node %s complete, syncing",
                 p->watch_cidrs ? ", ServiceCIDRs" : "", p->node_name);
        p->initialized = true;
        request_sync(p);
}

/* --- the backend's side --- */

/* backend_env.changed: the kernel no longer holds what the backend wrote.
 * Logged once, until a sync trusts the kernel again (a change monitor
 * reports each rule another process touched). */
static void on_backend_changed(void *core, uint8_t family, const char *why) {
        struct proxier *p = core;
        bool news = false;

        p->n_kernel_changes++;
        for (size_t i = 0; i < p->n_fam; i++) {
                if (family != 0 && p->fam[i].family != family)
                        continue;
                news |= !p->fam[i].reported;
                p->fam[i].reported = true;
                p->fam[i].trusted = false;
        }
        if (news) {
                if (family != 0)
                        log_warning("IPv%u %s, resyncing everything", family, why);
                else
                        log_warning("%s, resyncing everything", why);
        }
        p->need_full = true;
        if (p->initialized && p->n_syncs > 0)
                request_sync(p);
}

/* The allow-lists' refusals, by list and reason (lists in use only). */
static void expose_refusals(const struct proxier *p, struct buf *out) {
        static const struct {
                const char *name, *type, *help;
        } m[2] = {
                {"kproxy_service_ips_refused", "gauge",
                 "Addresses that services claim (externalIPs, load-balancer ingress IPs) and this node does not "
                 "program, by allow-list and reason."},
                {"kproxy_service_ip_refusals_total", "counter",
                 "Refusals of claimed service addresses logged since kproxy started, by allow-list and reason."},
        };
        for (int k = 0; k < 2; k++) {
                buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", m[k].name, m[k].help, m[k].name, m[k].type);
                for (int l = 0; l < _ADMIT_LIST_MAX; l++) {
                        if (!p->admit.lists[l].on)
                                continue;
                        for (int r = ADMIT_NOT_LISTED; r < _ADMIT_REASON_MAX; r++)
                                buf_printf(out, "%s{list=\"%s\",reason=\"%s\"} %llu\n", m[k].name,
                                           admit_list_label((enum admit_list) l),
                                           admit_reason_name((enum admit_reason) r),
                                           (unsigned long long) (k == 0 ? p->refused_now[l][r]
                                                                        : p->refused_total[l][r]));
                }
        }
}

/* The mode's own metrics and /debug/backend, on the metrics server. */
static void expose_backend(void *userdata, struct buf *out) {
        struct proxier *p = userdata;
        if (admit_policy_on(&p->admit))
                expose_refusals(p, out);
        if (p->ops->expose)
                p->ops->expose(p->backend, out);
        if (p->companion_ops) {
                /* The one companion there is, --socket-lb: whether it runs. */
                buf_printf(out, "# HELP kproxy_socket_lb_enabled Whether --socket-lb runs (0: asked for, but its "
                           "programs could not be set up; the rules serve everything).\n"
                           "# TYPE kproxy_socket_lb_enabled gauge\nkproxy_socket_lb_enabled %d\n",
                           p->companion != NULL);
                if (p->companion && p->companion_ops->expose)
                        p->companion_ops->expose(p->companion, out);
        }
}

#define DEBUG_RULES_PERIOD_MS 1000  /* /debug/rules renders everything: once a second at most */

/* /debug/rules: what the mode writes for the model held now. */
static void rules_debug(struct proxier *p, struct mhd_reply *reply) {
        uint64_t now = ev_now_ms(p->loop);
        bool too_soon = p->last_rules_ms && now < p->last_rules_ms + DEBUG_RULES_PERIOD_MS;
        if (!too_soon)
                p->last_rules_ms = now;
        size_t n_cidrs;
        const struct inet_cidr *cidrs = intake_service_cidrs(p->intake, &n_cidrs);
        const struct debug_rules_node n = {
                .m = intake_model(p->intake),
                .cfg = p->cfg,
                .node_name = p->node_name,
                .host = &p->host,
                .service_cidrs = cidrs,
                .n_service_cidrs = n_cidrs,
                .ops = p->ops,
                .companion = p->companion ? p->companion_ops : NULL,
                .families = p->families,
                .n_families = p->n_fam,
                .pending = intake_changed(p->intake)->len,
                .too_soon = too_soon,
        };
        debug_rules(&n, reply);
}

/* /debug/explain, from the model this daemon serves; /debug/rules. */
static void explain_debug(void *userdata, const char *path, const struct mhd_request *req, struct mhd_reply *reply) {
        struct proxier *p = userdata;
        if (strcmp(path, "/debug/rules") == 0) {
                rules_debug(p, reply);
                return;
        }
        size_t n_cidrs;
        const struct inet_cidr *cidrs = intake_service_cidrs(p->intake, &n_cidrs);
        const struct debug_explain_node n = {
                .m = intake_model(p->intake),
                .cfg = p->cfg,
                .socket_lb = p->companion != NULL,
                .node_name = p->node_name,
                .host = &p->host,
                .service_cidrs = cidrs,
                .n_service_cidrs = n_cidrs,
        };
        debug_explain(&n, req, reply);
}

static void describe_backend(void *userdata, struct buf *out) {
        struct proxier *p = userdata;
        p->ops->describe(p->backend, out);
}

/* backend_env.handed_over: no more syncs or checks; the owner is told. */
static void on_backend_handed_over(void *core) {
        struct proxier *p = core;

        p->retired = true;
        p->sync_timer = ev_timer_cancel(p->loop, p->sync_timer);
        p->check_timer = ev_timer_cancel(p->loop, p->check_timer);
        if (p->handed_over)
                p->handed_over(p->handed_over_ctx);
}

/* backend_env.replacing: a successor's readiness is its own (health.h). */
static void on_backend_replacing(void *core, bool starting) {
        struct proxier *p = core;
        health_server_set_replaced(p->health, starting);
}

void proxier_detach_servers(struct proxier *p) {
        metrics_set_backend(p->metrics, NULL, NULL, NULL);
        metrics_set_debug(p->metrics, NULL, NULL);
        p->metrics = NULL;
        p->health = NULL;
        p->hcnp = NULL;
}

size_t proxier_busy(struct proxier *p) {
        return p->ops->busy ? p->ops->busy(p->backend) : 0;
}

size_t proxier_quiesce(struct proxier *p) {
        p->retired = true;
        p->sync_timer = ev_timer_cancel(p->loop, p->sync_timer);
        p->check_timer = ev_timer_cancel(p->loop, p->check_timer);
        if (p->ops->quiesce)
                p->ops->quiesce(p->backend);
        return proxier_busy(p);
}

static void on_check(struct ev_loop *l, void *userdata) {
        struct proxier *p = userdata;
        p->check_timer = NULL;
        p->ops->check(p->backend);
        p->check_timer = ev_timer_add(l, config_mode_sync(p->cfg)->sync_period_ms, on_check, p);
}

/* Switching modes: other modes' rules (a previous run's, or kube-proxy's)
 * go once ours are in place. Until then they keep serving: every mode's
 * nat hooks in at the same priority, and a connection is translated by the
 * first that matches, so new connections never meet a node with neither.
 * The same for the running mode's rules where it does not manage them (the
 * other iptables backend's, beside a legacy kubelet): they would keep
 * translating too, to endpoints that no longer are. */
static bool leftovers_present(const struct proxier *p) {
        for (const struct backend_ops *const *b = backend_all; *b; b++)
                if ((*b)->leftovers(&p->host, *b == p->ops))
                        return true;
        return false;
}

static void remove_leftovers(const struct proxier *p) {
        double t0 = realtime_s();
        for (const struct backend_ops *const *b = backend_all; *b; b++)
                (*b)->remove_leftovers(&p->host, *b == p->ops);
        log_v(2, "Removed what other modes or iptables backends left, if anything, in %.0f ms",
              (realtime_s() - t0) * 1000);
}

/* --- sync --- */

/* Rule counts (where the mode has upstream's gauges of them) and Local
 * policies without a local endpoint, after a family's sync succeeded. */
static void family_metrics(struct proxier *p, uint8_t family, const struct backend_stats *st) {
        for (size_t i = 0; i < st->n_tables; i++)
                metrics_rules(p->metrics, family, st->tables[i].table, st->tables[i].total, st->tables[i].last);
        metrics_no_local_endpoints(p->metrics, family, "internal", st->no_local_internal);
        metrics_no_local_endpoints(p->metrics, family, "external", st->no_local_external);
}

/* The rest of a family's sync, after its rules: stale UDP entries, the
 * health-check node ports. Returns false if the UDP reconcile failed (it
 * is tried again with the next sync). */
static bool after_rules(struct proxier *p, size_t i, bool full, const struct render_params *rp) {
        const struct model *m = intake_model(p->intake);
        bool ok = true;

        if (p->ops->conntrack && (p->udp_changed || p->n_syncs == 0)) {
                double t0 = realtime_s();
                int r = udp_stale_reconcile(p->udp, m, rp->family, p->node_name);
                ok = r >= 0;
                metrics_conntrack_reconciled(p->metrics, rp->family, realtime_s() - t0, r > 0 ? (size_t) r : 0);
        }
        /* Every service is looked at: only when one that has (or had) a
         * health-check node port changed. */
        if (i == 0 && (full || p->hcnp_changed))
                hcnp_feed(p->hcnp, m, rp, p->node_name);
        return ok;
}

/* The companion's share of a family's sync, just before the rules. Its
 * failure is its own: logged, and the next sync (soon) has it rewrite
 * everything; the rules are synced either way. */
static void companion_sync(struct proxier *p, size_t i, const struct backend_sync *s) {
        struct backend_stats st = {0};
        struct backend_sync c = *s;

        if (!p->companion)
                return;
        if (p->companion_stale[i]) {
                c.kind = BACKEND_SYNC_FULL;
                c.all_changed = true;
        }
        p->companion_stale[i] = p->companion_ops->sync(p->companion, p->fam[i].family, &c, &st) < 0;
}

/* One family's sync, timed as upstream's per-family proxiers time theirs.
 * Returns 0 or -errno. */
static int sync_family(struct proxier *p, size_t i, bool full, bool *udp_failed) {
        struct family_state *f = &p->fam[i];
        struct buf warnings = BUF_INIT;
        struct render_params rp;
        struct backend_stats st = {0};
        const struct model *m = intake_model(p->intake);
        uint64_t changes = p->n_kernel_changes;
        double t0 = realtime_s();
        int r;

        r = render_params_init(&rp, f->family, p->cfg, p->node_name, model_node(m), &p->host, &warnings);
        if (warnings.len > 0 && p->n_syncs == 0)
                log_warning("IPv%u: %.*s", f->family, (int) (warnings.len - 1), warnings.data);
        buf_done(&warnings);
        struct backend_sync s = {
                .kind = !full ? BACKEND_SYNC_PARTIAL : f->trusted ? BACKEND_SYNC_RESYNC : BACKEND_SYNC_FULL,
                .model = m,
                .params = &rp,
                .changed = intake_changed(p->intake),
                .all_changed = p->all_changed,
        };
        if (r >= 0) {
                s.service_cidrs = intake_service_cidrs(p->intake, &s.n_service_cidrs);
                /* Upstream's per-family lines (its proxiers are one per family). */
                char what[64];
                snprintf(what, sizeof what, "Syncing %s rules", p->ops->name);
                log_v_kv(2, what, KV_STR("ipFamily", family_name(f->family)), KV_BOOL("fullSync", full));
                f->trusted = false;     /* until the sync succeeds */
                /* The companion first: its few map writes do not wait
                 * behind the kernel's check of a large rule set. */
                companion_sync(p, i, &s);
                r = p->ops->sync(p->backend, f->family, &s, &st);
                if (r < 0 && st.kernel_refused)
                        metrics_apply_failed(p->metrics, f->family, !full);
        }
        if (r >= 0) {
                log_v_kv(2, "SyncProxyRules complete", KV_STR("ipFamily", family_name(f->family)),
                         KV_SECONDS("elapsed", realtime_s() - t0));
                /* Not if the backend found the kernel changed meanwhile. */
                f->trusted = !st.recheck && p->n_kernel_changes == changes;
                if (f->trusted)
                        f->reported = false;
                p->recheck |= st.recheck;
                family_metrics(p, f->family, &st);
                if (!after_rules(p, i, full, &rp))
                        *udp_failed = true;
        }
        metrics_sync_done(p->metrics, f->family, full, r >= 0, realtime_s() - t0);
        render_params_done(&rp);
        return r;
}

static void sync_failed(struct proxier *p, uint64_t took) {
        uint64_t retry = config_mode_sync(p->cfg)->sync_period_ms;
        p->n_failures++;
        p->need_full = true;
        p->recheck = false;     /* the retry trusts nothing anyway */
        log_error_kv(0, "Sync failed", KV_SECONDS("retryingTime", retry / 1000.0), KV_SECONDS("elapsed", took / 1000.0));
        schedule_sync(p, retry);
}

/* A full sync (the first one also follows the decoding of every list)
 * leaves most of its peak in freed heap; give it back, or the node sees
 * the peak as kproxy's size. */
static void trim_heap(void) {
        double t0 = realtime_s();
        malloc_trim(0);
        struct mallinfo2 mi = mallinfo2();
        log_v(2, "Returned freed heap to the system in %.0f ms; heap: %zu MiB in use, %zu MiB free",
              (realtime_s() - t0) * 1000, (mi.uordblks + mi.hblkhd) >> 20, mi.fordblks >> 20);
}

struct programmed {
        struct proxier *p;
        double now;
};

static void on_trigger(uint8_t family, double time, void *ctx) {
        struct programmed *g = ctx;
        for (size_t j = 0; j < g->p->n_fam; j++)
                if (g->p->fam[j].family == family && g->now >= time)
                        metrics_network_programming(g->p->metrics, family, g->now - time);
}

static void sync_succeeded(struct proxier *p, bool full, bool udp_failed, uint64_t start, uint64_t took) {
        /* A failed reconcile is tried again with the next sync, remembered
         * frontends and all. */
        p->all_changed = false;
        p->udp_changed = udp_failed;
        if (!udp_failed)
                udp_stale_clear(p->udp);
        p->hcnp_changed = false;
        if (full) {
                p->last_full_ms = start;
                trim_heap();
        }
        metrics_changes_applied(p->metrics);
        struct programmed g = {p, realtime_s()};
        intake_triggers(p->intake, on_trigger, &g);
        intake_applied(p->intake);
        p->n_syncs++;
        if (p->n_syncs == 1 && p->leftovers)
                remove_leftovers(p);
        for (size_t i = 0; i < p->n_fam; i++)
                health_server_synced(p->health, p->fam[i].family);
        log_v(2, "Sync %llu (%s) done in %llu ms", (unsigned long long) p->n_syncs, full ? "full" : "partial",
              (unsigned long long) took);
        if (p->n_syncs == 1)
                log_info("First sync done in %llu ms", (unsigned long long) took);
}

static void on_sync_timer(struct ev_loop *l, void *userdata) {
        struct proxier *p = userdata;
        uint64_t start = ev_now_ms(l);
        bool full = p->need_full || p->last_full_ms == 0 || start - p->last_full_ms >= FULL_SYNC_PERIOD_MS;
        bool ok = true, udp_failed = false;

        p->sync_timer = NULL;
        p->last_sync_ms = start;
        /* Set again, during the sync, by a backend that sees the kernel
         * changed under it: then another sync follows at once. */
        p->need_full = false;
        if (p->n_syncs == 0 && p->n_failures == 0)
                p->leftovers = leftovers_present(p);
        for (size_t i = 0; i < p->n_fam && ok; i++)
                ok = sync_family(p, i, full, &udp_failed) >= 0;
        ev_now_update(l);
        uint64_t took = ev_now_ms(l) - start;
        /* serviceProxyHealthy of the health-check node ports: whether the
         * last sync succeeded (upstream asks its health server per probe). */
        hcnp_set_proxy_healthy(p->hcnp, ok);
        if (!ok) {
                sync_failed(p, took);
                return;
        }
        sync_succeeded(p, full, udp_failed, start, took);
        if (p->need_full) {
                request_sync(p);
        } else if (p->companion_stale[0] || p->companion_stale[1]) {
                /* The companion's maps are retried, as failed syncs are. */
                schedule_sync(p, config_mode_sync(p->cfg)->sync_period_ms);
        } else if (p->recheck) {
                /* Others committed during the full sync: check again, in a
                 * while, with a full sync that trusts nothing. */
                p->recheck = false;
                p->need_full = true;
                schedule_sync(p, config_mode_sync(p->cfg)->sync_period_ms);
        } else {
                /* Once an hour a full sync, as upstream; the timer re-arms per sync. */
                schedule_sync(p, FULL_SYNC_PERIOD_MS);
        }
}

static void schedule_sync(struct proxier *p, uint64_t delay_ms) {
        if (p->retired)
                return;
        p->sync_timer = ev_timer_cancel(p->loop, p->sync_timer);
        p->sync_timer = ev_timer_add(p->loop, delay_ms, on_sync_timer, p);
        p->sync_due = ev_now_ms(p->loop) + delay_ms;
}

int proxier_new(struct ev_loop *l, const struct proxier_opts *o, struct proxier **ret) {
        struct intake_hooks hooks = {on_replacing, on_marked, NULL, on_refusal};
        struct proxier *p = xcalloc(1, sizeof *p);
        int r;

        hooks.ctx = p;
        p->loop = l;
        p->cfg = o->config;
        p->host = *o->host;
        p->ops = o->backend;
        p->node_name = xstrdup(o->node_name);
        p->health = o->health;
        p->metrics = o->metrics;
        p->hcnp = o->hcnp;
        p->handed_over = o->handed_over;
        p->handed_over_ctx = o->ctx;
        p->udp = udp_stale_new();
        p->watch_cidrs = o->service_cidrs;
        p->synced[INTAKE_SERVICE_CIDRS] = !o->service_cidrs;
        p->need_full = true;
        p->all_changed = true;
        r = intake_new(o->node_name, &hooks, &p->intake);
        if (r < 0) {
                proxier_free(p);
                return r;
        }
        r = admission_from_config(p->cfg, &p->admit);
        if (r < 0) {
                proxier_free(p);
                return r;
        }
        intake_set_admission(p->intake, &p->admit);
        p->fam[p->n_fam++].family = 4;
        if (o->ipv6)
                p->fam[p->n_fam++].family = 6;
        for (size_t i = 0; i < p->n_fam; i++) {
                p->families[i] = p->fam[i].family;
                /* Upstream's proxiers stamp "queued" as their sync loop starts. */
                metrics_sync_queued(p->metrics, p->fam[i].family);
        }
        struct backend_env env = {
                .loop = l,
                .config = p->cfg,
                .host = &p->host,
                .families = p->families,
                .n_families = p->n_fam,
                .changed = on_backend_changed,
                .handed_over = on_backend_handed_over,
                .replacing = on_backend_replacing,
                .core = p,
        };
        r = p->ops->create(&env, &p->backend);
        if (r < 0) {
                proxier_free(p);
                return r;
        }
        p->companion_ops = o->companion;
        if (o->companion && o->companion->create(&env, &p->companion) < 0) {
                log_error("Running without %s: the %s rules serve everything", o->companion->name, p->ops->name);
                health_server_set_socket_lb(p->health, "off: its programs could not be set up (see the log); "
                                                       "the rules serve everything");
        } else if (o->companion) {
                health_server_set_socket_lb(p->health, "on");
        }
        p->check_timer = ev_timer_add(l, config_mode_sync(p->cfg)->sync_period_ms, on_check, p);
        metrics_set_backend(p->metrics,
                            p->ops->expose || p->companion_ops || admit_policy_on(&p->admit) ? expose_backend : NULL,
                            p->ops->describe ? describe_backend : NULL, p);
        metrics_set_debug(p->metrics, explain_debug, p);
        *ret = p;
        return 0;
}

struct proxier *proxier_free(struct proxier *p) {
        if (!p)
                return NULL;
        p->sync_timer = ev_timer_cancel(p->loop, p->sync_timer);
        p->check_timer = ev_timer_cancel(p->loop, p->check_timer);
        metrics_set_backend(p->metrics, NULL, NULL, NULL);
        metrics_set_debug(p->metrics, NULL, NULL);
        if (p->backend)
                p->ops->destroy(p->backend);
        if (p->companion)
                p->companion_ops->destroy(p->companion);
        intake_free(p->intake);
        admit_policy_done(&p->admit);
        udp_stale_free(p->udp);
        free(p->node_name);
        free(p);
        return NULL;
}

uint64_t proxier_syncs(const struct proxier *p) {
        return p->n_syncs;
}

uint64_t proxier_failures(const struct proxier *p) {
        return p->n_failures;
}
