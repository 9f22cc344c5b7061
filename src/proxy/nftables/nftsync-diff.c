/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-service diff. A service's chains and sets are compared by name
 * with its record's: a chain whose digest changed is flushed and
 * refilled, a new one created, a stale one flushed and deleted after the
 * elements that point at it; a set added, gone or changed makes every
 * chain of the service rewritten, so none refers to a set about to go.
 * Its elements are let go of and claimed again, so a key it keeps stays
 * its own and a key it drops goes to whoever waited for it.
 */
#include "proxy/nftables/nftsync-diff.h"

#include <stdint.h>
#include <stdlib.h>

#include "model/model.h"
#include "proxy/nftables/nftsync-elemid.h"
#include "proxy/nftables/nftsync-owner.h"
#include "proxy/nftables/nftsync-pass.h"
#include "proxy/nftables/nftsync-rec.h"
#include "proxy/nftables/nftsync-stats.h"
#include "proxy/nftables/nftsync-table.h"
#include "proxy/nftables/nftsync-txn.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "util/log.h"

/* The chains and sets: old's (oc[i] its chains' names, os[i] its sets'),
 * against u's, into t. */
static void diff_objects(const struct nftsync_rec *old, char **oc, char **os, const struct nftsync_unit *u,
                         struct nftsync_txn *t, struct nftsync_stats *st) {
        struct hmap old_chains = HMAP_INIT, old_sets = HMAP_INIT, new_chains = HMAP_INIT, new_sets = HMAP_INIT;
        bool sets_changed = false;

        for (size_t i = 0; old && i < old->n_chains; i++)
                hmap_put(&old_chains, oc[i], &nftsync_rec_hashes(old)[i]);
        for (size_t i = 0; old && i < old->n_sets; i++)
                hmap_put(&old_sets, os[i], &nftsync_rec_timeouts(old)[i]);
        for (size_t i = 0; i < u->n_ch; i++)
                hmap_put(&new_chains, u->ch[i].name, (void *) &u->ch[i]);
        for (size_t i = 0; i < u->n_st; i++)
                hmap_put(&new_sets, u->st[i].name, (void *) &u->st[i]);

        /* A set added, gone or changed: every chain of the service is
         * rewritten, so none refers to a set about to change. */
        for (size_t i = 0; i < u->n_st; i++) {
                const uint32_t *o = hmap_get(&old_sets, u->st[i].name);
                sets_changed |= !o || *o != u->st[i].timeout;
        }
        sets_changed |= old && old->n_sets != u->n_st;

        /* 1. flush changed and stale chains */
        for (size_t i = 0; old && i < old->n_chains; i++) {
                const struct nftsync_unit_chain *n = hmap_get(&new_chains, oc[i]);
                if (!n || n->hash != nftsync_rec_hashes(old)[i] || sets_changed)
                        nftmsg_chain_flush(&t->body, oc[i]);
        }
        /* 2. delete stale and changed sets; 3. add new and changed ones */
        for (size_t i = 0; old && i < old->n_sets; i++) {
                const struct nftsync_unit_set *n = hmap_get(&new_sets, os[i]);
                if (!n || n->timeout != nftsync_rec_timeouts(old)[i])
                        nftmsg_set_del(&t->body, os[i]);
        }
        for (size_t i = 0; i < u->n_st; i++) {
                const uint32_t *o = hmap_get(&old_sets, u->st[i].name);
                if (!o || *o != u->st[i].timeout)
                        nftmsg_append_range(&t->body, &u->sets, u->st[i].off, u->st[i].len);
        }
        /* 4. add new chains; 5. write the rules of new and changed ones */
        for (size_t i = 0; i < u->n_ch; i++)
                if (!hmap_get(&old_chains, u->ch[i].name))
                        nftmsg_append_range(&t->body, &u->chains, u->ch[i].chain_off, u->ch[i].chain_len);
        for (size_t i = 0; i < u->n_ch; i++) {
                const uint64_t *o = hmap_get(&old_chains, u->ch[i].name);
                if (!o || *o != u->ch[i].hash || sets_changed) {
                        nftmsg_append_range(&t->body, &u->rules, u->ch[i].rules_off, u->ch[i].rules_len);
                        st->chains_written++;
                }
        }
        /* Stale chains go after the elements that point at them. */
        for (size_t i = 0; old && i < old->n_chains; i++)
                if (!hmap_get(&new_chains, oc[i])) {
                        nftmsg_chain_del(&t->tail, oc[i]);
                        st->chains_deleted++;
                }

        hmap_done(&old_chains);
        hmap_done(&old_sets);
        hmap_done(&new_chains);
        hmap_done(&new_sets);
}

/* The elements: old's are let go of, u's claimed for r (whose elements go
 * at end; NULL r: none), taking back those kept, then what was not taken
 * back is deleted and listed in released. */
