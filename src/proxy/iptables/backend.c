/* SPDX-License-Identifier: Apache-2.0 */
/*
 * iptables mode behind the backend interface: one iptsync per family, the
 * canary chains as the check that nobody flushed the tables, upstream's
 * node set-up for the mode (route_localnet, nfacct), and the mode's part
 * of switching modes and --cleanup, across both iptables backends.
 */
#include "host/render-params.h"
#include "proxy/iptables/backend.h"

#include <linux/capability.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apply/exec.h"
#include "apply/iptables-backend.h"
#include "apply/iptables-known.h"
#include "apply/iptables.h"
#include "apply/nfacct.h"
#include "apply/nftables.h"
#include "apply/sysctl.h"
#include "config/config.h"
#include "host/host.h"
#include "proxy/backend.h"
#include "proxy/iptables/iptsync.h"
#include "render/render.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/log.h"

#define ROUTE_LOCALNET "/proc/sys/net/ipv4/conf/all/route_localnet"

struct iptables_mode {
        struct backend base;          /* the core's handle: BACKEND_MODE() */
        struct backend_env env;
        struct nftables *nl;            /* iptables-nft: reads over netlink */
        struct iptsync_real real;
        struct iptsync *sync[2];        /* IPv4, IPv6 */
        uint8_t families[2];
        size_t n_families;
        bool nfacct;                    /* the counters exist: the rules use them */
};

static struct iptsync *family_sync(struct iptables_mode *b, uint8_t family) {
        for (size_t i = 0; i < b->n_families; i++)
                if (b->families[i] == family)
                        return b->sync[i];
        return NULL;
}

/* --- node set-up --- */

/* Localhost NodePorts need the kernel to route 127/8 to other hosts.
 * Whether they are on is the renderer's decision (IPv4, the flag, loopback
 * in nodePortAddresses); the Node is not needed for it. */
static int ensure_route_localnet(const struct kproxy_config *c, const struct host_facts *h, const char *node_name,
                                 const char *root) {
        struct render_params rp;
        uint64_t cur;
        bool want;

        if (render_params_init(&rp, 4, c, node_name, NULL, h, NULL) < 0)
                return 0;       /* an invalid configuration is refused before this */
        want = rp.localhost_nodeports;
        render_params_done(&rp);
        if (!want || (sysctl_read_u64(root, ROUTE_LOCALNET, &cur) == 0 && cur == 1))
                return 0;
        int r = sysctl_write(root, ROUTE_LOCALNET, "1");
        if (r < 0) {
                log_warning_errno(r, "Failed to set net.ipv4.conf.all.route_localnet=1 (NodePorts on localhost "
                                     "will not answer)");
                return sysctl_not_permitted(r) ? 0 : r;
        }
        log_info("Set net.ipv4.conf.all.route_localnet=1 for NodePorts on localhost (turn them off with "
                 "--iptables-localhost-nodeports=false, or leave loopback out of --nodeport-addresses)");
        return 0;
}

static int ipt_setup(const struct kproxy_config *c, struct host_facts *host, const char *node_name,
                     const char *root) {
        if (host->tcp_be_liberal)
                log_info("nf_conntrack_tcp_be_liberal is set: no rule drops conntrack-INVALID packets");
        int r = ensure_route_localnet(c, host, node_name, root);
        host->nfacct = nfacct_ensure_all();
        return r;
}

/* IPv6 is programmed when this node's ip6tables works. */
static bool ipt_ipv6_usable(const struct host_facts *host) {
        const char *argv[] = {iptables_tool_name(&host->iptables, 6, IPTABLES_TOOL_SAVE), "-t", "nat", NULL};
        return exec_run(argv, NULL, 0, NULL, NULL) == 0;
}

/* --- the object --- */

static struct iptables_mode *ipt_free(struct iptables_mode *b) {
        if (!b)
                return NULL;
        for (size_t i = 0; i < b->n_families; i++)
                iptsync_free(b->sync[i]);
        nftables_close(b->nl);
        free(b);
        return NULL;
}

static struct backend *ipt_destroy(struct backend *base) {
        if (base)
                ipt_free(BACKEND_MODE(base, struct iptables_mode));
        return NULL;
}

static int ipt_create(const struct backend_env *env, struct backend **ret) {
        const struct host_facts *h = env->host;
        struct iptables_mode *b;

        if (h->iptables_missing)
                return log_error_errno(-ENOENT, "Cannot run in iptables mode: %s", h->iptables_why);
        log_info("iptables backend %s, run as %s: %s", iptables_backend_to_string(h->iptables.backend),
                 iptables_tool_name(&h->iptables, 4, IPTABLES_TOOL_CMD), h->iptables_why);
        b = xcalloc(1, sizeof *b);
        b->env = *env;
        b->nfacct = h->nfacct;
        /* iptables-nft's tables are read over netlink, not with
         * iptables-save (apply/iptables.h). */
        if (h->iptables_nft) {
                int r = nftables_open(&b->nl);
                if (r < 0)
                        log_warning_errno(r, "Failed to open nf_tables netlink (full syncs will read the tables "
                                             "with iptables-save), ignoring");
                else
                        nftables_set_dump_messages(b->nl, 32768);
        }
        b->real = (struct iptsync_real) {&h->iptables, b->nl};
        struct iptsync_kernel k = iptsync_kernel_real(&b->real);
        for (size_t i = 0; i < env->n_families && i < 2; i++) {
                b->families[i] = env->families[i];
                b->sync[b->n_families++] = iptsync_new(env->families[i], &k, env->config->state_dir);
                iptables_canary_ensure(&h->iptables, env->families[i]);
        }
        b->base.ops = &backend_iptables;
        *ret = &b->base;
        return 0;
}

