/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nftables mode's whole table for an empty kernel, as `kproxy render` and
 * the fuzzer print it: the fixed part and every service (render/nft.c),
 * one owner per map key, written by one of two sinks: the nft script, or
 * the same as netlink messages. Objects come before their users.
 */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "render/nftir.h"
#include "render/nftmsg.h"
#include "render/render.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "util/strb.h"
#include "util/alloc.h"

/* --- one owner per map key --- */

/* Two services may claim one key (an external IP and port both list):
 * the kernel takes one value per key, and a transaction adding two fails.
 * The first service in key order keeps it, as the daemon's full sync
 * decides (proxy/nftables/nftsync.c). This wraps a sink and drops later claims. */
struct dedupe {
        const struct nftir_sink *inner;
        uint8_t family;
        struct hmap seen;
};

static void dd_table(void *ud, unsigned idx) {
        struct dedupe *d = ud;
        d->inner->table(d->inner->ud, idx);
}

static void dd_set(void *ud, const struct nftir_set *s) {
        struct dedupe *d = ud;
        d->inner->set(d->inner->ud, s);
}

static void dd_chain(void *ud, const struct nftir_chain *c) {
        struct dedupe *d = ud;
        d->inner->chain(d->inner->ud, c);
}

static void dd_elem(void *ud, const struct nftir_elem *e) {
        struct dedupe *d = ud;
        uint8_t key[NFTMSG_KEY_MAX];
        size_t n = nftmsg_elem_key(d->family, e, key);
        char id[64 + 2 * NFTMSG_KEY_MAX];
        /* Per table, as the daemon's syncs of the tables decide. */
        struct strb b = strb_init(id, sizeof id);
        strb_putu(&b, e->table);
        strb_putn(&b, "/", 1);
        strb_puts(&b, e->set);
        strb_putn(&b, "/", 1);
        strb_puthex(&b, key, n);
        if (hmap_get(&d->seen, id))
                return;
        char *k = xstrdup(id);
        hmap_put(&d->seen, k, k);
        d->inner->elem(d->inner->ud, e);
}

/* The fixed part and every service, in key order, through sink. */
static int render_all(const struct model *m, const struct render_params *p, const struct inet_cidr *service_cidrs,
                      size_t n_service_cidrs, const struct nftir_sink *sink) {
        struct dedupe d = {.inner = sink, .family = p->family};
        struct nftir_sink outer = {dd_table, dd_set, dd_chain, dd_elem, &d};
        size_t n_svcs;
        const struct svc **svcs = model_services_sorted(m, &n_svcs);
        int r = render_nft_fixed(p, service_cidrs, n_service_cidrs, &outer);
        for (size_t i = 0; i < n_svcs && r == 0; i++)
                r = render_nft_service(m, svcs[i], p, &outer);
        free(svcs);
        const char *k;
        void *v;
        for (size_t i = 0; hmap_next(&d.seen, &i, &k, &v);)
                free(v);
        hmap_done(&d.seen);
        return r;
}

/* --- the text sink: a first full sync's script, objects before their users --- */

struct text_sink {
        uint8_t family;
        struct buf objs, chains, rules, elems;
};

static void text_table(void *ud, unsigned idx) {
        struct text_sink *x = ud;
        nftir_format_table(x->family, idx, &x->objs);
}

static void text_set(void *ud, const struct nftir_set *s) {
        struct text_sink *x = ud;
        nftir_format_set(x->family, s, &x->objs);
}

static void text_chain(void *ud, const struct nftir_chain *c) {
        struct text_sink *x = ud;
        nftir_format_chain(x->family, c, &x->chains);
        for (size_t i = 0; i < c->n_rules; i++)
                nftir_format_rule(x->family, c, &c->rules[i], &x->rules);
}

static void text_elem(void *ud, const struct nftir_elem *e) {
        struct text_sink *x = ud;
        nftir_format_elem(x->family, e, &x->elems);
}

int render_nftables(const struct model *m, const struct render_params *p, const struct inet_cidr *service_cidrs,
                    size_t n_service_cidrs, struct buf *out) {
        struct text_sink x = {.family = p->family};
        struct nftir_sink sink = {text_table, text_set, text_chain, text_elem, &x};
        int r = render_all(m, p, service_cidrs, n_service_cidrs, &sink);

        if (r == 0) {
                buf_put(out, x.objs.data, x.objs.len);
                buf_put(out, x.chains.data, x.chains.len);
                buf_put(out, x.rules.data, x.rules.len);
                buf_put(out, x.elems.data, x.elems.len);
        }
        buf_done(&x.objs);
        buf_done(&x.chains);
        buf_done(&x.rules);
        buf_done(&x.elems);
        return r;
}

/* --- the netlink sink: the same as messages for an empty kernel --- */

struct msg_sink {
        struct nftmsg objs, chains, rules, elems;
};

static void msg_table(void *ud, unsigned idx) {
        struct msg_sink *x = ud;
        x->objs.table = (uint16_t) idx;
        nftmsg_table(&x->objs);
}

static void msg_set(void *ud, const struct nftir_set *s) {
        nftmsg_set(&((struct msg_sink *) ud)->objs, s);
}

static void msg_chain(void *ud, const struct nftir_chain *c) {
        struct msg_sink *x = ud;
        nftmsg_chain(&x->chains, c);
        nftmsg_rules(&x->rules, c);
}

static void msg_elem(void *ud, const struct nftir_elem *e) {
        nftmsg_elem(&((struct msg_sink *) ud)->elems, e);
}

int render_nftables_netlink(const struct model *m, const struct render_params *p,
                            const struct inet_cidr *service_cidrs, size_t n_service_cidrs, struct nftmsg *out) {
        struct msg_sink x;
        struct nftir_sink sink = {msg_table, msg_set, msg_chain, msg_elem, &x};
        int r;

        nftmsg_init(&x.objs, p->family, 0);
        nftmsg_init(&x.chains, p->family, 0);
        nftmsg_init(&x.rules, p->family, 0);
        nftmsg_init(&x.elems, p->family, 0);
        nftmsg_share_set_ids(&x.rules, &x.objs);
        r = render_all(m, p, service_cidrs, n_service_cidrs, &sink);
        if (r == 0) {
                nftmsg_append(out, &x.objs);
                nftmsg_append(out, &x.chains);
                nftmsg_append(out, &x.rules);
                nftmsg_append(out, &x.elems);
        }
        nftmsg_done(&x.objs);
        nftmsg_done(&x.chains);
        nftmsg_done(&x.rules);
        nftmsg_done(&x.elems);
        return r;
}
