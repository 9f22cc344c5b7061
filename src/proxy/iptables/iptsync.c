/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of iptables mode's sync: render everything that could have
 * changed, then send the kernel only what differs from what it is known to
 * hold, in one transaction per piece. What is known is a fact about the
 * kernel (a digest read back after a write), never an assumption: a chain
 * someone else changed is written again, and a failed restore forgets
 * everything so the next (full) sync rewrites what it cannot vouch for.
 */
#include "proxy/iptables/iptsync.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apply/iptables-delta.h"
#include "apply/iptables-known.h"
#include "apply/iptables-lines.h"
#include "apply/iptables.h"
#include "model/model.h"
#include "model/owned-chains.h"
#include "render/render.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/fnv.h"
#include "util/hmap.h"
#include "util/log.h"

/* A full sync that wrote more chains than this reads them back at once
 * when reading means iptables-save (over netlink it reads only those). */
#define KNOWN_LEARN_MIN 1000

/* Services per part of a full sync (see sync_parts()). */
#define PART_SERVICES 1000

struct iptsync {
        uint8_t family;
        struct iptsync_kernel k;
        char *state_dir;
        struct owned_chains *owned;     /* each service's nat chains as the last sync wrote them */
        struct iptables_delta *delta;   /* the top-level chains as the last sync left them */
        struct iptables_known *known;   /* chains the kernel holds as kproxy wrote them */
        size_t part_services;           /* per part of a full sync; 0: one input */
        uint64_t last_hash;             /* of the last restore input applied */
        bool have_hash;
};

/* --- the real kernel --- */

static int real_scan(void *u, uint8_t family, struct hmap *existing, char **ret_names, bool *ret_jumps_ok,
                     struct iptables_known *known) {
        const struct iptsync_real *r = u;
        return iptables_scan(r->tools, r->nl, family, existing, ret_names, ret_jumps_ok, known);
}

static int real_ensure_jumps(void *u, uint8_t family) {
        const struct iptsync_real *r = u;
        return iptables_ensure_jumps(r->tools, family);
}

static int real_restore(void *u, uint8_t family, const char *input, size_t len, bool loaded) {
        const struct iptsync_real *r = u;
        return iptables_restore(r->tools, family, input, len, loaded);
}

static int real_observe(void *u, uint8_t family, const char *input, size_t len, struct iptables_known *known) {
        const struct iptsync_real *r = u;
        return iptables_observe(r->tools, r->nl, family, input, len, known);
}

struct iptsync_kernel iptsync_kernel_real(struct iptsync_real *r) {
        return (struct iptsync_kernel) {
                .scan = real_scan,
                .ensure_jumps = real_ensure_jumps,
                .restore = real_restore,
                .observe = real_observe,
                .userdata = r,
                .netlink = r->nl != NULL,
        };
}

/* --- life --- */

struct iptsync *iptsync_new(uint8_t family, const struct iptsync_kernel *k, const char *state_dir) {
        struct iptsync *s = xcalloc(1, sizeof *s);
        char path[4096];

        s->family = family;
        s->k = *k;
        s->state_dir = state_dir ? xstrdup(state_dir) : NULL;
        s->owned = owned_chains_new();
        s->delta = iptables_delta_new();
        s->known = iptables_known_new(k->netlink);
        s->part_services = PART_SERVICES;
        if (iptables_known_file(s->state_dir, family, path, sizeof path)) {
                int r = iptables_known_load(s->known, path);
                if (r >= 0)
                        log_v(2, "Read %d IPv%u chains known to be in the kernel from %s", r, family, path);
                else if (r == -ESTALE)
                        log_v(2, "%s holds digests of the other way of reading the tables, ignoring it", path);
                else if (r != -ENOENT)
                        log_warning_errno(r, "Failed to read %s (every chain will be written), ignoring", path);
        }
        return s;
}

struct iptsync *iptsync_free(struct iptsync *s) {
        if (!s)
                return NULL;
        owned_chains_free(s->owned);
        iptables_delta_free(s->delta);
        iptables_known_free(s->known);
        free(s->state_dir);
        free(s);
        return NULL;
}