static int ipt_sync(struct backend *base, uint8_t family, const struct backend_sync *s, struct backend_stats *ret) {
        struct iptables_mode *b = BACKEND_MODE(base, struct iptables_mode);
        struct iptsync *sync = family_sync(b, family);
        struct iptsync_stats st;
        bool full = s->kind != BACKEND_SYNC_PARTIAL;
        int r;

        if (!sync)
                return -EINVAL;
        /* The counters may have gone (a flush of nfacct): a full sync makes
         * them again, and the rules use them only when they exist. */
        if (full && family == b->families[0])
                b->nfacct = nfacct_ensure_all();
        struct render_params p = *s->params;
        p.nfacct = b->nfacct;
        r = full ? iptsync_full(sync, s->model, &p, &st) : iptsync_partial(sync, s->model, &p, s->changed, &st);
        *ret = (struct backend_stats) {
                .kernel_refused = st.refused,
                .no_local_internal = st.n_no_local_internal,
                .no_local_external = st.n_no_local_external,
                .n_tables = 2,
                .tables = {{"filter", st.n_filter_rules, st.n_filter_rules},
                           {"nat", st.n_nat_rules_total, st.n_nat_rules}},
        };
        return r;
}

/* The canary chains: gone means a third party flushed the tables. */
static void ipt_check(struct backend *base) {
        struct iptables_mode *b = BACKEND_MODE(base, struct iptables_mode);
        for (size_t i = 0; i < b->n_families; i++) {
                uint8_t fam = b->families[i];
                if (iptables_canary_present(&b->env.host->iptables, fam))
                        continue;
                iptables_canary_ensure(&b->env.host->iptables, fam);
                b->env.changed(b->env.core, fam, "iptables canary is gone: the tables were flushed");
        }
}

/* --- switching modes, --cleanup --- */

/* The iptables backends whose chains are not the running backend's: the
 * one not programmed when this mode runs (a run that wrote nf_tables beside
 * a legacy kubelet), both when it does not. */
static bool not_ours(const struct host_facts *h, bool running, enum iptables_backend b) {
        return !running || b != h->iptables.backend;
}

static bool ipt_leftovers(const struct host_facts *h, bool running) {
        for (uint8_t fam = 4; fam <= 6; fam += 2)
                for (enum iptables_backend b = IPTABLES_BACKEND_NFT; b <= IPTABLES_BACKEND_LEGACY; b++)
                        if (not_ours(h, running, b) && iptables_backend_has_proxy(b, fam) != 0)
                                return true;
        return false;
}

static int ipt_remove_leftovers(const struct host_facts *h, bool running) {
        int r = 0;
        for (uint8_t fam = 4; fam <= 6; fam += 2)
                for (enum iptables_backend b = IPTABLES_BACKEND_NFT; b <= IPTABLES_BACKEND_LEGACY; b++) {
                        int q = not_ours(h, running, b) ? iptables_cleanup_backend(b, fam) : 0;
                        if (r == 0 && q < 0)
                                r = q;
                }
        return r;
}

/* Every backend's chains, where a switch of backends (or a kube-proxy
 * image that guessed otherwise) may have left some, unless
 * --iptables-backend names one; and what --state-dir kept. */
static int ipt_cleanup(const struct kproxy_config *c, const struct host_facts *h) {
        int r = 0;
        for (uint8_t fam = 4; fam <= 6; fam += 2) {
                char path[4096];
                if (iptables_known_file(c->state_dir, fam, path, sizeof path) && unlink(path) < 0 &&
                    errno != ENOENT)
                        log_warning_errno(-errno, "Failed to remove %s, ignoring", path);
                for (enum iptables_backend b = IPTABLES_BACKEND_NFT; b <= IPTABLES_BACKEND_LEGACY; b++) {
                        if (h->iptables_explicit && b != h->iptables.backend)
                                continue;
                        int q = iptables_cleanup_backend(b, fam);
                        if (r == 0 && q < 0)
                                r = q;
                }
        }
        return r;
}

static int ipt_render(const struct model *m, const struct render_params *p, const struct inet_cidr *service_cidrs,
                      size_t n_service_cidrs, bool netlink, struct buf *out) {
        (void) service_cidrs;
        (void) n_service_cidrs;
        (void) netlink;         /* no such form: the text */
        return render_iptables(m, p, NULL, out);
}

const struct backend_ops backend_iptables = {
        .name = "iptables",
        .stopped = "the rules stay in place",
        /* netfilter; iptables-legacy's raw socket. */
        .caps = 1ULL << CAP_NET_ADMIN | 1ULL << CAP_NET_RAW,
        .conntrack = true,
        .setup = ipt_setup,
        .ipv6_usable = ipt_ipv6_usable,
        .create = ipt_create,
        .destroy = ipt_destroy,
        .sync = ipt_sync,
        .check = ipt_check,
        .leftovers = ipt_leftovers,
        .remove_leftovers = ipt_remove_leftovers,
        .cleanup = ipt_cleanup,
        .render = ipt_render,
};
