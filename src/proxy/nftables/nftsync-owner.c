/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Element ownership. The ids map holds the ids that the table's records
 * hold (an id's record, nftsync_rec_of_id(), is its owner), so a claim is
 * one lookup; the waiting map, the services refused a key, by the key.
 */
#include "proxy/nftables/nftsync-owner.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/nftables/nftsync-elemid.h"
#include "proxy/nftables/nftsync-rec.h"
#include "proxy/nftables/nftsync-stats.h"
#include "proxy/nftables/nftsync-txn.h"
#include "proxy/nftables/nftsync-unit.h"
#include "util/alloc.h"
#include "util/hmap.h"
#include "util/log.h"

struct waiter {
        char *svc;
        char id[];
};

void nftsync_owners_init(struct nftsync_owners *o) {
        o->ids = (struct hmap) HMAP_INIT_STRINGS;
        o->waiting = (struct hmap) HMAP_INIT;
}

static void wait_for_key(struct nftsync_owners *o, const char *id, const char *svc) {
        if (hmap_get(&o->waiting, id))
                return;
        struct waiter *w = xmalloc(sizeof *w + strlen(id) + 1);
        strcpy(w->id, id);
        w->svc = xstrdup(svc);
        hmap_put(&o->waiting, w->id, w);
}

struct nftsync_rec *nftsync_owner_of(const struct nftsync_owners *o, const char *id) {
        const char *owned = hmap_get(&o->ids, id);
        return owned ? nftsync_rec_of_id(owned) : NULL;
}

void nftsync_owner_release(struct nftsync_owners *o, const char *id) {
        hmap_remove(&o->ids, id);
}

void nftsync_owner_claim(struct nftsync_owners *o, struct nftsync_rec *r, char *end, const struct nftsync_unit *u,
                         struct nftsync_txn *t, const struct hmap *old, struct nftsync_stats *st) {
        struct hmap seen = HMAP_INIT;
        for (size_t i = 0; i < u->n_el; i++) {
                const struct nftsync_unit_elem *e = &u->el[i];
                if (hmap_get(&seen, e->id))
                        continue;       /* the same key twice in one service */
                hmap_put(&seen, e->id, (void *) e);
                struct nftsync_rec *owner = nftsync_owner_of(o, e->id);
                if (owner && owner != r) {
                        st->conflicts++;
                        char show[NFTSYNC_ELEMID_MAX + 64];
                        log_warning("Service %s wants %s, which service %s already has; ignoring it until %s "
                                    "lets go", r->key, nftsync_elemid_show(e->id, show, sizeof show), owner->key,
                                    owner->key);
                        wait_for_key(o, e->id, r->key);
                        continue;
                }
                const uint64_t *prev = old ? hmap_get(old, e->id) : NULL;
                if (!prev || *prev != e->value) {
                        if (prev)
                                nftsync_elemid_del(&t->del_el, e->id);
                        nftmsg_append_range(&t->add_el, &u->elems, e->off, e->len);
                        st->elements_added++;
                }
                const char *id = nftsync_rec_add_elem(r, &end, e->id, e->value);
                hmap_put(&o->ids, id, (void *) id);
        }
        hmap_done(&seen);
}

char *nftsync_owner_take_waiter(struct nftsync_owners *o, const char *id) {
        struct waiter *w = hmap_remove(&o->waiting, id);
        if (!w)
                return NULL;
        char *svc = w->svc;
        free(w);
        return svc;
}

void nftsync_owners_forget(struct nftsync_owners *o) {
        const char *k;
        void *v;
        hmap_done(&o->ids);
        for (size_t i = 0; hmap_next(&o->waiting, &i, &k, &v);) {
                free(((struct waiter *) v)->svc);
                free(v);
        }
        hmap_done(&o->waiting);
}
