/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The unit, the renderer's collecting sink: each object of the unit's
 * table is named, digested and encoded into the unit's scratch messages,
 * unless it is the same as its record's in the same place (a resync then
 * needs no bytes for it) or goes straight into the family's batch (a full
 * sync with nothing to read back).
 */
#include "proxy/nftables/nftsync-unit.h"

#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "util/alloc.h"
#include "proxy/nftables/nftsync-rec.h"
#include "render/render.h"
#include "util/cleanup.h"

struct nftsync_unit_names {
        struct nftsync_unit_names *next;
        size_t used;
        char b[16384 - 2 * sizeof(size_t)];
};

void nftsync_unit_init(struct nftsync_unit *u, uint8_t family, unsigned table, struct nftmsg *ids) {
        memset(u, 0, sizeof *u);
        u->table = (uint16_t) table;
        nftmsg_init(&u->sets, family, 0);
        nftmsg_init(&u->chains, family, 0);
        nftmsg_init(&u->rules, family, 0);
        nftmsg_init(&u->elems, family, 0);
        /* Set ids are numbered in the transaction's count. */
        nftmsg_share_set_ids(&u->sets, ids);
        nftmsg_share_set_ids(&u->rules, ids);
}

/* A copy of name in u's chunks (a chain or set name: under 256 bytes). */
static char *unit_name(struct nftsync_unit *u, const struct nftir_name *n) {
        struct nftsync_unit_names *c = u->names;
        if (!c || c->used + NFTSYNC_NAME_MAX > sizeof c->b) {
                c = xcalloc(1, sizeof *c);
                c->next = u->names;
                u->names = c;
        }
        char *p = c->b + c->used;
        c->used += strlen(nftir_name_join(n, p, NFTSYNC_NAME_MAX)) + 1;
        return p;
}

void nftsync_unit_reset(struct nftsync_unit *u) {
        /* Keep the newest chunk, empty: a service's names fit in one. */
        struct nftsync_unit_names *c = u->names ? u->names->next : NULL;
        while (c) {
                struct nftsync_unit_names *next = c->next;
                free(c);
                c = next;
        }
        if (u->names) {
                u->names->next = NULL;
                u->names->used = 0;
        }
        u->n_ch = u->n_st = u->n_el = 0;
        u->unhashed = false;
        nftmsg_clear(&u->sets);
        nftmsg_clear(&u->chains);
        nftmsg_clear(&u->rules);
        nftmsg_clear(&u->elems);
}

void nftsync_unit_done(struct nftsync_unit *u) {
        nftsync_unit_reset(u);
        free(u->names);
        free(u->ch);
        free(u->st);
        free(u->el);
        nftmsg_done(&u->sets);
        nftmsg_done(&u->chains);
        nftmsg_done(&u->rules);
        nftmsg_done(&u->elems);
}

static void u_table(void *ud, unsigned idx) {
        (void) ud;      /* the transaction adds the table itself */
        (void) idx;
}

static void u_set(void *ud, const struct nftir_set *set) {
        struct nftsync_unit *u = ud;
        if (set->table != u->table)
                return;
        xgrow((void **) &u->st, &u->cap_st, u->n_st, sizeof *u->st);
        struct nftsync_unit_set *x = &u->st[u->n_st++];
        x->name = unit_name(u, &set->name);
        x->timeout = set->timeout;
        if (u->direct) {
                nftmsg_set(u->direct, set);
                x->off = x->len = 0;
                return;
        }
        if (u->unhashed) {
                x->off = x->len = 0;
                u->unencoded = true;
                return;
        }
        x->off = u->sets.b.len;
        nftmsg_set(&u->sets, set);
        x->len = u->sets.b.len - x->off;
}

