/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/nftables/nftsync-table.h"

#include <stdio.h>
#include <stdlib.h>

#include "proxy/nftables/nftsync-txn.h"
#include "util/alloc.h"

struct nftsync_table *nftsync_table_new(unsigned table, struct nftables *nl, struct nftsync_batch *batch) {
        struct nftsync_table *s = xcalloc(1, sizeof *s);
        char name[NFTIR_TABLE_NAME_MAX];
        s->family = batch->family;
        s->table = (uint16_t) table;
        snprintf(s->tname, sizeof s->tname, "%s", nftir_table_name(table, name));
        s->nl = nl;
        s->batch = batch;
        s->recs = (struct hmap) HMAP_INIT_KEYED(struct nftsync_rec, key);
        nftsync_owners_init(&s->owners);
        return s;
}

void nftsync_table_forget(struct nftsync_table *s) {
        const char *k;
        void *v;
        for (size_t i = 0; hmap_next(&s->recs, &i, &k, &v);)
                nftsync_rec_free(v);
        hmap_done(&s->recs);
        nftsync_owners_forget(&s->owners);
}

struct nftsync_table *nftsync_table_free(struct nftsync_table *s) {
        if (!s)
                return NULL;
        nftsync_table_forget(s);
        free(s);
        return NULL;
}
