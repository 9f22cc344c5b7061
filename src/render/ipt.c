/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the iptables renderer: write exactly what upstream
 * kube-proxy's iptables proxier writes (docs/reference/iptables-mode.md §4-§9),
 * rule for rule and comment for comment, in a deterministic order: services
 * by namespace/name, ports in spec order. Chain declarations and rules are
 * collected in separate buffers per table, because iptables-restore wants
 * every ":CHAIN" line before the rules that use it.
 *
 * This file writes the restore input as a whole; render/ipt-port.c writes
 * each service port's rules into it.
 *
 * A render is a function of its inputs: the chains the last sync left
 * come in read-only (render_ipt_sync.owned), and what this render wrote
 * goes out (render_ipt_sync.fresh), for the caller to keep.
 *
 * Every string written here is either a constant, a number, an address
 * formatted from its binary form, or a name validated by kube/decode.c, so
 * no escaping beyond the comment quoting of buf_arg() is ever needed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/endpoints.h"
#include "model/model.h"
#include "model/owned-chains.h"
#include "render/chain.h"
#include "render/ipt-port.h"
#include "render/render.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/hmap.h"

/* All service ports of the family, counted before rendering because
 * large-cluster mode depends on the total of their endpoints. Each port's
 * endpoints are merged again when it is rendered and freed right after:
 * held for every port at once they were 10 MB at 10k services x 10
 * endpoints, for a merge that costs a few milliseconds to repeat. */
struct collected {
        const struct svc *svc;
        const struct svc_port *port;
        const struct inet_addr *cip;
        const struct slice **slices;    /* the service's; owned by its first port's entry */
        size_t n_slices;
};

struct collection {
        struct collected *v;
        size_t n, cap;
        size_t total_eps, max_eps;
        struct endpoint_filter f;
};

/* A comment of fixed text (the per-port rules' are render/ipt-port.c's). */
static void comment(struct buf *b, const char *text) {
        buf_puts(b, " -m comment --comment");
        buf_arg(b, text);
}

static void collection_done(struct collection *col) {
        for (size_t i = 0; i < col->n; i++)
                if (i == 0 || col->v[i - 1].slices != col->v[i].slices)
                        free(col->v[i].slices);
        free(col->v);
        *col = (struct collection) {0};
}

/* Every service port of p->family, in rendering order, and the count of
 * its endpoints. Returns 0 or -ENOMEM. */
static int collect(const struct model *m, const struct render_params *p, struct collection *col) {
        size_t n_svcs;
        _cleanup_free_ const struct svc **svcs = model_services_sorted(m, &n_svcs);

        col->f = (struct endpoint_filter) {
                .node_name = p->node_name,
                .zone = p->node_zone,
                .prefer_same_node = p->prefer_same_node,
        };
        if (!svcs && n_svcs > 0)
                return -ENOMEM;
        for (size_t i = 0; i < n_svcs; i++) {
                const struct svc *s = svcs[i];
                const struct inet_addr *cip = svc_cluster_ip(s, p->family);
                size_t n_slices;
                if (!cip || s->n_ports == 0)
                        continue;
                _cleanup_free_ const struct slice **slices = model_service_slices(m, s->key, &n_slices);
                if (col->cap - col->n < s->n_ports) {
                        size_t cap = col->cap ? col->cap * 2 : 64;
                        while (cap - col->n < s->n_ports)
                                cap *= 2;
                        struct collected *tmp = realloc(col->v, cap * sizeof *col->v);
                        if (!tmp)
                                return -ENOMEM;
                        col->v = tmp;
                        col->cap = cap;
                }
                for (size_t j = 0; j < s->n_ports; j++) {
                        struct svc_port_endpoints eps;
                        int r = endpoints_collect(s, &s->ports[j], p->family, slices, n_slices, &col->f, &eps);
                        if (r < 0)
                                return r;
                        col->total_eps += eps.n_all;
                        if (eps.n_all > col->max_eps)
                                col->max_eps = eps.n_all;
                        endpoints_done(&eps);
                }
                for (size_t j = 0; j < s->n_ports; j++)
                        col->v[col->n++] = (struct collected) {s, &s->ports[j], cip, slices, n_slices};
                TAKE_PTR(slices);
        }
        return 0;
}