static void u_chain(void *ud, const struct nftir_chain *c) {
        struct nftsync_unit *u = ud;
        if (c->table != u->table)
                return;
        xgrow((void **) &u->ch, &u->cap_ch, u->n_ch, sizeof *u->ch);
        struct nftsync_unit_chain *x = &u->ch[u->n_ch++];
        x->name = unit_name(u, &c->name);
        x->hash = nftir_chain_hash(c);
        const struct nftsync_rec *o = u->like;
        size_t i = u->n_ch - 1;
        if (o && i < o->n_chains)
                nftsync_name_next(&u->like_names);
        if (o && i < o->n_chains && nftsync_rec_hashes(o)[i] == x->hash &&
            nftsync_name_equal(&u->like_names, o->key, x->name)) {
                x->chain_off = x->chain_len = x->rules_off = x->rules_len = 0;
                u->unencoded = true;
                return;
        }
        if (u->unhashed) {
                x->chain_off = x->chain_len = x->rules_off = x->rules_len = 0;
                u->unencoded = true;
                return;
        }
        if (u->direct) {
                nftmsg_chain(u->direct, c);
                nftmsg_rules(u->direct, c);
                x->chain_off = x->chain_len = x->rules_off = x->rules_len = 0;
                return;
        }
        x->chain_off = u->chains.b.len;
        nftmsg_chain(&u->chains, c);
        x->chain_len = u->chains.b.len - x->chain_off;
        x->rules_off = u->rules.b.len;
        nftmsg_rules(&u->rules, c);
        x->rules_len = u->rules.b.len - x->rules_off;
}

static void u_elem(void *ud, const struct nftir_elem *e) {
        struct nftsync_unit *u = ud;
        uint8_t key[NFTMSG_KEY_MAX];
        if (e->table != u->table)
                return;
        size_t n = nftmsg_elem_key(u->elems.family, e, key);
        xgrow((void **) &u->el, &u->cap_el, u->n_el, sizeof *u->el);
        struct nftsync_unit_elem *x = &u->el[u->n_el++];
        nftsync_elemid(e->set, key, n, x->id);
        x->value = nftir_elem_value_hash(e);
        /* As chains: the same element in the same place is not encoded. */
        const char *o = u->like_id;
        if (o) {
                size_t i = u->n_el - 1;
                u->like_id = i + 1 < u->like->n_elems ? nftsync_rec_next_id(o) : NULL;
                if (nftsync_rec_values(u->like)[i] == x->value && strcmp(o, x->id) == 0) {
                        x->off = x->len = 0;
                        u->unencoded = true;
                        return;
                }
        }
        if (u->unhashed) {
                x->off = x->len = 0;
                u->unencoded = true;
                return;
        }
        x->off = u->elems.b.len;
        nftmsg_elem(&u->elems, e);
        x->len = u->elems.b.len - x->off;
}

static const struct nftir_sink unit_sink_ops = {u_table, u_set, u_chain, u_elem, NULL};

struct nftir_sink nftsync_unit_sink(struct nftsync_unit *u) {
        struct nftir_sink k = unit_sink_ops;
        k.ud = u;
        return k;
}

void nftsync_unit_begin(struct nftsync_unit *u, const struct nftsync_rec *like, bool unhashed) {
        nftsync_unit_reset(u);
        u->unhashed = unhashed;
        u->like = like;
        if (like)
                nftsync_name_it_init(&u->like_names, nftsync_rec_names_coded(like));
        u->like_id = nftsync_rec_first_id(like);
        u->unencoded = false;
}

/* Two units fed by one render: each keeps its own table's objects. */
static void tee_set(void *ud, const struct nftir_set *x) {
        struct nftsync_unit **u = ud;
        u_set(u[0], x);
        u_set(u[1], x);
}

static void tee_chain(void *ud, const struct nftir_chain *x) {
        struct nftsync_unit **u = ud;
        u_chain(u[0], x);
        u_chain(u[1], x);
}

static void tee_elem(void *ud, const struct nftir_elem *x) {
        struct nftsync_unit **u = ud;
        u_elem(u[0], x);
        u_elem(u[1], x);
}

