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
#include "proxy/nftables/nftsync-internal.h"
#include "proxy/nftables/nftsync-owner.h"
#include "proxy/nftables/nftsync-rec.h"
#include "proxy/nftables/nftsync-txn.h"
#include "proxy/nftables/nftsync.h"
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
static void diff_elements(struct nftsync_table *s, const struct nftsync_rec *old, struct nftsync_rec *r, char *end,
                          const struct nftsync_unit *u, struct nftsync_txn *t, struct buf *released,
                          struct nftsync_stats *st) {
        struct hmap old_elems = HMAP_INIT;
        const char *id = nftsync_rec_first_id(old);
        for (size_t i = 0; old && i < old->n_elems; i++, id = nftsync_rec_next_id(id)) {
                hmap_put(&old_elems, id, &nftsync_rec_values(old)[i]);
                hmap_remove(&s->owners, id);
        }
        if (r)
                nftsync_owner_claim(s, r, end, u, t, &old_elems, st);
        id = nftsync_rec_first_id(old);
        for (size_t i = 0; old && i < old->n_elems; i++, id = nftsync_rec_next_id(id)) {
                const char *owned = r ? hmap_get(&s->owners, id) : NULL;
                if (owned && nftsync_rec_of_id(owned) == r)
                        continue;       /* kept */
                nftsync_elemid_del(&t->del_el, id);
                st->elements_deleted++;
                buf_puts(released, id);
                buf_putc(released, '\n');
        }
        hmap_done(&old_elems);
}

struct nftsync_rec *nftsync_diff_service(struct nftsync_table *s, const char *key, struct nftsync_rec *old,
                                         const struct nftsync_unit *u, struct nftsync_txn *t, struct buf *released,
                                         struct nftsync_stats *st) {
        /* The old record's names, whole: chains, then sets. */
        char **names = old ? nftsync_rec_names(old) : NULL;
        struct nftsync_rec *r = NULL;
        char *end = NULL;

        diff_objects(old, names, names ? names + old->n_chains : NULL, u, t, st);
        if (u->n_ch + u->n_st + u->n_el > 0)
                r = nftsync_unit_record(u, key, &end);
        diff_elements(s, old, r, end, u, t, released, st);
        free(names);
        return r;
}

int nftsync_diff_key(struct nftsync_table *s, const struct model *m, const struct render_params *p, const char *key,
                     const struct svc *known, struct nftsync_unit *u, struct nftsync_side *side, size_t i,
                     struct nftsync_txn *t, struct buf *released, struct nftsync_stats *st, size_t *recorded) {
        const struct nftsync_rec *rec = hmap_get(&s->recs, key);
        if (recorded)
                *recorded += rec != NULL;
        const struct nftsync_rec *side_rec = side ? hmap_get(side->recs, key) : NULL;
        int r = nftsync_unit_render(u, m, p, key, known, rec, side ? &side->u : NULL, side_rec);
        if (r < 0)
                return r;
        if (side)
                side->same[i] = nftsync_unit_same(&side->u, side_rec);
        if (nftsync_unit_same(u, rec))
                return 0;
        /* Changed: the diff may need any chain's bytes. */
        if (u->unencoded && (r = nftsync_unit_render(u, m, p, key, known, NULL, NULL, NULL)) < 0)
                return r;
        struct nftsync_rec *old = hmap_remove(&s->recs, key);
        nftsync_table_keep(s, nftsync_diff_service(s, key, old, u, t, released, st));
        nftsync_rec_free(old);
        return 0;
}

int nftsync_diff_released(struct nftsync_table *s, const struct model *m, const struct render_params *p,
                          struct nftsync_unit *u, struct nftsync_txn *t, struct buf *released,
                          struct nftsync_stats *st) {
        int r = 0;
        for (size_t off = 0; r == 0 && off < released->len;) {
                char *id = released->data + off, *nl = strchr(id, '\n');
                *nl = '\0';
                off = (size_t) (nl - released->data) + 1;
                char *svc = nftsync_owner_take_waiter(s, id);
                if (!svc)
                        continue;
                char show[NFTSYNC_ELEMID_MAX + 64];
                log_v(2, "Service %s can now have %s", svc, nftsync_elemid_show(id, show, sizeof show));
                r = nftsync_diff_key(s, m, p, svc, NULL, u, NULL, 0, t, released, st, NULL);
                free(svc);
        }
        return r;
}

int nftsync_diff_partial(struct nftsync_table *s, const struct model *m, const struct render_params *p,
                         const struct hmap *changed, struct nftsync_stats *st) {
        struct nftsync_txn t;
        struct nftsync_unit u;
        struct buf released = BUF_INIT;
        const char *key;
        void *v;
        int r = 0;

        memset(st, 0, sizeof *st);
        nftsync_txn_init(&t, s);
        nftsync_unit_init(&u, s->family, s->table, &t.head);
        for (size_t it = 0; r == 0 && hmap_next(changed, &it, &key, &v);)
                r = nftsync_diff_key(s, m, p, key, NULL, &u, NULL, 0, &t, &released, st, NULL);
        if (r == 0)
                r = nftsync_diff_released(s, m, p, &u, &t, &released, st);
        if (r == 0)
                r = nftsync_txn_queue(s, &t, 0, st);
        buf_done(&released);
        nftsync_unit_done(&u);
        nftsync_txn_done(&t);
        return r;
}
