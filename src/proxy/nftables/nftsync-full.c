/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of a full sync (a restart, or after someone else changed the
 * table): there are no records to go by, so each service's chains are
 * read back from the kernel (apply/nftables-readback.h: digests of their
 * rules in a form the bytes kproxy sends share, and of a base chain's
 * hook) just before the service is written, and those that already hold
 * what it would write are left alone. Nothing in use is deleted: chains
 * are flushed and refilled in place, affinity sets kept when unchanged
 * (clients keep their endpoint), the element containers flushed and
 * refilled in the last transaction, and whatever else the table holds is
 * removed then. A cold start or a rebuild has nothing to read back, and
 * encodes the services straight into the family's batch.
 */
#include "proxy/nftables/nftsync-full.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nf_tables.h>
#include <stdint.h>
#include <string.h>

#include "apply/nftables.h"
#include "model/model.h"
#include "proxy/nftables/nftsync-list.h"
#include "proxy/nftables/nftsync-owner.h"
#include "proxy/nftables/nftsync-pass.h"
#include "proxy/nftables/nftsync-rec.h"
#include "proxy/nftables/nftsync-stats.h"
#include "proxy/nftables/nftsync-table.h"
#include "proxy/nftables/nftsync-txn.h"
#include "proxy/nftables/nftsync-unit.h"
#include "render/render.h"
#include "util/clock.h"
#include "util/hmap.h"
#include "util/log.h"

/* The digest nftables_rule_digests() gives a chain holding the rules in
 * bytes [off, off + len) of m; 0 (no digest) when they include anything
 * but rules (an anonymous set, whose name the kernel chooses). */
static uint64_t rules_digest(const struct nftmsg *m, size_t off, size_t len) {
        uint64_t h = NFTABLES_DIGEST_INIT;
        for (size_t end = off + len; off < end;) {
                const struct nlmsghdr *nlh = (const struct nlmsghdr *) (m->b.data + off);
                if ((nlh->nlmsg_type & 0xff) != NFT_MSG_NEWRULE)
                        return 0;
                h = nftables_rule_msg_digest(h, nlh);
                off += MNL_ALIGN(nlh->nlmsg_len);
        }
        return h;
}

/* u's objects for a table that may hold some of them already (chains: the
 * names of those that exist; sets as nftables_list() gives them; digests
 * of the chains' rules as nftables_rule_digests() gives them, NULL when
 * unknown): a chain that already
 * holds u's rules is left alone, others are created or flushed, then
 * refilled; affinity sets are kept when unchanged (so clients keep their
 * endpoint) and replaced otherwise, and then every chain of u is written
 * (none may refer to a set being replaced). */
static void emit_in_place(const struct nftsync_unit *u, const struct hmap *chains, const struct hmap *sets,
                          const struct hmap *digests, struct nftmsg *body, struct nftsync_stats *st) {
        bool keep[u->n_ch + 1], replace[u->n_st + 1], rehook[u->n_ch + 1];
        bool sets_replaced = false;
        for (size_t i = 0; i < u->n_st; i++) {
                const struct nftables_set *e = hmap_get(sets, u->st[i].name);
                replace[i] = !e || e->timeout_ms != (uint64_t) u->st[i].timeout * 1000;
                sets_replaced |= replace[i];
        }
        for (size_t i = 0; i < u->n_ch; i++) {
                keep[i] = rehook[i] = false;
                if (!digests || !hmap_get(chains, u->ch[i].name))
                        continue;
                /* A chain of ours re-made by someone else with another hook,
                 * priority or policy: the kernel will not change those in
                 * place, so it goes and comes back (base chains are never
                 * jumped to). */
                const struct nftables_chain_digest *d = hmap_get(digests, u->ch[i].name);
                const struct nlmsghdr *ours_chain = (const void *) (u->chains.b.data + u->ch[i].chain_off);
                rehook[i] = d && d->spec != nftables_chain_spec(ours_chain);
                if (sets_replaced || rehook[i])
                        continue;
                uint64_t ours = rules_digest(&u->rules, u->ch[i].rules_off, u->ch[i].rules_len);
                keep[i] = ours != 0 && ours == (d ? d->digest : NFTABLES_DIGEST_INIT);
        }
        for (size_t i = 0; i < u->n_ch; i++) {
                if (!keep[i] && hmap_get(chains, u->ch[i].name))
                        nftmsg_chain_flush(body, u->ch[i].name);
                if (rehook[i]) {
                        log_info("IPv%u nftables chain %s has another hook, priority or policy than kproxy's, "
                                 "making it again", u->chains.family, u->ch[i].name);
                        nftmsg_chain_del(body, u->ch[i].name);
                }
        }
        for (size_t i = 0; i < u->n_st; i++) {
                if (!replace[i])
                        continue;
                if (hmap_get(sets, u->st[i].name))
                        nftmsg_set_del(body, u->st[i].name);
                nftmsg_append_range(body, &u->sets, u->st[i].off, u->st[i].len);
        }
        for (size_t i = 0; i < u->n_ch; i++)
                if (!hmap_get(chains, u->ch[i].name) || rehook[i])
                        nftmsg_append_range(body, &u->chains, u->ch[i].chain_off, u->ch[i].chain_len);
        for (size_t i = 0; i < u->n_ch; i++) {
                if (keep[i]) {
                        st->chains_kept++;
                        continue;
                }
                nftmsg_append_range(body, &u->rules, u->ch[i].rules_off, u->ch[i].rules_len);
                st->chains_written++;
        }
}