/* Fixed chains (§9) and their fixed rules (§4.1-4.3). */
static void write_fixed(struct render_ipt *t) {
        const struct render_params *p = t->p;

        render_ipt_chain_line(&t->filter_chains, "KUBE-SERVICES");
        render_ipt_chain_line(&t->filter_chains, "KUBE-EXTERNAL-SERVICES");
        render_ipt_chain_line(&t->filter_chains, "KUBE-FORWARD");
        render_ipt_chain_line(&t->filter_chains, "KUBE-NODEPORTS");
        render_ipt_chain_line(&t->filter_chains, "KUBE-PROXY-FIREWALL");
        if (p->family == 4 && p->localhost_nodeports) {
                render_ipt_chain_line(&t->filter_chains, "KUBE-FIREWALL");
                buf_puts(&t->filter_rules, "-A KUBE-FIREWALL");
                comment(&t->filter_rules, "block incoming localnet connections");
                buf_puts(&t->filter_rules, " -d 127.0.0.0/8 ! -s 127.0.0.0/8"
                                           " -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP\n");
        }
        render_ipt_chain_line(&t->nat_chains, "KUBE-SERVICES");
        render_ipt_chain_line(&t->nat_chains, "KUBE-NODEPORTS");
        render_ipt_chain_line(&t->nat_chains, "KUBE-POSTROUTING");
        render_ipt_chain_line(&t->nat_chains, "KUBE-MARK-MASQ");
        buf_printf(&t->nat_rules, "-A KUBE-POSTROUTING -m mark ! --mark %s/%s -j RETURN\n", p->mark, p->mark);
        buf_printf(&t->nat_rules, "-A KUBE-POSTROUTING -j MARK --xor-mark %s\n", p->mark);
        buf_puts(&t->nat_rules, "-A KUBE-POSTROUTING");
        comment(&t->nat_rules, "kubernetes service traffic requiring SNAT");
        buf_printf(&t->nat_rules, " -j MASQUERADE%s\n", p->random_fully ? " --random-fully" : "");
        buf_printf(&t->nat_rules, "-A KUBE-MARK-MASQ -j MARK --or-mark %s\n", p->mark);
}

/* The service just rendered (its ports' chains in t->cur) becomes an entry
 * of t->fresh. Returns 0 or -ENOMEM. */
static int owned_finish(struct render_ipt *t, const char *key) {
        int r = 0;
        if (t->cur_names > 0)
                r = owned_chains_put(t->fresh, key, t->cur.data, t->cur.len, t->cur_names, t->cur_rules);
        buf_clear(&t->cur);
        t->cur_rules = t->cur_names = 0;
        return r;
}

/* Every service port: its top-level rules, and its own chains where the
 * sync writes them. Returns 0 or -ENOMEM. */
