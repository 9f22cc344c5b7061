/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the sync loop: events are cheap (decode, store, mark the
 * service changed) and never touch the kernel; a sync is one render and one
 * iptables-restore transaction per family, so the kernel only ever sees a
 * whole ruleset. A failed sync changes nothing in the kernel (the restore is
 * all-or-nothing), is logged, counted and retried as a full sync.
 */
#include "proxy/proxier.h"

#include <errno.h>
#include <malloc.h>
#include <jansson.h>
#include <sys/epoll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apply/conntrack.h"
#include "apply/iptables.h"
#include "apply/iptables-delta.h"
#include "apply/iptables-known.h"
#include "apply/nftables.h"
#include "apply/nfacct.h"
#include "config/config.h"
#include "ev/ev.h"
#include "host/host.h"
#include "http/hcnp.h"
#include "http/health.h"
#include "http/metrics.h"
#include "kube/decode.h"
#include "model/endpoints.h"
#include "model/model.h"
#include "model/owned-chains.h"
#include "model/servicecidrs.h"
#include "proxy/nftsync.h"
#include "proxy/nolocal.h"
#include "render/render.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fnv.h"
#include "util/hmap.h"
#include "util/log.h"

#define FULL_SYNC_PERIOD_MS (3600 * 1000)

/* A full sync that wrote more chains than this reads them back at once
 * when reading means iptables-save (over netlink it reads only those). */
#define KNOWN_LEARN_MIN 1000

struct family_state {
        uint8_t family;
        struct nftsync *nft;    /* nftables mode */
        bool nft_rebuild;       /* the last full sync failed: rebuild the table */
        bool nft_listen;        /* others committed during the last full sync: keep listening */
        bool nft_known;         /* the table is as the last sync left it: nobody else changed it since */
        struct owned_chains *owned;     /* each service's nat chains as the last sync wrote them */
        uint64_t last_hash;     /* of the last restore input applied */
        bool have_hash;
        struct iptables_delta *delta;   /* the top-level chains as the last sync left them */
        struct iptables_known *known;   /* chains the kernel holds as kproxy wrote them */
        struct nolocal *nolocal;        /* nftables mode: Local policies without local endpoints, per service */
};

struct proxier {
        struct ev_loop *loop;
        const struct kproxy_config *cfg;
        struct host_facts host;         /* shallow copy: addrs borrowed */
        char *node_name;
        struct health_server *health;
        struct metrics *metrics;
        struct hcnp *hcnp;
        struct {
                double time;
                uint8_t family;
        } *triggers;                    /* EndpointSlice change times not yet programmed */
        size_t n_triggers;
        struct model *model;
        struct service_cidrs *service_cidrs;    /* nftables mode's drop rule for unallocated cluster IPs */
        bool watch_cidrs;                       /* ... which come from a watch */
        struct hmap changed;            /* service keys (owned) changed since the last sync */
        bool synced[_PROXIER_SOURCE_MAX];
        bool initialized;
        bool need_full;
        bool other_mode_left;           /* the other mode's rules, to remove after the first sync */
        bool need_full_soon;            /* a full sync to check on one that could not listen */
        bool node_deleted;              /* the API has no Node of ours (its last version is kept) */
        bool udp_changed;               /* a changed service has (or had) a UDP port */
        bool nolocal_all;               /* the no-local tally needs every service recounted */
        struct ct_frontend *gone_udp;   /* UDP frontends of service versions replaced since the last reconcile */
        size_t n_gone_udp;
        bool hcnp_changed;              /* ... or a health-check node port */
        uint64_t last_full_ms, last_sync_ms;
        uint64_t sync_due;              /* when sync_timer fires */
        struct ev_timer *sync_timer, *canary_timer;
        struct nftables *nl;                    /* nftables mode: the netlink socket */
        struct nftables_monitor *monitor;       /* and the watch on our table */
        int monitor_fd;
        struct family_state fam[2];
        size_t n_fam;
        uint64_t n_syncs, n_failures;
};

static void schedule_sync(struct proxier *p, uint64_t delay_ms);

