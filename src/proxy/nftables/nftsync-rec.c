/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Records: built once per service and sync from what it rendered, read by
 * every later sync, never changed in place (a changed service gets a new
 * one). Their layout is nftsync-rec.h's.
 */
#include "proxy/nftables/nftsync-rec.h"

#include <stdlib.h>

#include "util/alloc.h"
#include "proxy/nftables/nftsync-name.h"

/* A copy of s at *end, in a record's storage; *end moves past it. */
static char *rec_str(char **end, const char *s) {
        size_t len = strlen(s) + 1;
        char *p = memcpy(*end, s, len);
        *end += len;
        return p;
}

struct nftsync_rec *nftsync_rec_new(const char *key, size_t n_chains, size_t n_sets, const char *coded,
                                    size_t names_len, size_t n_elems, size_t id_bytes, char **ret_end) {
        size_t strings = strlen(key) + 1 + n_elems * sizeof(uint32_t) + id_bytes;
        size_t elems_off = NFTSYNC_ALIGN8(sizeof(struct nftsync_rec) + n_chains * sizeof(uint64_t) +
                                          n_sets * sizeof(uint32_t) + names_len);
        struct nftsync_rec *r = xcalloc(1, elems_off + n_elems * sizeof(uint64_t) + strings);
        r->n_chains = (uint32_t) n_chains;
        r->n_sets = (uint32_t) n_sets;
        r->names_len = (uint32_t) names_len;
        memcpy((char *) nftsync_rec_names_coded(r), coded, names_len);
        /* The values (n_elems counts those added so far), then the key
         * and the ids after room for every value. */
        char *end = (char *) r + elems_off + n_elems * sizeof(uint64_t);
        r->key = rec_str(&end, key);
        *ret_end = end;
        return r;
}

const char *nftsync_rec_add_elem(struct nftsync_rec *r, char **end, const char *id, uint64_t value) {
        nftsync_rec_values(r)[r->n_elems++] = value;
        uint32_t back = (uint32_t) (*end + sizeof back - (char *) r);
        memcpy(*end, &back, sizeof back);
        *end += sizeof back;
        return rec_str(end, id);
}

char **nftsync_rec_names(const struct nftsync_rec *r) {
        size_t n = r->n_chains + r->n_sets, bytes = 0;
        struct nftsync_name_it it;
        nftsync_name_it_init(&it, nftsync_rec_names_coded(r));
        for (size_t i = 0; i < n; i++) {
                nftsync_name_next(&it);
                bytes += nftsync_name_len(&it, r->key) + 1;
        }
        char **v = xcalloc(1, (n + 1) * sizeof *v + bytes);
        char *p = (char *) (v + n + 1), *end = p + bytes;
        nftsync_name_it_init(&it, nftsync_rec_names_coded(r));
        for (size_t i = 0; i < n; i++) {
                nftsync_name_next(&it);
                v[i] = p;
                p += strlen(nftsync_name_unpack(&it, r->key, p, (size_t) (end - p))) + 1;
        }
        return v;
}

struct nftsync_rec *nftsync_rec_free(struct nftsync_rec *r) {
        free(r);
        return NULL;
}