void iptsync_set_part_services(struct iptsync *s, size_t services) {
        s->part_services = services;
}

/* --- syncing --- */

/* What the kernel holds for the chains just written, into known. Over
 * netlink those chains are read back. With iptables-save, which reads whole
 * tables, only when they are many (a first sync, a restart; the few of a
 * later full sync are simply written again next time), or with a state
 * directory when the table is small (the read is cheap), so that the next
 * process knows every chain. Then the state file. The read needs only the
 * chain declarations of what was sent (after those of earlier parts of the
 * sync, in decl): they are taken out, and sent freed, before it (at 10k
 * services x 10 endpoints, 3.5 of 35 MB: the input held through the
 * read-back was the cold start's peak). */
static void learn(struct iptsync *s, struct buf *sent, struct buf *decl, struct iptsync_stats *st) {
        char path[4096];
        bool keep = iptables_known_file(s->state_dir, s->family, path, sizeof path);
        size_t unlearned = iptables_known_unlearned(s->known);
        double t0 = clock_mono_s();

        if (unlearned > 0 &&
            (s->k.netlink || unlearned > KNOWN_LEARN_MIN || (keep && owned_chains_n_chains(s->owned) <= KNOWN_LEARN_MIN))) {
                iptables_lines_declarations(sent->data, sent->len, decl);
                buf_done(sent);
                if (s->k.observe(s->k.userdata, s->family, decl->data, decl->len, s->known) == 0)
                        iptables_known_learn(s->known);
        }
        buf_done(sent);
        buf_done(decl);
        st->read_seconds += clock_mono_s() - t0;
        int q = keep ? iptables_known_save(s->known, path) : 0;
        if (q < 0)
                log_warning_errno(q, "Failed to write %s (a restart will write every chain), ignoring", path);
}

/* Sends out, or what of it differs from what the kernel holds: in a full
 * sync the chains the kernel does not hold as rendered; in a partial one
 * the top-level chains only where they changed, by rule where that is
 * short. A refused change by rule is -EAGAIN. A full sync frees out once
 * it is used. */
static int restore_changes(struct iptsync *s, bool full, bool more, bool loaded, struct buf *out,
                           struct buf *decl, struct iptsync_stats *st) {
        struct buf rewritten = BUF_INIT;
        uint64_t h = fnv64(FNV64_INIT, out->data, out->len);
        int r = 0;

        if (!full && s->have_hash && h == s->last_hash) {
                log_v(4, "IPv%u rules unchanged, skipping the restore", s->family);
                return 0;
        }
        size_t left = 0;
        /* more: the last part of a sync in parts; decl holds the
         * declarations of what the earlier ones wrote. */
        if (full && more)
                left = iptables_known_rewrite_more(s->known, out->data, out->len, &rewritten);
        else if (full)
                left = iptables_known_rewrite(s->known, out->data, out->len, &rewritten);
        else
                st->chains_by_rule = iptables_delta_rewrite(s->delta, out->data, out->len, &rewritten);
        st->chains_left_out += left;
        struct buf *sent = left > 0 || st->chains_by_rule > 0 ? &rewritten : out;
        st->bytes_sent += sent->len;
        double t0 = clock_mono_s();
        r = s->k.restore(s->k.userdata, s->family, sent->data, sent->len, loaded);
        st->restore_seconds += clock_mono_s() - t0;
        if (r < 0) {
                st->refused = true;
                s->have_hash = false;
                iptables_delta_forget(s->delta);
                iptables_known_forget(s->known);
                if (st->chains_by_rule > 0)
                        r = -EAGAIN;
                goto out;
        }
        iptables_delta_commit(s->delta, out->data, out->len);
        if (full) {
                iptables_known_commit(s->known);
                /* Used up: learn() frees what was sent, out too. */
                if (sent != out)
                        buf_done(out);
                learn(s, sent, decl, st);
        } else {
                iptables_known_touch(s->known, sent->data, sent->len);
        }
        s->last_hash = h;
        s->have_hash = true;
out:
        buf_done(&rewritten);
        return r;
}

/* Whether a restore input writes anything (a rewrite that left out every
 * chain keeps only the table and COMMIT lines). */