int nftsync_unit_render(struct nftsync_unit *u, const struct model *m, const struct render_params *p, const char *key,
                        const struct svc *known, const struct nftsync_rec *like, struct nftsync_unit *side,
                        const struct nftsync_rec *side_like) {
        const struct svc *svc = known;
        /* The main table has every service's filter side, a shard only
         * its own services' nat side (a service's shard does not change
         * while running). */
        if (!svc && (svc = model_service_get(m, key)) && u->table != 0 &&
            render_nft_shard(key, p->nft_shards) != u->table)
                svc = NULL;
        struct nftsync_unit *both[2] = {u, side};
        struct nftir_sink sink = nftsync_unit_sink(u);
        if (side)
                sink = (struct nftir_sink) {u_table, tee_set, tee_chain, tee_elem, both};
        /* Without a record the service is written: its names must be whole. */
        sink.unhashed = u->unhashed_ok && like;
        nftsync_unit_begin(u, like, sink.unhashed);
        if (side)
                nftsync_unit_begin(side, side_like, sink.unhashed);
        if (!svc)
                return 0;
        return render_nft_service_table(m, svc, p, &sink, u->table);
}

/* Whether u is exactly what the record says is in the kernel, in the
 * same order (rendering is deterministic): the common case of a resync,
 * which then needs no diff and keeps the record. */
bool nftsync_unit_same(const struct nftsync_unit *u, const struct nftsync_rec *old) {
        if (!old || old->n_chains != u->n_ch || old->n_sets != u->n_st || old->n_elems != u->n_el)
                return false;
        struct nftsync_name_it it;
        nftsync_name_it_init(&it, nftsync_rec_names_coded(old));
        for (size_t i = 0; i < u->n_ch; i++) {
                nftsync_name_next(&it);
                if (nftsync_rec_hashes(old)[i] != u->ch[i].hash || !nftsync_name_equal(&it, old->key, u->ch[i].name))
                        return false;
        }
        for (size_t i = 0; i < u->n_st; i++) {
                nftsync_name_next(&it);
                if (nftsync_rec_timeouts(old)[i] != u->st[i].timeout ||
                    !nftsync_name_equal(&it, old->key, u->st[i].name))
                        return false;
        }
        /* Every element of the unit claimed (none refused or twice). */
        const char *id = nftsync_rec_first_id(old);
        for (size_t i = 0; i < u->n_el; i++, id = nftsync_rec_next_id(id))
                if (nftsync_rec_values(old)[i] != u->el[i].value || strcmp(id, u->el[i].id) != 0)
                        return false;
        return true;
}

struct nftsync_rec *nftsync_unit_record(const struct nftsync_unit *u, const char *key, char **ret_end) {
        size_t n = u->n_ch + u->n_st, names_len = 0, id_bytes = 0, bound = 0;
        const char *prev = "";
        /* The names are coded once, here, and copied into the record. */
        for (size_t i = 0; i < n; i++)
                bound += strlen(i < u->n_ch ? u->ch[i].name : u->st[i - u->n_ch].name) + NFTSYNC_NAME_CODED_EXTRA;
        char small[8192];
        _cleanup_free_ char *big = bound > sizeof small ? xcalloc(1, bound) : NULL;
        char *coded = big ? big : small;
        for (size_t i = 0; i < n; i++)
                names_len += nftsync_name_pack(key, i < u->n_ch ? u->ch[i].name : u->st[i - u->n_ch].name, prev,
                                               coded + names_len, &prev);
        for (size_t i = 0; i < u->n_el; i++)
                id_bytes += strlen(u->el[i].id) + 1;    /* nftsync_owner_claim() copies those it keeps */
        struct nftsync_rec *r = nftsync_rec_new(key, u->n_ch, u->n_st, coded, names_len, u->n_el, id_bytes, ret_end);
        for (size_t i = 0; i < u->n_ch; i++)
                nftsync_rec_hashes(r)[i] = u->ch[i].hash;
        for (size_t i = 0; i < u->n_st; i++)
                nftsync_rec_timeouts(r)[i] = u->st[i].timeout;
        return r;
}
