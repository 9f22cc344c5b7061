/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Transactions. Order inside one is what keeps the kernel's reference
 * checks happy (the packet path only ever sees the committed result):
 *
 *   head:    the table, the fixed part's sets
 *   body:    per service: flush its changed and stale chains, delete its
 *            changed and stale affinity sets, add sets, add new chains,
 *            write the rules of new and changed chains
 *   del_el:  delete map elements (every service)
 *   add_el:  add map elements
 *   tail:    delete the stale chains (flushed above, so unreferenced)
 *
 * The family's tables share one batch: a table's sections go into it
 * whole, and it is sent when it holds the size bound's worth.
 */
#include "proxy/nftables/nftsync-txn.h"

#include <stdio.h>
#include <string.h>

#include "apply/nftables.h"
#include "proxy/nftables/nftsync-stats.h"
#include "util/clock.h"
#include "util/log.h"

void nftsync_batch_init(struct nftsync_batch *b, uint8_t family, struct nftables *nl, size_t chunk) {
        *b = (struct nftsync_batch) {.family = family, .nl = nl, .chunk = chunk};
        nftmsg_init(&b->ids, family, 0);
        nftmsg_init(&b->pend, family, 0);
        nftmsg_share_set_ids(&b->pend, &b->ids);
}

void nftsync_batch_done(struct nftsync_batch *b) {
        nftmsg_done(&b->pend);
        nftmsg_done(&b->ids);
}

void nftsync_txn_init(struct nftsync_txn *t, struct nftsync_batch *b, unsigned table) {
        nftmsg_init(&t->head, b->family, 0);
        nftmsg_init(&t->body, b->family, 0);
        nftmsg_init(&t->del_el, b->family, 0);
        nftmsg_init(&t->add_el, b->family, 0);
        nftmsg_init(&t->tail, b->family, 0);
        t->head.table = t->body.table = t->del_el.table = t->add_el.table = t->tail.table = (uint16_t) table;
        nftmsg_share_set_ids(&t->head, &b->ids);
        nftmsg_share_set_ids(&t->body, &t->head);
}

void nftsync_txn_clear(struct nftsync_txn *t) {
        nftmsg_clear(&t->head);
        nftmsg_clear(&t->body);
        nftmsg_clear(&t->del_el);
        nftmsg_clear(&t->add_el);
        nftmsg_clear(&t->tail);
}

void nftsync_txn_done(struct nftsync_txn *t) {
        nftmsg_done(&t->head);
        nftmsg_done(&t->body);
        nftmsg_done(&t->del_el);
        nftmsg_done(&t->add_el);
        nftmsg_done(&t->tail);
}

size_t nftsync_txn_size(const struct nftsync_txn *t) {
        return t->head.n + t->body.n + t->del_el.n + t->add_el.n + t->tail.n;
}

/* Transactions of a full sync or a resync: each is validated against the
 * whole table (the kernel re-walks what the base chains reach), so over an
 * existing table of n chains and sets they are cut into about eight, not
 * into chunk-message pieces (about three messages per chain). */
size_t nftsync_txn_chunk(const struct nftsync_batch *b, size_t n) {
        size_t chunk = b->chunk;
        return chunk && n * 3 / 8 > chunk ? n * 3 / 8 : chunk;
}

void nftsync_txn_reset(struct nftsync_batch *b, bool release) {
        if (release) {
                nftmsg_done(&b->pend);
                nftmsg_init(&b->pend, b->family, b->seq);
                nftmsg_share_set_ids(&b->pend, &b->ids);
        } else {
                nftmsg_clear(&b->pend);
        }
        memset(b->pend_tables, 0, sizeof b->pend_tables);
}

int nftsync_txn_send(struct nftsync_batch *b, struct nftsync_stats *st) {
        char err[1024], names[256] = "", name[NFTIR_TABLE_NAME_MAX];
        int r;

        if (b->pend.n == 0)
                return 0;
        nftmsg_batch_end(&b->pend);
        b->seq = b->pend.seq;
        double t0 = clock_mono_s();
        r = nftables_commit(b->nl, &b->pend, err, sizeof err);
        st->kernel_seconds += clock_mono_s() - t0;
        if (r < 0) {
                size_t len = 0;
                for (unsigned i = 0; i <= NFTIR_TABLES_MAX && len < sizeof names; i++)
                        if (b->pend_tables[i])
                                len += (size_t) snprintf(names + len, sizeof names - len, "%s%s",
                                                         len ? ", " : "", nftir_table_name(i, name));
                log_error("IPv%u nftables %s transaction of %zu messages failed: %s", b->family, names,
                          b->pend.n, err);
        }
        st->transactions++;
        st->messages += b->pend.n;
        nftsync_txn_reset(b, false);
        if (b->after_commit)
                b->after_commit(b->after_commit_ud);
        return r;
}

struct nftmsg *nftsync_txn_pending(struct nftsync_batch *b, unsigned table) {
        if (b->pend.b.len == 0)
                nftmsg_batch_begin(&b->pend);
        b->pend.table = (uint16_t) table;
        b->pend_tables[table] = true;
        return &b->pend;
}

int nftsync_txn_queue(struct nftsync_batch *b, struct nftsync_txn *t, size_t limit, struct nftsync_stats *st) {
        if (nftsync_txn_size(t) == 0)
                return 0;
        nftsync_txn_pending(b, t->head.table);
        nftmsg_append(&b->pend, &t->head);
        nftmsg_append(&b->pend, &t->body);
        nftmsg_append(&b->pend, &t->del_el);
        nftmsg_append(&b->pend, &t->add_el);
        nftmsg_append(&b->pend, &t->tail);
        nftsync_txn_clear(t);
        return limit && b->pend.n >= limit ? nftsync_txn_send(b, st) : 0;
}
