/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nftables mode behind the backend interface: one nftsync per family over
 * one nf_tables netlink socket, the change monitor (another process
 * touching kproxy's tables means the next sync trusts nothing), the table's
 * presence as the periodic check, the per-service tally of Local policies
 * without local endpoints (a partial sync renders only the changed
 * services), and the mode's part of switching modes and --cleanup.
 */
#include "proxy/nftables/backend.h"

#include <linux/capability.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "apply/exec.h"
#include "apply/iptables-backend.h"
#include "apply/nftables.h"
#include "ev/ev.h"
#include "host/host.h"
#include "model/model.h"
#include "proxy/backend.h"
#include "proxy/nftables/nftsync.h"
#include "render/nftmsg.h"
#include "render/nolocal.h"
#include "render/render.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/log.h"

struct family {
        uint8_t family;
        struct nftsync *sync;
        struct nolocal *nolocal;        /* Local policies without local endpoints, per service */
        bool rebuild;                   /* the last full sync failed: rebuild the table */
        bool listen;                    /* others committed during the last full sync: keep listening */
        bool synced;                    /* a sync has succeeded: the table is expected */
};

struct nftables_mode {
        struct backend base;          /* the core's handle: BACKEND_MODE() */
        struct backend_env env;
        struct nftables *nl;
        struct nftables_monitor *monitor;       /* the watch on kproxy's tables */
        int monitor_fd;
        struct family fam[2];
        size_t n_fam;
};

static struct family *family_of(struct nftables_mode *b, uint8_t family) {
        for (size_t i = 0; i < b->n_fam; i++)
                if (b->fam[i].family == family)
                        return &b->fam[i];
        return NULL;
}

/* nftables mode's IPv6 check: the nf_tables ip6tables tools, when there
 * are any (asking legacy about a table creates it). */
static bool nft_ipv6_usable(const struct host_facts *host) {
        struct iptables_tools v6 = host->iptables;
        iptables_tools_find(IPTABLES_BACKEND_NFT, &v6);
        const char *argv[] = {iptables_tool_name(&v6, 6, IPTABLES_TOOL_SAVE), "-t", "nat", NULL};
        return exec_run(argv, NULL, 0, NULL, NULL) == 0;
}

/* --- the change monitor --- */

/* Someone else changed kproxy's tables (or we cannot tell): the core's
 * next sync trusts nothing, as the iptables canary does for a flush. */
static void on_nft_event(void *userdata, enum nftables_event ev, uint8_t family, const char *what) {
        struct nftables_mode *b = userdata;
        char why[160];
        if (ev == NFTABLES_EVENT_LOST)
                snprintf(why, sizeof why, "nftables change notifications were lost");
        else
                snprintf(why, sizeof why, "nftables tables of kproxy were changed by another process (%s)", what);
        b->env.changed(b->env.core, ev == NFTABLES_EVENT_LOST ? 0 : family, why);
}

static void drain_monitor(void *userdata) {
        struct nftables_mode *b = userdata;
        nftables_monitor_drain(b->monitor);
}

static void on_monitor(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        (void) l;
        (void) fd;
        (void) events;
        drain_monitor(userdata);
}

/* --- the object --- */

static struct nftables_mode *nft_free(struct nftables_mode *b) {
        if (!b)
                return NULL;
        for (size_t i = 0; i < b->n_fam; i++) {
                nftsync_free(b->fam[i].sync);
                nolocal_free(b->fam[i].nolocal);
        }
        if (b->monitor_fd >= 0)
                ev_io_del(b->env.loop, b->monitor_fd);
        nftables_monitor_close(b->monitor);
        nftables_close(b->nl);
        free(b);
        return NULL;
}

static struct backend *nft_destroy(struct backend *base) {
        if (base)
                nft_free(BACKEND_MODE(base, struct nftables_mode));
        return NULL;
}

static int nft_create(const struct backend_env *env, struct backend **ret) {
        struct nftables_mode *b = xcalloc(1, sizeof *b);
        int r;

        b->env = *env;
        b->monitor_fd = -1;
        r = nftables_open(&b->nl);
        if (r < 0) {
                log_error_errno(r, "Failed to open nf_tables netlink");
                goto fail;
        }
        for (size_t i = 0; i < env->n_families && i < 2; i++) {
                struct family *f = &b->fam[b->n_fam++];
                f->family = env->families[i];
                f->sync = nftsync_new(f->family, b->nl);
                f->nolocal = nolocal_new();
                nftsync_set_after_commit(f->sync, drain_monitor, b);
        }
        r = nftables_monitor_open(b->nl, on_nft_event, b, &b->monitor);
        if (r < 0) {
                log_error_errno(r, "Failed to watch nf_tables changes");
                goto fail;
        }
        b->monitor_fd = nftables_monitor_fd(b->monitor);
        r = ev_io_add(env->loop, b->monitor_fd, EPOLLIN, on_monitor, b);
        if (r < 0) {
                b->monitor_fd = -1;
                log_error_errno(r, "Failed to watch nf_tables changes");
                goto fail;
        }
        b->base.ops = &backend_nftables;
        *ret = &b->base;
        return 0;
fail:
        nft_free(b);
        return r;
}

/* A full sync without notifications (a quarter of a large load's cost);
 * whether anyone else committed meanwhile, the generation count tells:
 * then the core checks again soon, and the next full sync listens. */
static int full_quietly(struct nftables_mode *b, struct family *f, const struct backend_sync *s, bool rebuild,
                        struct nftsync_stats *st, bool *ret_recheck) {
        uint32_t g0 = 0, g1 = 0;
        bool quiet = !f->listen && nftables_genid(b->nl, &g0) == 0;

        if (quiet) {
                nftables_monitor_drain(b->monitor);
                quiet = nftables_monitor_listen(b->monitor, false) == 0;
        }
        int r = nftsync_full(f->sync, s->model, s->params, s->service_cidrs, s->n_service_cidrs, rebuild, st);
        f->listen = false;
        if (quiet && (nftables_monitor_listen(b->monitor, true) < 0 || nftables_genid(b->nl, &g1) < 0 ||
                      (r == 0 && g1 - g0 != st->transactions))) {
                log_v(2, "Other nftables changes were committed during the IPv%u full sync, checking again",
                      f->family);
                f->listen = true;
                *ret_recheck = true;
        }
        return r;
}

/* A full sync reads back what the table holds and writes in place what
 * differs (after a failed one, it rebuilds the table); a resync re-renders
 * everything and sends what differs from the records; a partial sync sends
 * the changed services. */
static int nft_sync(struct backend *base, uint8_t family, const struct backend_sync *s, struct backend_stats *ret) {
        struct nftables_mode *b = BACKEND_MODE(base, struct nftables_mode);
        struct family *f = family_of(b, family);
        struct nftsync_stats st = {0};
        bool full = s->kind != BACKEND_SYNC_PARTIAL;
        bool rebuild = full && f && f->rebuild;
        bool resync = s->kind == BACKEND_SYNC_RESYNC && !rebuild;
        int r;

        *ret = (struct backend_stats) {0};
        if (!f)
                return -EINVAL;
        if (resync)
                r = nftsync_resync(f->sync, s->model, s->params, s->service_cidrs, s->n_service_cidrs, &st);
        else if (full)
                r = full_quietly(b, f, s, rebuild, &st, &ret->recheck);
        else
                r = nftsync_partial(f->sync, s->model, s->params, s->changed, &st);
        if (r < 0) {
                /* A full sync that failed may have left part of its work. */
                f->rebuild = full;
                ret->kernel_refused = true;
                return r;
        }
        f->rebuild = false;
        f->synced = true;
        nolocal_update(f->nolocal, s->model, s->params, s->all_changed ? NULL : s->changed);
        nolocal_totals(f->nolocal, &ret->no_local_internal, &ret->no_local_external);
        /* Upstream's message and numServices, then what kproxy did: the
         * kind of sync, what was written and kept, the kernel's share. */
        log_v_kv(2, "Reloading service nftables data", KV_STR("ipFamily", family == 6 ? "IPv6" : "IPv4"),
                 KV_INT("numServices", model_n_services(s->model)),
                 KV_STR("kind", rebuild ? "rebuild" : resync ? "resync" : full ? "full" : "partial"),
                 KV_INT("chainsWritten", st.chains_written), KV_INT("chainsKept", st.chains_kept),
                 KV_INT("chainsDeleted", st.chains_deleted), KV_INT("elementsAdded", st.elements_added),
                 KV_INT("elementsDeleted", st.elements_deleted), KV_INT("messages", st.messages),
                 KV_INT("transactions", st.transactions), KV_SECONDS("kernelElapsed", st.kernel_seconds),
                 KV_SECONDS("readElapsed", st.list_seconds));
        return 0;
}

/* The table is its own canary: gone means flushed. The change monitor
 * reports a deleted table at once; this is the backstop when
 * notifications were off. */
static void nft_check(struct backend *base) {
        struct nftables_mode *b = BACKEND_MODE(base, struct nftables_mode);
        for (size_t i = 0; i < b->n_fam; i++) {
                struct family *f = &b->fam[i];
                if (!f->synced || nftables_table_present(f->family))
                        continue;
                b->env.changed(b->env.core, f->family, "nftables table kube-proxy is gone");
        }
}

/* --- switching modes, --cleanup --- */

/* Asked of nf_tables over netlink, which answers at once. nftables mode
 * running owns every kube-proxy table there is. */
static bool nft_leftovers(const struct host_facts *h, bool running) {
        (void) h;
        return !running && (nftables_table_present(4) || nftables_table_present(6));
}

static int nft_remove_leftovers(const struct host_facts *h, bool running) {
        (void) h;
        return running ? 0 : nftables_cleanup();
}

static int nft_cleanup(const struct kproxy_config *c, const struct host_facts *h) {
        (void) c;
        (void) h;
        return nftables_cleanup();
}

static int nft_render(const struct model *m, const struct render_params *p, const struct inet_cidr *service_cidrs,
                      size_t n_service_cidrs, bool netlink, struct buf *out) {
        if (!netlink)
                return render_nftables(m, p, service_cidrs, n_service_cidrs, out);
        struct nftmsg msg;
        nftmsg_init(&msg, p->family, 0);
        nftmsg_batch_begin(&msg);
        int r = render_nftables_netlink(m, p, service_cidrs, n_service_cidrs, &msg);
        nftmsg_batch_end(&msg);
        buf_put(out, msg.b.data, msg.b.len);
        nftmsg_done(&msg);
        return r;
}

const struct backend_ops backend_nftables = {
        .name = "nftables",
        .stopped = "the rules stay in place",
        .caps = 1ULL << CAP_NET_ADMIN,
        .service_cidrs = true,
        .conntrack = true,
        .ipv6_usable = nft_ipv6_usable,
        .create = nft_create,
        .destroy = nft_destroy,
        .sync = nft_sync,
        .check = nft_check,
        .leftovers = nft_leftovers,
        .remove_leftovers = nft_remove_leftovers,
        .cleanup = nft_cleanup,
        .render = nft_render,
};