static int write_ports(struct render_ipt *t, const struct collection *col) {
        const struct render_ipt_sync *sync = t->sync;
        _cleanup_free_ char *sep_names = malloc((col->max_eps + 1) * CHAIN_NAME_MAX);

        if (!sep_names)
                return -ENOMEM;
        for (size_t i = 0; i < col->n; i++) {
                const struct collected *cl = &col->v[i];
                struct render_ipt_port c = {.sep_names = sep_names};
                struct svc_port_endpoints eps;
                bool own = !sync || !sync->changed || hmap_get(sync->changed, cl->svc->key);
                int r = endpoints_collect(cl->svc, cl->port, t->p->family, cl->slices, cl->n_slices, &col->f, &eps);
                if (r < 0)
                        return r;
                render_ipt_port_init(t, &c, cl->svc, cl->port, &eps, cl->cip, own);
                render_ipt_port(t, &c, own);
                endpoints_done(&eps);
                /* A service's ports are consecutive: its last one closes its entry. */
                if (own && sync && (i + 1 == col->n || col->v[i + 1].svc != cl->svc) &&
                    owned_finish(t, cl->svc->key) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static void write_delete(struct render_ipt *t, const char *chain) {
        render_ipt_chain_line(&t->nat_chains, chain);
        buf_puts(&t->nat_rules, "-X ");
        buf_puts(&t->nat_rules, chain);
        buf_putc(&t->nat_rules, '\n');
}

static void add_used(struct hmap *used, const struct owned_chains *o, const struct hmap *skip) {
        struct owned_chains_entry e;
        const char *key;

        for (size_t i = 0; owned_chains_next(o, &i, &key, &e);) {
                if (skip && hmap_get(skip, key))
                        continue;
                const char *q = e.names;
                for (uint32_t j = 0; j < e.n_names; j++, q += strlen(q) + 1)
                        hmap_put(used, q, (void *) q);
        }
}

/* §10.5, a full sync: the owned chains in the kernel that no rule uses any
 * more are flushed and deleted in the same transaction. Used: what this
 * render wrote and, in the last part of a sync in parts, what the owned
 * list holds (the parts' chains). */
static void write_stale_full(struct render_ipt *t) {
        const struct hmap *existing = t->sync->existing;
        struct hmap used = HMAP_INIT;
        const char *k;

        if (!existing || existing->len == 0)
                return;
        add_used(&used, t->fresh, NULL);
        if (t->sync->changed && t->sync->owned)
                add_used(&used, t->sync->owned, t->sync->changed);
        for (size_t i = 0; hmap_next(existing, &i, &k, NULL);)
                if (!hmap_get(&used, k))
                        write_delete(t, k);
        hmap_done(&used);
}

static bool entry_has(const struct owned_chains_entry *o, const struct hmap *index, const char *name) {
        if (!o)
                return false;
        if (index->len > 0)
                return hmap_get(index, name) != NULL;
        const char *q = o->names;
        for (uint32_t i = 0; i < o->n_names; i++, q += strlen(q) + 1)
                if (strcmp(q, name) == 0)
                        return true;
        return false;
}

/* §10.5, a partial sync: a changed service's chains that it no longer
 * uses (all of them, once it is gone) are flushed and deleted. Returns the
 * rules the owned list held for the changed services. */
static size_t write_stale_partial(struct render_ipt *t) {
        size_t old_rules = 0;
        const char *k;

        for (size_t i = 0; hmap_next(t->sync->changed, &i, &k, NULL);) {
                struct owned_chains_entry old, now;
                struct hmap index = HMAP_INIT;
                if (!owned_chains_get(t->sync->owned, k, &old))
                        continue;
                bool has_now = owned_chains_get(t->fresh, k, &now);
                /* Names of a large service are looked up in a map. */
                if (has_now && now.n_names > 16) {
                        const char *q = now.names;
                        for (uint32_t j = 0; j < now.n_names; j++, q += strlen(q) + 1)
                                hmap_put(&index, q, (void *) q);
                }
                const char *q = old.names;
                for (uint32_t j = 0; j < old.n_names; j++, q += strlen(q) + 1)
                        if (!entry_has(has_now ? &now : NULL, &index, q))
                                write_delete(t, q);
                hmap_done(&index);
                old_rules += old.n_rules;
        }
        return old_rules;
}

/* §7.11: the NodePort dispatch is the last rule of nat KUBE-SERVICES. */
static void write_nodeport_dispatch(struct render_ipt *t) {
        const struct render_params *p = t->p;

        if (p->nodeports_match_all) {
                buf_puts(&t->nat_rules, "-A KUBE-SERVICES");
                comment(&t->nat_rules, "kubernetes service nodeports; NOTE: this must be the last rule in this chain");
                buf_puts(&t->nat_rules, " -m addrtype --dst-type LOCAL");
                if (p->family == 6)
                        buf_puts(&t->nat_rules, " ! -d ::1/128");
                else if (!p->localhost_nodeports)
                        buf_puts(&t->nat_rules, " ! -d 127.0.0.0/8");
                buf_puts(&t->nat_rules, " -j KUBE-NODEPORTS\n");
                return;
        }
        char ip[INET_ADDR_STRLEN];
        for (size_t i = 0; i < p->n_nodeport_ips; i++) {
                buf_puts(&t->nat_rules, "-A KUBE-SERVICES");
                comment(&t->nat_rules, "kubernetes service nodeports; NOTE: this must be the last rule in this chain");
                buf_printf(&t->nat_rules, " -d %s -j KUBE-NODEPORTS\n", inet_addr_format(&p->nodeport_ips[i], ip));
        }
}

/* §4.4 KUBE-FORWARD, last in filter. */
static void write_forward(struct render_ipt *t) {
        const struct render_params *p = t->p;

        if (!p->tcp_be_liberal)
                buf_printf(&t->filter_rules, "-A KUBE-FORWARD -m conntrack --ctstate INVALID%s -j DROP\n",
                           p->nfacct ? " -m nfacct --nfacct-name ct_state_invalid_dropped_pkts" : "");
        buf_puts(&t->filter_rules, "-A KUBE-FORWARD");
        comment(&t->filter_rules, "kubernetes forwarding rules");
        buf_printf(&t->filter_rules, " -m mark --mark %s/%s -j ACCEPT\n", p->mark, p->mark);
        buf_puts(&t->filter_rules, "-A KUBE-FORWARD");
        comment(&t->filter_rules, "kubernetes forwarding conntrack rule");
        buf_puts(&t->filter_rules, " -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n");
}

/* §9: each table's declarations, then its rules. The nat rules are nearly
 * all of it (33 of 35 MB at 10k services x 10 endpoints): into an empty out
 * their buffer becomes out and the rest goes in front, so the input is
 * never held twice. */
static void write_restore_input(struct render_ipt *t, struct buf *out) {
        struct buf head = BUF_INIT;

        buf_puts(&head, "*filter\n");
        buf_put(&head, t->filter_chains.data, t->filter_chains.len);
        buf_put(&head, t->filter_rules.data, t->filter_rules.len);
        buf_puts(&head, "COMMIT\n*nat\n");
        buf_put(&head, t->nat_chains.data, t->nat_chains.len);
        buf_done(&t->nat_chains);
        if (out->len == 0) {
                buf_done(out);
                *out = t->nat_rules;
                t->nat_rules = (struct buf) BUF_INIT;
                buf_insert(out, 0, head.data, head.len);
        } else {
                buf_put(out, head.data, head.len);
                buf_put(out, t->nat_rules.data, t->nat_rules.len);
        }
        buf_puts(out, "COMMIT\n");
        buf_done(&head);
}

int render_iptables(const struct model *m, const struct render_params *p, struct render_ipt_sync *sync,
                    struct buf *out) {
        struct render_ipt t = {.p = p, .sync = sync, .masq = {p->masquerade_all, p->detector != DETECTOR_NONE}};
        struct collection col = {0};
        size_t old_rules = 0;
        int r;

        if (sync) {
                sync->fresh = NULL;
                t.fresh = owned_chains_new();
                if (!t.fresh)
                        return -ENOMEM;
        }
        r = collect(m, p, &col);
        if (r < 0)
                goto out;
        t.large = col.total_eps > p->large_cluster_endpoints;
        write_fixed(&t);
        r = write_ports(&t, &col);
        if (r < 0)
                goto out;
        /* A partial sync without the owned list deletes nothing. */
        if (sync && (!sync->changed || sync->changed->len == 0))
                write_stale_full(&t);
        if (sync && sync->changed && sync->owned)
                old_rules = write_stale_partial(&t);
        write_nodeport_dispatch(&t);
        write_forward(&t);

        if (sync) {
                sync->n_filter_rules = render_ipt_count_rules(&t.filter_rules, 0);
                sync->n_nat_rules = render_ipt_count_rules(&t.nat_rules, 0);
                /* The top-level rules are all written; of the services' own,
                 * a partial sync wrote the changed ones', and the owned list
                 * has the others'. */
                sync->n_nat_rules_total = sync->n_nat_rules;
                if (sync->changed && sync->owned)
                        sync->n_nat_rules_total += owned_chains_n_rules(sync->owned) - old_rules;
                sync->n_no_local_internal = t.no_local_internal;
                sync->n_no_local_external = t.no_local_external;
                sync->fresh = TAKE_PTR(t.fresh);
        }
        write_restore_input(&t, out);
out:
        collection_done(&col);
        buf_done(&t.filter_chains);
        buf_done(&t.filter_rules);
        buf_done(&t.nat_chains);
        buf_done(&t.nat_rules);
        owned_chains_free(t.fresh);
        buf_done(&t.cur);
        return r;
}