static bool writes_any(const struct buf *in) {
        const char *end = in->data + in->len;
        struct iptables_line l;

        for (const char *q = in->data; iptables_line_next(&q, end, &l);)
                if (l.len > 0 && (l.p[0] == ':' || l.p[0] == '-'))
                        return true;
        return false;
}

/* One part of a full sync in parts (sync_parts()): what of it the kernel
 * does not hold as rendered is restored, and the declarations of what was
 * written are kept in decl for the read-back. */
static int restore_part(struct iptsync *s, const struct buf *in, bool first, bool loaded, struct buf *decl,
                        struct iptsync_stats *st) {
        struct buf rewritten = BUF_INIT;
        size_t left = first ? iptables_known_rewrite(s->known, in->data, in->len, &rewritten)
                            : iptables_known_rewrite_more(s->known, in->data, in->len, &rewritten);
        const struct buf *sent = left > 0 ? &rewritten : in;
        int r = 0;

        st->chains_left_out += left;
        if (writes_any(sent)) {
                double t0 = clock_mono_s();
                r = s->k.restore(s->k.userdata, s->family, sent->data, sent->len, loaded);
                st->restore_seconds += clock_mono_s() - t0;
                st->bytes_sent += sent->len;
                if (r >= 0)
                        iptables_lines_declarations(sent->data, sent->len, decl);
        }
        if (r < 0) {
                st->refused = true;
                s->have_hash = false;
                iptables_delta_forget(s->delta);
                iptables_known_forget(s->known);
        }
        buf_done(&rewritten);
        return r;
}

/* A full sync of many services, in parts: the own chains of
 * s->part_services services at a time (rendered, the top-level chains of
 * the render dropped, and restored where the kernel does not hold them as
 * rendered), then the caller's last part, the top-level chains that jump
 * to them and the deletion of the chains no part wrote. Why: the restore
 * input of 10k services x 10 endpoints is 35 MB, and held whole (with the
 * digests of a loaded table) it was most of a full sync's peak: 73 MiB RSS
 * at a cold start, 83 at the hourly resync; a part is a tenth of it. Each
 * part renders the top-level chains again only to drop them, some 30 ms at
 * 10k. Between parts every rule jumps to a chain that exists and holds its
 * old or its new rules, as between the pieces of one split input
 * (apply/iptables-split.h): a part writes a service's chains together, and
 * the chains that go are deleted last. The parts' chains go into owned
 * (a new list, for s->owned once all are written). Returns 0 or -errno
 * (the restore's). */
static int sync_parts(struct iptsync *s, const struct model *m, const struct render_params *p, bool loaded,
                      struct owned_chains *owned, struct buf *decl, struct iptsync_stats *st) {
        size_t n;
        _cleanup_free_ const struct svc **svcs = model_services_sorted(m, &n);
        int r = 0;

        if (!svcs && n > 0)
                return -ENOMEM;
        for (size_t i = 0; i < n && r >= 0; i += s->part_services) {
                struct hmap part = HMAP_INIT_STRINGS;
                struct render_ipt_sync rs = {.changed = &part};
                struct buf out = BUF_INIT, own = BUF_INIT;

                for (size_t j = i; j < n && j < i + s->part_services; j++)
                        hmap_put(&part, svcs[j]->key, (void *) svcs[j]->key);
                r = render_iptables(m, p, &rs, &out);
                if (r >= 0) {
                        iptables_lines_owned(out.data, out.len, &own);
                        buf_done(&out);
                        r = restore_part(s, &own, i == 0, loaded, decl, st);
                }
                if (r >= 0)
                        owned_chains_merge(owned, TAKE_PTR(rs.fresh), &part);
                owned_chains_free(rs.fresh);
                hmap_done(&part);
                buf_done(&own);
        }
        return r;
}

