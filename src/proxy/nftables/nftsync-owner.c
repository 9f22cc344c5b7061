/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Element ownership. A table's owners map holds the ids that its records
 * hold (an id's record, nftsync_rec_of_id(), is its owner), so a claim is
 * one lookup; its waiting map, the services refused a key, by the key.
 */
#include "proxy/nftables/nftsync-owner.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/nftables/nftsync-elemid.h"
#include "proxy/nftables/nftsync-internal.h"
#include "proxy/nftables/nftsync-txn.h"
#include "proxy/nftables/nftsync-unit.h"
#include "proxy/nftables/nftsync.h"
#include "util/hmap.h"
#include "util/log.h"

struct waiter {
        char *svc;
        char id[];
};

static void wait_for_key(struct nftsync_table *s, const char *id, const char *svc) {
        if (hmap_get(&s->waiting, id))
                return;
        struct waiter *w = malloc(sizeof *w + strlen(id) + 1);
        if (!w)
                abort();
        strcpy(w->id, id);
        w->svc = nftsync_xstrdup(svc);
        hmap_put(&s->waiting, w->id, w);
}

void nftsync_owner_claim(struct nftsync_table *s, struct nftsync_rec *r, char *end, const struct nftsync_unit *u,
                         struct nftsync_txn *t, const struct hmap *old, struct nftsync_stats *st) {
        struct hmap seen = HMAP_INIT;
        for (size_t i = 0; i < u->n_el; i++) {
                const struct nftsync_unit_elem *e = &u->el[i];
                if (hmap_get(&seen, e->id))
                        continue;       /* the same key twice in one service */
                hmap_put(&seen, e->id, (void *) e);
                const char *owned = hmap_get(&s->owners, e->id);
                struct nftsync_rec *owner = owned ? nftsync_rec_of_id(owned) : NULL;
                if (owner && owner != r) {
                        st->conflicts++;
                        char show[NFTSYNC_ELEMID_MAX + 64];
                        log_warning("Service %s wants %s, which service %s already has; ignoring it until %s "
                                    "lets go", r->key, nftsync_elemid_show(e->id, show, sizeof show), owner->key,
                                    owner->key);
                        wait_for_key(s, e->id, r->key);
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
                hmap_put(&s->owners, id, (void *) id);
        }
        hmap_done(&seen);
}

char *nftsync_owner_take_waiter(struct nftsync_table *s, const char *id) {
        struct waiter *w = hmap_remove(&s->waiting, id);
        if (!w)
                return NULL;
        char *svc = w->svc;
        free(w);
        return svc;
}

void nftsync_owner_forget(struct nftsync_table *s) {
        const char *k;
        void *v;
        hmap_done(&s->owners);
        for (size_t i = 0; hmap_next(&s->waiting, &i, &k, &v);) {
                free(((struct waiter *) v)->svc);
                free(v);
        }
        hmap_done(&s->waiting);
}