static void diff_elements(struct nftsync_diff *d, const struct nftsync_rec *old, struct nftsync_rec *r, char *end) {
        struct nftsync_owners *o = &d->s->owners;
        struct hmap old_elems = HMAP_INIT;
        const char *id = nftsync_rec_first_id(old);
        for (size_t i = 0; old && i < old->n_elems; i++, id = nftsync_rec_next_id(id)) {
                hmap_put(&old_elems, id, &nftsync_rec_values(old)[i]);
                nftsync_owner_release(o, id);
        }
        if (r)
                nftsync_owner_claim(o, r, end, d->u, d->t, &old_elems, d->st);
        id = nftsync_rec_first_id(old);
        for (size_t i = 0; old && i < old->n_elems; i++, id = nftsync_rec_next_id(id)) {
                if (r && nftsync_owner_of(o, id) == r)
                        continue;       /* kept */
                nftsync_elemid_del(&d->t->del_el, id);
                d->st->elements_deleted++;
                buf_puts(d->released, id);
                buf_putc(d->released, '\n');
        }
        hmap_done(&old_elems);
}

struct nftsync_rec *nftsync_diff_service(struct nftsync_diff *d, const char *key, struct nftsync_rec *old) {
        /* The old record's names, whole: chains, then sets. */
        char **names = old ? nftsync_rec_names(old) : NULL;
        struct nftsync_rec *r = NULL;
        char *end = NULL;

        diff_objects(old, names, names ? names + old->n_chains : NULL, d->u, d->t, d->st);
        if (d->u->n_ch + d->u->n_st + d->u->n_el > 0)
                r = nftsync_unit_record(d->u, key, &end);
        diff_elements(d, old, r, end);
        free(names);
        return r;
}

int nftsync_diff_key(struct nftsync_diff *d, const char *key, const struct svc *known, struct nftsync_side *side,
                     size_t i, size_t *recorded) {
        struct nftsync_table *s = d->s;
        const struct model *m = d->ps->m;
        const struct render_params *p = d->ps->p;
        const struct nftsync_rec *rec = hmap_get(&s->recs, key);
        if (recorded)
                *recorded += rec != NULL;
        const struct nftsync_rec *side_rec = side ? hmap_get(side->recs, key) : NULL;
        int r = nftsync_unit_render(d->u, m, p, key, known, rec, side ? &side->u : NULL, side_rec);
        if (r < 0)
                return r;
        if (side)
                side->same[i] = nftsync_unit_same(&side->u, side_rec);
        if (nftsync_unit_same(d->u, rec))
                return 0;
        /* Changed: the diff may need any chain's bytes. */
        if (d->u->unencoded && (r = nftsync_unit_render(d->u, m, p, key, known, NULL, NULL, NULL)) < 0)
                return r;
        struct nftsync_rec *old = hmap_remove(&s->recs, key);
        nftsync_table_keep(s, nftsync_diff_service(d, key, old));
        nftsync_rec_free(old);
        return 0;
}

int nftsync_diff_released(struct nftsync_diff *d) {
        struct buf *released = d->released;
        int r = 0;
        for (size_t off = 0; r == 0 && off < released->len;) {
                char *id = released->data + off, *nl = strchr(id, '\n');
                *nl = '\0';
                off = (size_t) (nl - released->data) + 1;
                char *svc = nftsync_owner_take_waiter(&d->s->owners, id);
                if (!svc)
                        continue;
                char show[NFTSYNC_ELEMID_MAX + 64];
                log_v(2, "Service %s can now have %s", svc, nftsync_elemid_show(id, show, sizeof show));
                r = nftsync_diff_key(d, svc, NULL, NULL, 0, NULL);
                free(svc);
        }
        return r;
}

int nftsync_diff_partial(struct nftsync_table *s, const struct nftsync_pass *ps, const struct hmap *changed,
                         struct nftsync_stats *st) {
        struct nftsync_txn t;
        struct nftsync_unit u;
        struct buf released = BUF_INIT;
        struct nftsync_diff d = {.s = s, .ps = ps, .u = &u, .t = &t, .released = &released, .st = st};
        const char *key;
        void *v;
        int r = 0;

        memset(st, 0, sizeof *st);
        nftsync_txn_init(&t, s->batch, s->table);
        nftsync_unit_init(&u, s->family, s->table, &t.head);
        for (size_t it = 0; r == 0 && hmap_next(changed, &it, &key, &v);)
                r = nftsync_diff_key(&d, key, NULL, NULL, 0, NULL);
        if (r == 0)
                r = nftsync_diff_released(&d);
        if (r == 0)
                r = nftsync_txn_queue(s->batch, &t, 0, st);
        buf_done(&released);
        nftsync_unit_done(&u);
        nftsync_txn_done(&t);
        return r;
}