/* A full sync over an existing table reads what the chains of each
 * service hold just before writing them. */
struct reading {
        bool on;                /* reading chains one service at a time */
        struct hmap digests;    /* chain -> struct nftables_chain_digest, for the chains that exist */
};

/* Reads what u's chains hold into rd; on an error, lists every chain into
 * chains instead and stops reading (the chains are then all written).
 * Returns 0, or -errno when neither worked: which chains exist is then
 * unknown, and writing rules into an existing one would add to them. */
static int read_chains(struct nftsync_table *s, const struct nftsync_unit *u, struct reading *rd, struct hmap *chains,
                       struct nftsync_stats *st) {
        const char *names[u->n_ch + 1];
        double t0 = clock_mono_s();
        for (size_t i = 0; i < u->n_ch; i++)
                names[i] = u->ch[i].name;
        int r = nftables_rule_digests(s->nl, s->family, s->tname, names, u->n_ch, &rd->digests);
        st->list_seconds += clock_mono_s() - t0;
        if (r == 0)
                return 0;
        log_warning_errno(r, "Failed to read the rules of IPv%u nftables table %s, writing all of them",
                          s->family, s->tname);
        rd->on = false;
        r = nftsync_list_table(s, chains, NULL, st);
        if (r < 0)
                log_error_errno(r, "Failed to list IPv%u nftables table %s", s->family, s->tname);
        return r;
}

/* A full sync of one table, as it goes. */
struct full {
        struct nftsync_table *s;
        const struct nftsync_pass *ps;
        struct nftsync_stats *st;
        struct hmap chains, sets;       /* listed: chain names (when listed), named sets */
        struct reading rd;
        struct nftsync_txn t, fin;      /* the current piece; the last transaction's */
        struct nftsync_unit u;
        uint32_t use;                   /* the kernel's count of the table's chains and named sets */
        size_t chunk;
        bool one;                       /* one transaction */
};

/* An existing table: its named sets now, its chains one service at a
 * time (their names and rules), and all chain names only if the kernel
 * counts more chains and sets than that finds. Returns 0 (also without a
 * table: a cold start) or -errno (logged). */
static int full_read_table(struct full *f) {
        struct nftsync_table *s = f->s;
        double t0 = clock_mono_s();
        int r = nftables_table_use(s->nl, s->family, s->tname, &f->use);
        f->st->list_seconds += clock_mono_s() - t0;
        if (r == 0)
                r = nftsync_list_table(s, NULL, &f->sets, f->st);
        f->rd.on = r == 0;
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                log_error_errno(r, "Failed to list IPv%u nftables table %s", s->family, s->tname);
        return r;
}

/* Writes u (in place over what the table has, or straight into the batch
 * when there is nothing to read back), records it under key and claims
 * its elements (added in the last transaction). Returns 0 or -errno. */
static int full_write_unit(struct full *f, const char *key, struct nftmsg *body) {
        struct nftsync_table *s = f->s;
        int r;
        if (f->rd.on && (r = read_chains(s, &f->u, &f->rd, &f->chains, f->st)) < 0)
                return r;
        if (f->u.direct)
                f->st->chains_written += f->u.n_ch;
        else
                emit_in_place(&f->u, f->rd.on ? &f->rd.digests : &f->chains, &f->sets,
                              f->rd.on ? &f->rd.digests : NULL, body, f->st);
        char *end;
        struct nftsync_rec *rec = nftsync_unit_record(&f->u, key, &end);
        nftsync_owner_claim(&s->owners, rec, end, &f->u, &f->fin, NULL, f->st);
        nftsync_table_keep(s, rec);
        return 0;
}