static bool svc_has_udp(const struct svc *s) {
        for (size_t i = 0; s && i < s->n_ports; i++)
                if (s->ports[i].proto == L4_UDP)
                        return true;
        return false;
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

/* What a change to s means beyond its own rules: stale UDP conntrack
 * entries to look for, health-check node ports to update. Called with the
 * service before and after the change (either may be NULL). */
static void note_service(struct proxier *p, const struct svc *s) {
        if (!s)
                return;
        if (svc_has_udp(s))
                p->udp_changed = true;
        if (s->health_check_node_port)
                p->hcnp_changed = true;
}

/* The UDP frontends of a service version about to be replaced or deleted.
 * A frontend it no longer has (the service deleted, a port or IP dropped)
 * would otherwise never be reconciled again, and a one-way UDP flow DNAT-ed
 * to one of its endpoints would keep refreshing its entry (the black hole
 * upstream fixed after 1.34 in #141371). The next reconcile checks them
 * with no valid endpoint; one still in the service keeps its endpoints
 * (frontends merge as a union). */
static void remember_udp_frontends(struct proxier *p, const struct svc *s) {
        if (!svc_has_udp(s))
                return;
        size_t want = s->n_ports * (2 * s->n_cluster_ips + s->n_external_ips + s->n_lb_ips);
        struct ct_frontend *v = realloc(p->gone_udp, (p->n_gone_udp + want) * sizeof *v);
        if (!v)
                abort();
        p->gone_udp = v;
        for (size_t j = 0; j < s->n_ports; j++) {
                const struct svc_port *port = &s->ports[j];
                if (port->proto != L4_UDP)
                        continue;
                for (size_t k = 0; k < s->n_cluster_ips; k++) {
                        v[p->n_gone_udp++] = (struct ct_frontend) {.ip = s->cluster_ips[k], .port = port->port};
                        if (port->node_port)
                                v[p->n_gone_udp++] = (struct ct_frontend) {
                                        .ip = s->cluster_ips[k], .port = port->node_port, .node_port = 1};
                }
                for (size_t k = 0; k < s->n_external_ips; k++)
                        v[p->n_gone_udp++] = (struct ct_frontend) {.ip = s->external_ips[k], .port = port->port};
                for (size_t k = 0; k < s->n_lb_ips; k++)
                        v[p->n_gone_udp++] = (struct ct_frontend) {.ip = s->lb_ips[k], .port = port->port};
        }
}

static void mark_changed(struct proxier *p, const char *service_key) {
        if (!hmap_get(&p->changed, service_key)) {
                char *k = strdup(service_key);
                if (!k)
                        abort();
                hmap_put(&p->changed, k, k);
        }
        note_service(p, model_service_get(p->model, service_key));
        if (p->initialized)
                for (size_t i = 0; i < p->n_fam; i++)
                        health_server_queued(p->health, p->fam[i].family);
        request_sync(p);
}

static void on_service(struct proxier *p, const char *key, const json_t *obj) {
        char err[KUBE_ERRLEN];
        struct svc *s = NULL;

        if (!obj) {
                note_service(p, model_service_get(p->model, key));
                remember_udp_frontends(p, model_service_get(p->model, key));
                if (model_service_delete(p->model, key) == 0) {
                        metrics_change_queued(p->metrics, false);
                        mark_changed(p, key);
                }
                return;
        }
        int r = kube_decode_service(obj, &s, err);
        if (r < 0) {
                log_warning("Invalid Service %s: %s; %s", key, err,
                            model_service_get(p->model, key) ? "keeping its previous version" : "ignoring it");
                return;
        }
        note_service(p, model_service_get(p->model, key));
        remember_udp_frontends(p, model_service_get(p->model, key));
        if (r == KUBE_IGNORED) {
                log_v(2, "Ignoring Service %s: %s", key, err);
                if (model_service_delete(p->model, key) == 0)
                        mark_changed(p, key);
                return;
        }
        model_service_upsert(p->model, s);
        metrics_change_queued(p->metrics, false);
        mark_changed(p, key);
}

static void on_slice(struct proxier *p, const char *key, const json_t *obj) {
        char err[KUBE_ERRLEN];
        struct slice *s = NULL;
        const struct slice *old = model_slice_get(p->model, key);
        char *old_svc = old ? strdup(old->service_key) : NULL;

        if (!obj) {
                if (model_slice_delete(p->model, key) == 0 && old_svc) {
                        metrics_change_queued(p->metrics, true);
                        mark_changed(p, old_svc);
                }
                free(old_svc);
                return;
        }
        int r = kube_decode_slice(obj, &s, err);
        if (r < 0) {
                log_warning("Invalid EndpointSlice %s: %s; %s", key, err,
                            old ? "keeping its previous version" : "ignoring it");
        } else if (r == KUBE_IGNORED) {
                log_v(4, "Ignoring EndpointSlice %s: %s", key, err);
                if (model_slice_delete(p->model, key) == 0 && old_svc)
                        mark_changed(p, old_svc);
        } else {
                char *svc = strdup(s->service_key);
                if (s->trigger_time > 0) {
                        void *t = realloc(p->triggers, (p->n_triggers + 1) * sizeof *p->triggers);
                        if (!t)
                                abort();
                        p->triggers = t;
                        p->triggers[p->n_triggers].time = s->trigger_time;
                        p->triggers[p->n_triggers++].family = s->family;
                }
                metrics_change_queued(p->metrics, true);
                model_slice_upsert(p->model, s);
                if (old_svc && strcmp(old_svc, svc) != 0)
                        mark_changed(p, old_svc);
                mark_changed(p, svc);
                free(svc);
        }
        free(old_svc);
}

static void on_node(struct proxier *p, const char *key, const json_t *obj) {
        char err[KUBE_ERRLEN];
        struct node *n = NULL;

        if (strcmp(key, p->node_name) != 0)
                return;
        if (!obj) {
                log_warning("Node %s was deleted", key);
                health_server_set_node_eligible(p->health, false);
                p->node_deleted = true;
                return;         /* keep its last addresses and labels */
        }
        p->node_deleted = false;
        if (kube_decode_node(obj, &n, err) < 0) {
                log_warning("Invalid Node %s: %s; keeping its previous version", key, err);
                return;
        }
        health_server_set_node_eligible(p->health, !n->leaving);
        const struct node *old = model_node(p->model);
        bool same = old && old->n_labels == n->n_labels && old->n_addrs == n->n_addrs &&
                    old->n_pod_cidrs == n->n_pod_cidrs &&
                    memcmp(old->addrs, n->addrs, n->n_addrs * sizeof *n->addrs) == 0 &&
                    memcmp(old->pod_cidrs, n->pod_cidrs, n->n_pod_cidrs * sizeof *n->pod_cidrs) == 0;
        for (size_t i = 0; same && i < n->n_labels; i++)
                same = strcmp(old->labels[i], n->labels[i]) == 0;
        model_node_set(p->model, n);
        if (same)
                return;
        /* Labels (zone) and addresses change rules everywhere: full sync. */
        p->need_full = true;
        p->nolocal_all = true;
        if (p->initialized) {
                log_info("Node %s changed, scheduling a full sync", key);
                request_sync(p);
        }
}

/* A ServiceCIDR changed: nftables mode's cluster-ips-check chain drops
 * traffic to the union's unallocated addresses, so a changed union is a
 * full sync (of the fixed part; services are checked against their
 * records, not rewritten). A malformed object keeps its last good CIDRs. */
static void on_service_cidr(struct proxier *p, const char *key, const json_t *obj) {
        char err[KUBE_ERRLEN];
        _cleanup_free_ char *name = NULL;
        _cleanup_free_ struct inet_cidr *cidrs = NULL;
        size_t n = 0;

        if (obj && kube_decode_service_cidr(obj, &name, &cidrs, &n, err) < 0) {
                log_warning("Invalid ServiceCIDR %s: %s; keeping its previous version", key, err);
                return;
        }
        if (!service_cidrs_set(p->service_cidrs, key, cidrs, n))
                return;
        if (log_verbosity >= 2) {
                size_t n_all;
                const struct inet_cidr *all = service_cidrs_all(p->service_cidrs, &n_all);
                struct buf b = BUF_INIT;
                for (size_t i = 0; i < n_all; i++) {
                        char c[INET_ADDR_STRLEN + 4];
                        buf_printf(&b, "%s%s", i ? "," : "", inet_cidr_format(&all[i], c));
                }
                log_v_kv(2, "ServiceCIDRs changed", KV_STR("cidrs", b.data ? b.data : ""));
                buf_done(&b);
        }
        if (p->cfg->mode != PROXY_MODE_NFTABLES)
                return;
        p->need_full = true;
        request_sync(p);
}

void proxier_object(struct proxier *p, enum proxier_source src, const char *key, const json_t *obj) {
        switch (src) {
        case PROXIER_SERVICES:
                on_service(p, key, obj);
                break;
        case PROXIER_SLICES:
                on_slice(p, key, obj);
                break;
        case PROXIER_NODE:
                on_node(p, key, obj);
                break;
        case PROXIER_SERVICE_CIDRS:
                on_service_cidr(p, key, obj);
                break;
        default:
                break;
        }
}

void proxier_keys(struct proxier *p, enum proxier_source src, void (*each)(const char *key, void *ctx), void *ctx) {
        switch (src) {
        case PROXIER_SERVICES:
                model_service_keys(p->model, each, ctx);
                break;
        case PROXIER_SLICES:
                model_slice_keys(p->model, each, ctx);
                break;
        case PROXIER_NODE:
                /* Not a deleted one: each relist would report it gone again. */
                if (model_node(p->model) && !p->node_deleted)
                        each(model_node(p->model)->name, ctx);
                break;
        case PROXIER_SERVICE_CIDRS:
                service_cidrs_keys(p->service_cidrs, each, ctx);
                break;
        default:
                break;
        }
}

void proxier_synced(struct proxier *p, enum proxier_source src) {
        p->synced[src] = true;
        if (p->initialized)
                return;
        for (int i = 0; i < _PROXIER_SOURCE_MAX; i++)
                if (!p->synced[i])
                        return;
        log_info("Initial lists of Services, EndpointSlices%s and Node %s complete, syncing",
                 p->watch_cidrs ? ", ServiceCIDRs" : "", p->node_name);
        p->initialized = true;
        request_sync(p);
}

/* --- conntrack --- */

static double realtime_s(void);

/* Every UDP frontend of the family with its serving endpoints (reference
 * §11). A frontend without any is reconciled too, with none valid: the
 * flows DNAT-ed to its last endpoint are deleted, so their next packet is
 * new and meets the rule that rejects it (upstream skipped such services
 * until kubernetes/kubernetes#139629: one-way UDP senders stayed black-holed
 * for as long as they sent). So are the frontends of service versions
 * replaced since the last reconcile (remember_udp_frontends()). Returns 0
 * or -errno (logged). */
static int reconcile_udp(struct proxier *p, const struct render_params *rp) {
        double t0 = realtime_s();
        size_t deleted = 0;
        struct endpoint_filter f = {.node_name = p->node_name};
        struct ct_frontend *fr = NULL;
        struct ct_backend *be = NULL;
        size_t n_fr = 0, cap_fr = 0, n_be = 0, cap_be = 0, n_svcs;
        const struct svc **svcs = model_services_sorted(p->model, &n_svcs);
        struct {
                size_t first, n;
        } *ranges = NULL;

        for (size_t i = 0; i < n_svcs; i++) {
                const struct svc *s = svcs[i];
                const struct inet_addr *cip = svc_cluster_ip(s, rp->family);
                if (!cip || !svc_has_udp(s))
                        continue;
                size_t n_slices;
                const struct slice **slices = model_service_slices(p->model, s->key, &n_slices);
                for (size_t j = 0; j < s->n_ports; j++) {
                        const struct svc_port *port = &s->ports[j];
                        struct svc_port_endpoints e;
                        if (port->proto != L4_UDP ||
                            endpoints_collect(s, port, rp->family, slices, n_slices, &f, &e) < 0)
                                continue;
                        size_t first = n_be;
                        for (size_t k = 0; k < e.n_all; k++) {
                                if (!e.all[k].serving)
                                        continue;
                                if (n_be == cap_be) {
                                        cap_be = cap_be ? cap_be * 2 : 64;
                                        be = realloc(be, cap_be * sizeof *be);
                                        if (!be)
                                                abort();
                                }
                                be[n_be++] = (struct ct_backend) {e.all[k].addr, e.all[k].port};
                        }
                        endpoints_done(&e);
                        /* Frontends: cluster IP, external IPs, LB IPs, node port. */
                        size_t want = 2 + s->n_external_ips + s->n_lb_ips;
                        if (n_fr + want > cap_fr) {
                                cap_fr = (n_fr + want) * 2;
                                fr = realloc(fr, cap_fr * sizeof *fr);
                                ranges = realloc(ranges, cap_fr * sizeof *ranges);
                                if (!fr || !ranges)
                                        abort();
                        }
#define ADD_FRONTEND(ip_, port_, np_)                                                   \
        do {                                                                            \
                fr[n_fr] = (struct ct_frontend) {.ip = (ip_), .port = (port_), .node_port = (np_)}; \
                ranges[n_fr].first = first;                                             \
                ranges[n_fr].n = n_be - first;                                          \
                n_fr++;                                                                 \
        } while (0)
                        ADD_FRONTEND(*cip, port->port, 0);
                        for (size_t k = 0; k < s->n_external_ips; k++)
                                if (s->external_ips[k].family == rp->family)
                                        ADD_FRONTEND(s->external_ips[k], port->port, 0);
                        for (size_t k = 0; k < s->n_lb_ips; k++)
                                if (s->lb_ips[k].family == rp->family)
                                        ADD_FRONTEND(s->lb_ips[k], port->port, 0);
                        if (port->node_port)
                                ADD_FRONTEND(*cip, port->node_port, 1);
#undef ADD_FRONTEND
                }
                free(slices);
        }
        /* Gone frontends: no valid endpoint of their own. */
        if (n_fr + p->n_gone_udp > cap_fr) {
                cap_fr = n_fr + p->n_gone_udp;
                fr = realloc(fr, cap_fr * sizeof *fr);
                ranges = realloc(ranges, cap_fr * sizeof *ranges);
                if (cap_fr > 0 && (!fr || !ranges))
                        abort();
        }
        for (size_t i = 0; i < p->n_gone_udp; i++) {
                if (p->gone_udp[i].ip.family != rp->family)
                        continue;
                fr[n_fr] = p->gone_udp[i];
                ranges[n_fr].first = ranges[n_fr].n = 0;
                n_fr++;
        }
        /* Backend pointers only now: the array may have moved while growing. */
        for (size_t i = 0; i < n_fr; i++) {
                fr[i].backends = be + ranges[i].first;
                fr[i].n_backends = ranges[i].n;
        }
        int r = 0;
        if (n_fr > 0) {
                r = conntrack_reconcile_udp(rp->family, fr, n_fr);
                if (r < 0)
                        log_warning_errno(r, "Failed to clear stale IPv%u UDP conntrack entries, will retry",
                                          rp->family);
                else if (r > 0)
                        log_v(2, "Deleted %d stale IPv%u UDP conntrack entries", r, rp->family);
                deleted = r > 0 ? (size_t) r : 0;
        }
        metrics_conntrack_reconciled(p->metrics, rp->family, realtime_s() - t0, deleted);
        free(fr);
        free(be);
        free(ranges);
        free(svcs);
        return r < 0 ? r : 0;
}

/* --- sync --- */

static const char *family_name(uint8_t family) {
        return family == 6 ? "IPv6" : "IPv4";
}

static double realtime_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* nftables mode: a full sync reads back what the table holds and writes in
 * place what differs (after a failed one, it rebuilds the table), unless
 * the table is known to be as kproxy left it (the hourly one, a Node
 * change): then it re-renders everything and sends what differs from its
 * records. A partial sync sends the changed services. */
static int sync_family_nft(struct proxier *p, struct family_state *f, bool full, const struct render_params *rp) {
        struct nftsync_stats st;
        bool rebuild = full && f->nft_rebuild;
        bool resync = full && !rebuild && f->nft_known;
        size_t n_cidrs;
        const struct inet_cidr *cidrs = service_cidrs_all(p->service_cidrs, &n_cidrs);
        int r;

        f->nft_known = false;   /* until this sync succeeds */
        if (resync) {
                r = nftsync_resync(f->nft, p->model, rp, cidrs, n_cidrs, &st);
        } else if (full) {
                /* Without notifications (a quarter of a large load's cost);
                 * whether anyone else committed meanwhile, the generation
                 * count tells: then the next full sync listens throughout. */
                uint32_t g0 = 0, g1 = 0;
                bool quiet = !f->nft_listen && nftables_genid(p->nl, &g0) == 0;
                if (quiet) {
                        nftables_monitor_drain(p->monitor);
                        quiet = nftables_monitor_listen(p->monitor, false) == 0;
                }
                r = nftsync_full(f->nft, p->model, rp, cidrs, n_cidrs, rebuild, &st);
                f->nft_listen = false;
                if (quiet) {
                        if (nftables_monitor_listen(p->monitor, true) < 0 || nftables_genid(p->nl, &g1) < 0 ||
                            (r == 0 && g1 - g0 != st.transactions)) {
                                log_v(2, "Other nftables changes were committed during the IPv%u full sync, "
                                      "checking again", f->family);
                                f->nft_listen = true;
                                p->need_full_soon = true;
                        }
                }
        } else {
                r = nftsync_partial(f->nft, p->model, rp, &p->changed, &st);
        }
        if (r < 0) {
                /* A full sync that failed may have left part of its work. */
                f->nft_rebuild = full;
                metrics_apply_failed(p->metrics, f->family, !full);
                return r;
        }
        f->nft_rebuild = false;
        f->nft_known = !f->nft_listen;  /* not when others committed during it */
        /* Upstream's message and numServices, then what kproxy did: the
         * kind of sync, what was written and kept, the kernel's share. */
        log_v_kv(2, "Reloading service nftables data", KV_STR("ipFamily", family_name(f->family)),
                 KV_INT("numServices", model_n_services(p->model)),
                 KV_STR("kind", rebuild ? "rebuild" : resync ? "resync" : full ? "full" : "partial"),
                 KV_INT("chainsWritten", st.chains_written), KV_INT("chainsKept", st.chains_kept),
                 KV_INT("chainsDeleted", st.chains_deleted), KV_INT("elementsAdded", st.elements_added),
                 KV_INT("elementsDeleted", st.elements_deleted), KV_INT("messages", st.messages),
                 KV_INT("transactions", st.transactions), KV_SECONDS("kernelElapsed", st.kernel_seconds),
                 KV_SECONDS("readElapsed", st.list_seconds));
        return 0;
}

/* iptables mode. A partial sync leaves out the top-level chains that did
 * not change and changes the others by rule where it can
 * (apply/iptables-delta.h); if the kernel refuses that, -EAGAIN. */
static int sync_family_ipt(struct proxier *p, struct family_state *f, bool full, const struct render_params *rp,
                           struct render_ipt_sync *ret_counts) {
        struct buf out = BUF_INIT, rewritten = BUF_INIT;
        struct render_ipt_sync s = {0};
        /* A full sync's read of the owned nat chains the kernel holds; the
         * owned list says what is there between full syncs. */
        struct hmap existing = HMAP_INIT;
        char *existing_names = NULL;
        size_t by_rule = 0, kept = 0, sent_bytes = 0;
        double reading = 0, restoring = 0, t0 = realtime_s();
        int r;

        if (full) {
                bool jumps_ok = false;
                /* One read of the tables tells both which owned chains exist
                 * and whether the jump rules are in place; only missing jumps
                 * cost more tool runs. */
                r = iptables_scan(&p->host.iptables, p->nl, f->family, &existing, &existing_names, &jumps_ok,
                                  f->known);
                reading = realtime_s() - t0;
                if (r < 0)
                        goto out;
                if (!jumps_ok) {
                        r = iptables_ensure_jumps(&p->host.iptables, f->family);
                        if (r < 0)
                                goto out;
                }
        }
        s.changed = full ? NULL : &p->changed;
        /* Whether the kernel holds kproxy's chains: known before the owned
         * list takes in what is about to be written. */
        bool loaded = existing.len > 0 || owned_chains_n_chains(f->owned) > 0;
        s.existing = &existing;
        s.owned = f->owned;
        r = render_iptables(p->model, rp, &s, &out);
        if (r < 0)
                goto out;
        owned_chains_merge(f->owned, TAKE_PTR(s.fresh), s.changed);
        uint64_t h = fnv64(FNV64_INIT, out.data, out.len);
        if (!full && f->have_hash && h == f->last_hash) {
                log_v(4, "IPv%u rules unchanged, skipping the restore", f->family);
        } else {
                /* What is sent: in a full sync, the chains the kernel does
                 * not hold as rendered; in a partial one, the top-level chains
                 * only where they changed, by rule where that is short. */
                if (full)
                        kept = iptables_known_rewrite(f->known, out.data, out.len, &rewritten);
                else
                        by_rule = iptables_delta_rewrite(f->delta, out.data, out.len, &rewritten);
                const struct buf *sent = kept > 0 || by_rule > 0 ? &rewritten : &out;
                sent_bytes = sent->len;
                t0 = realtime_s();
                r = iptables_restore(&p->host.iptables, f->family, sent->data, sent->len, loaded);
                restoring = realtime_s() - t0;
                if (r < 0) {
                        metrics_apply_failed(p->metrics, f->family, !full);
                        f->have_hash = false;
                        iptables_delta_forget(f->delta);
                        iptables_known_forget(f->known);
                        if (by_rule > 0)
                                r = -EAGAIN;
                        goto out;
                }
                iptables_delta_commit(f->delta, out.data, out.len);
                if (full) {
                        iptables_known_commit(f->known);
                        /* What the kernel holds for the chains just written.
                         * Over netlink, those chains are read back. With
                         * iptables-save, which reads whole tables, only when
                         * they are many (a first sync, a restart; the few of
                         * a later full sync are simply written again next
                         * time), or with --state-dir when the table is small
                         * (the read is cheap), so that the next process
                         * knows every chain. */
                        char path[4096];
                        bool keep = iptables_known_file(p->cfg->state_dir, f->family, path, sizeof path);
                        size_t unlearned = iptables_known_unlearned(f->known);
                        t0 = realtime_s();
                        if (unlearned > 0 &&
                            (p->nl || unlearned > KNOWN_LEARN_MIN ||
                             (keep && owned_chains_n_chains(f->owned) <= KNOWN_LEARN_MIN)) &&
                            iptables_observe(&p->host.iptables, p->nl, f->family, sent->data, sent->len,
                                             f->known) == 0)
                                iptables_known_learn(f->known);
                        reading += realtime_s() - t0;
                        int q = keep ? iptables_known_save(f->known, path) : 0;
                        if (q < 0)
                                log_warning_errno(q, "Failed to write %s (a restart will write every chain), "
                                                  "ignoring", path);
                } else {
                        iptables_known_touch(f->known, sent->data, sent->len);
                }
                f->last_hash = h;
                f->have_hash = true;
        }
        *ret_counts = s;
        /* Rendered: the top-level chains whole, and the own chains of the
         * services written (all of them in a full sync); sent: what of it
         * iptables-restore got (0 bytes: nothing changed, no restore). */
        log_v_kv(2, "Reloading service iptables data", KV_STR("ipFamily", family_name(f->family)),
                 KV_INT("numServices", model_n_services(p->model)), KV_INT("numFilterRules", s.n_filter_rules),
                 KV_INT("numNATRules", s.n_nat_rules), KV_INT("numNATRulesTotal", s.n_nat_rules_total),
                 KV_INT("bytesSent", sent_bytes), KV_INT("chainsByRule", by_rule), KV_INT("chainsLeftOut", kept),
                 KV_SECONDS("restoreElapsed", restoring), KV_SECONDS("readElapsed", reading),
                 KV_STR("readWith", !full ? "" : p->nl ? "netlink" : "iptables-save"));
out:
        iptables_names_free(&existing, existing_names);
        buf_done(&out);
        buf_done(&rewritten);
        return r;
}

static int sync_family(struct proxier *p, struct family_state *f, bool full, struct render_params *rp,
                       struct render_ipt_sync *ret_counts) {
        struct buf warnings = BUF_INIT;
        int r;

        r = render_params_init(rp, f->family, p->cfg, p->node_name, model_node(p->model), &p->host, &warnings);
        if (warnings.len > 0 && p->n_syncs == 0)
                log_warning("IPv%u: %.*s", f->family, (int) (warnings.len - 1), warnings.data);
        buf_done(&warnings);
        if (r < 0)
                return r;
        /* Upstream's per-family lines (its proxiers are one per family). */
        bool nft = p->cfg->mode == PROXY_MODE_NFTABLES;
        double t0 = realtime_s();
        log_v_kv(2, nft ? "Syncing nftables rules" : "Syncing iptables rules",
                 KV_STR("ipFamily", family_name(f->family)), KV_BOOL("fullSync", full));
        if (nft) {
                r = sync_family_nft(p, f, full, rp);
        } else {
                r = sync_family_ipt(p, f, full, rp, ret_counts);
                if (r == -EAGAIN) {
                        /* A partial sync by rule failed: the top-level chains
                         * are not what was remembered. Write everything, now. */
                        log_warning_kv("Partial sync refused by the kernel, syncing all rules",
                                       KV_STR("ipFamily", family_name(f->family)));
                        r = sync_family_ipt(p, f, true, rp, ret_counts);
                }
        }
        if (r >= 0)
                log_v_kv(2, "SyncProxyRules complete", KV_STR("ipFamily", family_name(f->family)),
                         KV_SECONDS("elapsed", realtime_s() - t0));
        return r;
}

/* Health-check node ports: one per LoadBalancer service with ETP Local,
 * reporting how many of its endpoints (distinct IPs) are ready on this
 * node. Listens on the nodePortAddresses, or everywhere. */
static void update_hcnp(struct proxier *p, const struct render_params *rp) {
        struct endpoint_filter f = {.node_name = p->node_name};
        struct hcnp_service *hs = NULL;
        size_t n = 0, n_svcs;
        const struct svc **svcs;

        if (!p->hcnp)
                return;
        svcs = model_services_sorted(p->model, &n_svcs);
        hs = calloc(n_svcs + 1, sizeof *hs);
        if (!hs)
                abort();
        for (size_t i = 0; i < n_svcs; i++) {
                const struct svc *s = svcs[i];
                struct hmap ips = HMAP_INIT;
                struct buf keys = BUF_INIT;
                size_t n_slices;
                if (!s->health_check_node_port)
                        continue;
                const struct slice **slices = model_service_slices(p->model, s->key, &n_slices);
                for (size_t j = 0; j < s->n_ports; j++) {
                        struct svc_port_endpoints e;
                        if (endpoints_collect(s, &s->ports[j], rp->family, slices, n_slices, &f, &e) < 0)
                                continue;
                        for (size_t k = 0; k < e.n_all; k++)
                                if (e.all[k].local && e.all[k].ready) {
                                        buf_put(&keys, e.all[k].str + e.all[k].ip_off, e.all[k].ip_len);
                                        buf_putc(&keys, '\n');
                                }
                        endpoints_done(&e);
                }
                free(slices);
                /* Distinct IPs: a pod serving two ports counts once. */
                for (char *q = keys.data; q && *q;) {
                        char *nl = strchr(q, '\n');
                        *nl = '\0';
                        hmap_put(&ips, q, q);
                        q = nl + 1;
                }
                hs[n++] = (struct hcnp_service) {
                        .ns = NULL,
                        .name = s->name,
                        .port = s->health_check_node_port,
                        .local_endpoints = ips.len,
                };
                hmap_done(&ips);
                buf_done(&keys);
        }
        /* Namespaces: the key up to its slash, kept alive in one buffer. */
        struct buf nsbuf = BUF_INIT;
        size_t *offs = calloc(n + 1, sizeof *offs);
        if (!offs)
                abort();
        for (size_t i = 0, j = 0; i < n_svcs && j < n; i++) {
                if (!svcs[i]->health_check_node_port)
                        continue;
                offs[j++] = nsbuf.len;
                buf_put(&nsbuf, svcs[i]->key, (size_t) (strchr(svcs[i]->key, '/') - svcs[i]->key));
                buf_putc(&nsbuf, '\0');
        }
        for (size_t j = 0; j < n; j++)
                hs[j].ns = nsbuf.data + offs[j];
        if (rp->nodeports_match_all)
                hcnp_sync(p->hcnp, hs, n, NULL, 0);
        else
                hcnp_sync(p->hcnp, hs, n, rp->nodeport_ips, rp->n_nodeport_ips);
        free(offs);
        buf_done(&nsbuf);
        free(hs);
        free(svcs);
}

/* Switching modes: the other mode's rules (a previous run's, or
 * kube-proxy's) go once ours are in place. Until then they keep serving:
 * both modes' nat chains hook in at the same priority, and a connection
 * is translated by the first that matches, so new connections never meet
 * a node with neither. The same for iptables mode's rules in the other
 * iptables backend (a run that wrote nf_tables beside a legacy kubelet):
 * they would keep translating too, to endpoints that no longer are. */
static bool other_iptables_backend(const struct proxier *p, enum iptables_backend b) {
        return p->cfg->mode != PROXY_MODE_IPTABLES || b != p->host.iptables.backend;
}

/* Whether the other mode (or backend) left rules to remove. nf_tables is
 * asked over netlink, which answers at once: the tools are slow on a node
 * with a large nftables table (iptables-save walks it: minutes at 50k
 * services), so they run only when there is something to remove; legacy
 * tables are read only when they exist (apply/iptables-backend.h). Unsure
 * means yes. */
static bool other_mode_present(struct proxier *p) {
        for (size_t i = 0; i < p->n_fam; i++) {
                if (p->cfg->mode == PROXY_MODE_IPTABLES && nftables_table_present(p->fam[i].family))
                        return true;
                for (enum iptables_backend b = IPTABLES_BACKEND_NFT; b <= IPTABLES_BACKEND_LEGACY; b++)
                        if (other_iptables_backend(p, b) && iptables_backend_has_proxy(b, p->fam[i].family) != 0)
                                return true;
        }
        return false;
}

static void remove_other_mode(struct proxier *p) {
        double t0 = realtime_s();
        if (p->cfg->mode == PROXY_MODE_IPTABLES)
                nftables_cleanup();
        for (size_t i = 0; i < p->n_fam; i++)
                for (enum iptables_backend b = IPTABLES_BACKEND_NFT; b <= IPTABLES_BACKEND_LEGACY; b++)
                        if (other_iptables_backend(p, b))
                                iptables_cleanup_backend(b, p->fam[i].family);
        log_v(2, "Removed what the other mode or iptables backend left, if anything, in %.0f ms",
              (realtime_s() - t0) * 1000);
}

/* A family's rule counts and Local policies without local endpoints, after
 * its sync succeeded. iptables mode's render counts them (it writes the
 * top-level chains whole each time); nftables mode's partial sync renders
 * only changed services, so a tally keeps each service's share. It is
 * recounted whole only at first and after a Node change: the changed set
 * holds every other service whose count may have moved, also in a full
 * sync, and the hourly one need not walk every endpoint again. */
static void family_metrics(struct proxier *p, struct family_state *f, const struct render_params *rp,
                           const struct render_ipt_sync *c) {
        size_t internal = c->n_no_local_internal, external = c->n_no_local_external;

        if (f->nolocal) {
                nolocal_update(f->nolocal, p->model, rp, p->nolocal_all ? NULL : &p->changed);
                nolocal_totals(f->nolocal, &internal, &external);
        } else {
                metrics_rules(p->metrics, f->family, "filter", c->n_filter_rules, c->n_filter_rules);
                metrics_rules(p->metrics, f->family, "nat", c->n_nat_rules_total, c->n_nat_rules);
        }
        metrics_no_local_endpoints(p->metrics, f->family, "internal", internal);
        metrics_no_local_endpoints(p->metrics, f->family, "external", external);
}

static void on_sync_timer(struct ev_loop *l, void *userdata) {
        struct proxier *p = userdata;
        uint64_t start = ev_now_ms(l);
        bool full = p->need_full || p->last_full_ms == 0 || start - p->last_full_ms >= FULL_SYNC_PERIOD_MS;
        bool ok = true, udp_failed = false;

        p->sync_timer = NULL;
        p->last_sync_ms = start;
        if (p->n_syncs == 0 && p->n_failures == 0)
                p->other_mode_left = other_mode_present(p);
        if (full)
                p->host.nfacct = nfacct_ensure_all();
        for (size_t i = 0; i < p->n_fam; i++) {
                struct render_params rp;
                struct render_ipt_sync c = {0};
                double t0 = realtime_s();       /* each family's sync is timed, as upstream's proxiers */
                int r = sync_family(p, &p->fam[i], full, &rp, &c);
                if (r < 0) {
                        ok = false;
                } else {
                        family_metrics(p, &p->fam[i], &rp, &c);
                        if ((p->udp_changed || p->n_syncs == 0) && reconcile_udp(p, &rp) < 0)
                                udp_failed = true;
                        /* Every service is looked at: only when one that has
                                 * (or had) a health-check node port changed. */
                        if (i == 0 && (full || p->hcnp_changed))
                                update_hcnp(p, &rp);
                }
                metrics_sync_done(p->metrics, p->fam[i].family, full, r >= 0, realtime_s() - t0);
                render_params_done(&rp);
                if (r < 0)
                        break;
        }
        ev_now_update(l);
        uint64_t took = ev_now_ms(l) - start;
        /* serviceProxyHealthy of the health-check node ports: whether the
         * last sync succeeded (upstream asks its health server per probe). */
        hcnp_set_proxy_healthy(p->hcnp, ok);
        if (!ok) {
                uint64_t retry = config_mode_sync(p->cfg)->sync_period_ms;
                p->n_failures++;
                p->need_full = true;
                log_error_kv(0, "Sync failed", KV_SECONDS("retryingTime", retry / 1000.0),
                             KV_SECONDS("elapsed", took / 1000.0));
                schedule_sync(p, retry);
                return;
        }
        const char *k;
        void *v;
        for (size_t it = 0; hmap_next(&p->changed, &it, &k, &v);)
                free(v);
        hmap_done(&p->changed);
        /* A failed reconcile is tried again with the next sync, gone
         * frontends and all. */
        p->nolocal_all = false;
        p->udp_changed = udp_failed;
        if (!udp_failed) {
                free(p->gone_udp);
                p->gone_udp = NULL;
                p->n_gone_udp = 0;
        }
        p->hcnp_changed = false;
        p->need_full = false;
        if (full) {
                p->last_full_ms = start;
                /* A full sync (the first one also follows the decoding of
                 * every list) leaves most of its peak in freed heap; give
                 * it back, or the node sees the peak as kproxy's size. */
                double trim0 = realtime_s();
                malloc_trim(0);
                struct mallinfo2 mi = mallinfo2();
                log_v(2, "Returned freed heap to the system in %.0f ms; heap: %zu MiB in use, %zu MiB free",
                      (realtime_s() - trim0) * 1000, (mi.uordblks + mi.hblkhd) >> 20, mi.fordblks >> 20);
        }
        metrics_changes_applied(p->metrics);
        double now = realtime_s();
        for (size_t i = 0; i < p->n_triggers; i++)
                for (size_t j = 0; j < p->n_fam; j++)
                        if (p->fam[j].family == p->triggers[i].family && now >= p->triggers[i].time)
                                metrics_network_programming(p->metrics, p->triggers[i].family,
                                                            now - p->triggers[i].time);
        p->n_triggers = 0;
        p->n_syncs++;
        if (p->n_syncs == 1 && p->other_mode_left)
                remove_other_mode(p);
        for (size_t i = 0; i < p->n_fam; i++)
                health_server_synced(p->health, p->fam[i].family);
        log_v(2, "Sync %llu (%s) done in %llu ms", (unsigned long long) p->n_syncs, full ? "full" : "partial",
              (unsigned long long) took);
        if (p->n_syncs == 1)
                log_info("First sync done in %llu ms", (unsigned long long) took);
        if (p->need_full_soon) {
                p->need_full_soon = false;
                p->need_full = true;
                schedule_sync(p, config_mode_sync(p->cfg)->sync_period_ms);
                return;
        }
        /* Once an hour a full sync, as upstream; the timer re-arms per sync. */
        schedule_sync(p, FULL_SYNC_PERIOD_MS);
}

static void schedule_sync(struct proxier *p, uint64_t delay_ms) {
        p->sync_timer = ev_timer_cancel(p->loop, p->sync_timer);
        p->sync_timer = ev_timer_add(p->loop, delay_ms, on_sync_timer, p);
        p->sync_due = ev_now_ms(p->loop) + delay_ms;
}

static void on_canary(struct ev_loop *l, void *userdata) {
        struct proxier *p = userdata;
        (void) l;
        p->canary_timer = NULL;
        for (size_t i = 0; i < p->n_fam; i++) {
                uint8_t fam = p->fam[i].family;
                if (p->cfg->mode == PROXY_MODE_NFTABLES) {
                        /* The table is its own canary: gone means flushed. */
                        if (!p->initialized || p->n_syncs == 0 || nftables_table_present(fam))
                                continue;
                        /* The change monitor reports a deleted table at once;
                         * this is the backstop when notifications were off. */
                        log_warning("IPv%u nftables table kube-proxy is gone, resyncing everything", fam);
                        p->fam[i].nft_known = false;
                } else {
                        if (iptables_canary_present(&p->host.iptables, fam))
                                continue;
                        log_warning("IPv%u iptables canary is gone: the tables were flushed, resyncing everything",
                                    fam);
                        iptables_canary_ensure(&p->host.iptables, fam);
                }
                p->need_full = true;
                if (p->initialized) {
                        p->sync_timer = ev_timer_cancel(p->loop, p->sync_timer);
                        request_sync(p);
                }
        }
        p->canary_timer = ev_timer_add(p->loop, config_mode_sync(p->cfg)->sync_period_ms, on_canary, p);
}

/* Someone else changed our nftables table (or we cannot tell): resync it
 * whole, as the iptables canary does for a flushed table. */
static void on_nft_event(void *userdata, enum nftables_event ev, uint8_t family, const char *what) {
        struct proxier *p = userdata;
        /* What the records say is no longer what the table holds. */
        for (size_t i = 0; i < p->n_fam; i++)
                if (ev == NFTABLES_EVENT_LOST || p->fam[i].family == family)
                        p->fam[i].nft_known = false;
        if (p->need_full)
                return;         /* already on it */
        if (ev == NFTABLES_EVENT_LOST)
                log_warning("nftables change notifications were lost, resyncing everything");
        else
                log_warning("IPv%u nftables tables of kproxy were changed by another process (%s), resyncing "
                            "everything", family, what);
        p->need_full = true;
        if (p->initialized && p->n_syncs > 0)
                request_sync(p);
}

static void drain_monitor(void *userdata) {
        struct proxier *p = userdata;
        nftables_monitor_drain(p->monitor);
}

static void on_monitor(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        (void) l;
        (void) fd;
        (void) events;
        drain_monitor(userdata);
}

static int nft_setup(struct proxier *p) {
        int r = nftables_open(&p->nl);
        if (r < 0)
                return log_error_errno(r, "Failed to open nf_tables netlink");
        for (size_t i = 0; i < p->n_fam; i++) {
                r = nftsync_new(p->fam[i].family, p->nl, &p->fam[i].nft);
                if (r < 0)
                        return r;
                p->fam[i].nolocal = nolocal_new();
                if (!p->fam[i].nolocal)
                        return -ENOMEM;
                nftsync_set_after_commit(p->fam[i].nft, drain_monitor, p);
        }
        r = nftables_monitor_open(p->nl, on_nft_event, p, &p->monitor);
        if (r < 0)
                return log_error_errno(r, "Failed to watch nf_tables changes");
        p->monitor_fd = nftables_monitor_fd(p->monitor);
        r = ev_io_add(p->loop, p->monitor_fd, EPOLLIN, on_monitor, p);
        if (r < 0)
                return log_error_errno(r, "Failed to watch nf_tables changes");
        return 0;
}

int proxier_new(struct ev_loop *l, const struct proxier_opts *o, struct proxier **ret) {
        struct proxier *p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->loop = l;
        p->monitor_fd = -1;
        p->cfg = o->config;
        p->host = *o->host;
        p->node_name = strdup(o->node_name);
        p->health = o->health;
        p->metrics = o->metrics;
        p->hcnp = o->hcnp;
        p->model = model_new();
        p->service_cidrs = service_cidrs_new();
        p->watch_cidrs = o->service_cidrs;
        p->synced[PROXIER_SERVICE_CIDRS] = !o->service_cidrs;
        p->need_full = true;
        p->nolocal_all = true;
        if (!p->node_name || !p->model || !p->service_cidrs) {
                proxier_free(p);
                return -ENOMEM;
        }
        p->fam[p->n_fam++].family = 4;
        if (o->ipv6)
                p->fam[p->n_fam++].family = 6;
        /* Upstream's proxiers stamp "queued" as their sync loop starts. */
        for (size_t i = 0; i < p->n_fam; i++)
                metrics_sync_queued(p->metrics, p->fam[i].family);
        /* iptables-nft's tables are read over netlink, not with
         * iptables-save (apply/iptables.h). */
        if (p->cfg->mode == PROXY_MODE_IPTABLES && p->host.iptables_nft) {
                int r = nftables_open(&p->nl);
                if (r < 0)
                        log_warning_errno(r, "Failed to open nf_tables netlink (full syncs will read the "
                                             "tables with iptables-save), ignoring");
                else
                        nftables_set_dump_messages(p->nl, 32768);
        }
        for (size_t i = 0; i < p->n_fam; i++) {
                p->fam[i].delta = iptables_delta_new();
                p->fam[i].known = iptables_known_new(p->nl != NULL);
                p->fam[i].owned = owned_chains_new();
                if (!p->fam[i].delta || !p->fam[i].known || !p->fam[i].owned) {
                        proxier_free(p);
                        return -ENOMEM;
                }
                char path[4096];
                if (p->cfg->mode != PROXY_MODE_IPTABLES ||
                    !iptables_known_file(p->cfg->state_dir, p->fam[i].family, path, sizeof path))
                        continue;
                int r = iptables_known_load(p->fam[i].known, path);
                if (r >= 0)
                        log_v(2, "Read %d IPv%u chains known to be in the kernel from %s", r, p->fam[i].family,
                              path);
                else if (r == -ESTALE)
                        log_v(2, "%s holds digests of the other way of reading the tables, ignoring it", path);
                else if (r != -ENOENT)
                        log_warning_errno(r, "Failed to read %s (every chain will be written), ignoring", path);
        }

        if (p->cfg->mode == PROXY_MODE_NFTABLES) {
                int r = nft_setup(p);
                if (r < 0) {
                        proxier_free(p);
                        return r;
                }
        }
        for (size_t i = 0; i < p->n_fam && p->cfg->mode == PROXY_MODE_IPTABLES; i++)
                iptables_canary_ensure(&p->host.iptables, p->fam[i].family);
        p->canary_timer = ev_timer_add(l, config_mode_sync(p->cfg)->sync_period_ms, on_canary, p);

        *ret = p;
        return 0;
}

struct proxier *proxier_free(struct proxier *p) {
        const char *k;
        void *v;
        if (!p)
                return NULL;
        p->sync_timer = ev_timer_cancel(p->loop, p->sync_timer);
        p->canary_timer = ev_timer_cancel(p->loop, p->canary_timer);
        for (size_t it = 0; hmap_next(&p->changed, &it, &k, &v);)
                free(v);
        hmap_done(&p->changed);
        for (size_t i = 0; i < p->n_fam; i++) {
                owned_chains_free(p->fam[i].owned);
                iptables_delta_free(p->fam[i].delta);
                iptables_known_free(p->fam[i].known);
                nftsync_free(p->fam[i].nft);
                nolocal_free(p->fam[i].nolocal);
        }
        if (p->monitor_fd >= 0)
                ev_io_del(p->loop, p->monitor_fd);
        nftables_monitor_close(p->monitor);
        nftables_close(p->nl);
        model_free(p->model);
        service_cidrs_free(p->service_cidrs);
        free(p->gone_udp);
        free(p->triggers);
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