static int sync_once(struct iptsync *s, bool full, const struct model *m, const struct render_params *p,
                const struct hmap *changed, struct iptsync_stats *st) {
        struct buf out = BUF_INIT;
        struct render_ipt_sync rs = {0};
        /* A full sync's read of the owned nat chains the kernel holds; the
         * owned list says what is there between full syncs. */
        struct hmap existing = HMAP_INIT, none = HMAP_INIT;
        char *existing_names = NULL;
        struct buf decl = BUF_INIT;     /* the chains written by the parts of a full sync */
        int r;

        *st = (struct iptsync_stats) {0};
        if (full) {
                bool jumps_ok = false;
                double t0 = clock_mono_s();
                /* One read of the tables tells both which owned chains exist
                 * and whether the jump rules are in place; only missing jumps
                 * cost more tool runs. */
                r = s->k.scan(s->k.userdata, s->family, &existing, &existing_names, &jumps_ok, s->known);
                st->read_seconds = clock_mono_s() - t0;
                if (r < 0)
                        goto out;
                if (!jumps_ok && (r = s->k.ensure_jumps(s->k.userdata, s->family)) < 0)
                        goto out;
        }
        rs.changed = full ? NULL : changed;
        /* Whether the kernel holds kproxy's chains: known before the owned
         * list takes in what is about to be written. */
        bool loaded = existing.len > 0 || owned_chains_n_chains(s->owned) > 0;
        if (full && s->part_services > 0 && model_n_services(m) > s->part_services) {
                struct owned_chains *owned = owned_chains_new();
                r = sync_parts(s, m, p, loaded, owned, &decl, st);
                if (r < 0) {
                        owned_chains_free(owned);
                        goto out;
                }
                owned_chains_free(s->owned);
                s->owned = owned;
                /* What is left: the top-level chains, as a render of no
                 * service writes them, and the chains no part wrote. */
                rs.changed = &none;
        }
        rs.existing = &existing;
        rs.owned = s->owned;
        r = render_iptables(m, p, &rs, &out);
        if (r < 0)
                goto out;
        owned_chains_merge(s->owned, TAKE_PTR(rs.fresh), rs.changed);
        r = restore_changes(s, full, rs.changed == &none, loaded, &out, &decl, st);
        if (r < 0)
                goto out;
        st->n_filter_rules = rs.n_filter_rules;
        /* In parts, every nat rule was written. */
        st->n_nat_rules = rs.changed == &none ? rs.n_nat_rules_total : rs.n_nat_rules;
        st->n_nat_rules_total = rs.n_nat_rules_total;
        st->n_no_local_internal = rs.n_no_local_internal;
        st->n_no_local_external = rs.n_no_local_external;
        /* Rendered: the top-level chains whole, and the own chains of the
         * services written (all of them in a full sync); sent: what of it
         * iptables-restore got (0 bytes: nothing changed, no restore). */
        log_v_kv(2, "Reloading service iptables data", KV_STR("ipFamily", s->family == 6 ? "IPv6" : "IPv4"),
                 KV_INT("numServices", model_n_services(m)), KV_INT("numFilterRules", st->n_filter_rules),
                 KV_INT("numNATRules", st->n_nat_rules), KV_INT("numNATRulesTotal", st->n_nat_rules_total),
                 KV_INT("bytesSent", st->bytes_sent), KV_INT("chainsByRule", st->chains_by_rule),
                 KV_INT("chainsLeftOut", st->chains_left_out), KV_SECONDS("restoreElapsed", st->restore_seconds),
                 KV_SECONDS("readElapsed", st->read_seconds),
                 KV_STR("readWith", !full ? "" : s->k.netlink ? "netlink" : "iptables-save"));
out:
        iptables_names_free(&existing, existing_names);
        buf_done(&decl);
        buf_done(&out);
        return r;
}

int iptsync_full(struct iptsync *s, const struct model *m, const struct render_params *p, struct iptsync_stats *ret) {
        return sync_once(s, true, m, p, NULL, ret);
}

int iptsync_partial(struct iptsync *s, const struct model *m, const struct render_params *p,
                    const struct hmap *changed, struct iptsync_stats *ret) {
        int r = sync_once(s, false, m, p, changed, ret);
        if (r != -EAGAIN)
                return r;
        /* The top-level chains are not what was remembered: someone else
         * changed them. Write everything, now. */
        log_warning_kv("Partial sync refused by the kernel, syncing all rules",
                       KV_STR("ipFamily", s->family == 6 ? "IPv6" : "IPv4"));
        return sync_once(s, true, m, p, NULL, ret);
}