/* The table and the fixed part, queued as the first piece. */
static int full_fixed(struct full *f, bool rebuild) {
        /* "add" first, so that "delete" never fails on a missing table. */
        nftmsg_table(&f->t.head);
        if (rebuild) {
                nftmsg_table_del(&f->t.head);
                nftmsg_table(&f->t.head);
        }
        struct nftir_sink sink = nftsync_unit_sink(&f->u);
        int r = render_nft_fixed(f->ps->p, f->ps->service_cidrs, f->ps->n_service_cidrs, &sink);
        if (r == 0)
                r = full_write_unit(f, NFTSYNC_FIXED_KEY, &f->t.body);
        if (r < 0)
                return r;
        for (size_t i = 0; i < f->u.n_st; i++)
                nftmsg_set_flush(&f->fin.del_el, f->u.st[i].name);     /* every element is added again */
        return nftsync_txn_queue(f->s->batch, &f->t, f->one ? 0 : f->chunk, f->st);
}

/* The services' chains, written straight into the family's batch (their
 * elements and the stale objects go in the last transaction): 100 MB at
 * 10k services, copied once instead of twice, and with nothing to read
 * back, encoded there. */
static int full_services(struct full *f) {
        struct nftsync_table *s = f->s;
        struct nftsync_batch *b = s->batch;
        const struct nftsync_pass *ps = f->ps;
        /* As when this table's pieces were queued whole: a piece of chunk
         * messages goes out with whatever the batch held before it. */
        size_t piece = b->pend.n;
        int r;

        for (size_t i = 0; i < ps->n_svcs; i++) {
                if (!nftsync_pass_holds(ps, s->table, i))
                        continue;
                f->u.direct = f->rd.on ? NULL : nftsync_txn_pending(b, s->table);
                r = nftsync_unit_render(&f->u, ps->m, ps->p, ps->svcs[i]->key, ps->svcs[i], NULL, NULL, NULL);
                if (r < 0)
                        return r;
                if (f->u.n_ch + f->u.n_st + f->u.n_el == 0)
                        continue;
                r = full_write_unit(f, ps->svcs[i]->key, f->u.direct ? NULL : nftsync_txn_pending(b, s->table));
                if (r < 0)
                        return r;
                if (!f->one && b->pend.n - piece >= f->chunk) {
                        r = nftsync_txn_send(b, f->st);
                        if (r < 0)
                                return r;
                        piece = 0;
                }
        }
        return 0;
}

/* What no service has goes, and the last transaction: elements, stale
 * objects (with the chunk's remains, or everything when it must be one
 * transaction). */
static int full_finish(struct full *f) {
        struct nftsync_table *s = f->s;
        /* Chains no service has: only when the kernel counts more chains
         * and named sets than the services' chains found and the sets. */
        if (f->rd.on && f->rd.digests.len + f->sets.len != f->use) {
                log_v(2, "IPv%u nftables table %s holds %u chains and sets, %zu are kproxy's: listing it",
                      s->family, s->tname, f->use, f->rd.digests.len + f->sets.len);
                int r = nftsync_list_table(s, &f->chains, NULL, f->st);
                if (r < 0)
                        return log_error_errno(r, "Failed to list IPv%u nftables table %s", s->family, s->tname);
        }
        nftsync_list_remove_unwanted(s, &f->chains, &f->sets, &f->fin, f->st);

        nftmsg_append(&f->t.body, &f->fin.body);
        nftmsg_append(&f->t.del_el, &f->fin.del_el);
        nftmsg_append_elems_merged(&f->t.add_el, &f->fin.add_el);
        nftmsg_append(&f->t.tail, &f->fin.tail);
        return nftsync_txn_queue(s->batch, &f->t, f->chunk, f->st);
}

int nftsync_full_table(struct nftsync_table *s, const struct nftsync_pass *ps, bool rebuild,
                       struct nftsync_stats *st) {
        struct full f = {.s = s, .ps = ps, .st = st, .chains = HMAP_INIT, .sets = HMAP_INIT, .rd = {false, HMAP_INIT},
                         .one = rebuild || s->batch->chunk == 0};
        int r = 0;

        memset(st, 0, sizeof *st);
        if (!rebuild && (r = full_read_table(&f)) < 0)
                goto out_lists;
        /* A cold load reaches nothing before its last transaction and
         * keeps the small bound (use is 0). */
        f.chunk = nftsync_txn_chunk(s->batch, f.use);
        nftsync_table_forget(s);
        nftsync_txn_init(&f.t, s->batch, s->table);
        nftsync_txn_init(&f.fin, s->batch, s->table);
        nftsync_unit_init(&f.u, s->family, s->table, &f.t.head);

        r = full_fixed(&f, rebuild);
        if (r == 0)
                r = full_services(&f);
        if (r == 0)
                r = full_finish(&f);

        nftsync_unit_done(&f.u);
        nftsync_txn_done(&f.t);
        nftsync_txn_done(&f.fin);
out_lists:
        nftables_names_done(&f.chains);
        nftables_names_done(&f.sets);
        nftables_names_done(&f.rd.digests);
        return r;
}
