/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Anonymous interval sets, for a rule's list of addresses and ranges
 * (NFTIR_ADDR_LIST), laid out as nft 1.0.6 lays them out so that the
 * kernel holds the same set whichever way the table was loaded.
 */
#include <netinet/in.h>

#include "render/nftmsg-interval.h"

#include <stdbool.h>
#include <stdlib.h>

#include "render/nftmsg-put.h"
#include "util/cleanup.h"
#include "util/alloc.h"

struct range {
        uint8_t lo[16], hi[16];         /* inclusive */
};

static int range_cmp(const void *a, const void *b) {
        return memcmp(((const struct range *) a)->lo, ((const struct range *) b)->lo, 16);
}

/* hi + 1 into out; false when hi is the last address. */
static bool next_addr(const uint8_t *hi, unsigned len, uint8_t *out) {
        memcpy(out, hi, len);
        for (int i = (int) len - 1; i >= 0; i--)
                if (++out[i] != 0)
                        return true;
        return false;
}

static void put_interval_elem(struct nlmsghdr *nlh, const uint8_t *key, unsigned len, bool end) {
        struct nlattr *el = nftmsg_nest_start(nlh, NFTA_LIST_ELEM);
        if (end)
                nftmsg_attr_u32(nlh, NFTA_SET_ELEM_FLAGS, htonl(NFT_SET_ELEM_INTERVAL_END));
        nftmsg_put_data(nlh, NFTA_SET_ELEM_KEY, key, len);
        nftmsg_nest_end(nlh, el);
}

/* The set's elements as nft 1.0.6 lays out an interval set: ranges sorted
 * and merged, each as its start and (flagged) its end + 1, and the space
 * below the first range closed by an end element at 0. Returns the set's
 * id (its name is the kernel's choice). */
uint32_t nftmsg_interval_set(struct nftmsg *m, uint16_t table, const struct nftir_stmt *s) {
        unsigned alen = nftmsg_addr_len(m);
        size_t n = s->n_cidrs + s->n_addrs, k = 0;
        _cleanup_free_ struct range *r = xcalloc(n ? n : 1, sizeof *r);
        for (size_t i = 0; i < n; i++) {
                struct inet_cidr c = i < s->n_cidrs ? s->cidrs[i]
                                                    : (struct inet_cidr) {s->addrs[i - s->n_cidrs], (uint8_t) (alen * 8)};
                uint8_t mask[16];
                nftmsg_prefix_mask(mask, alen, c.prefix);
                for (unsigned j = 0; j < alen; j++) {
                        r[i].lo[j] = c.addr.bytes[j] & mask[j];
                        r[i].hi[j] = (uint8_t) (c.addr.bytes[j] | ~mask[j]);
                }
        }
        qsort(r, n, sizeof *r, range_cmp);
        for (size_t i = 0; i < n; i++) {
                uint8_t after[16];
                /* Overlapping or adjacent to the previous range: merge. */
                if (k > 0 && (!next_addr(r[k - 1].hi, alen, after) || memcmp(r[i].lo, after, alen) <= 0)) {
                        if (memcmp(r[i].hi, r[k - 1].hi, alen) > 0)
                                memcpy(r[k - 1].hi, r[i].hi, alen);
                        continue;
                }
                r[k++] = r[i];
        }

        uint8_t zero[16] = {0};
        bool lead = memcmp(r[0].lo, zero, alen) != 0;
        size_t n_elems = lead;
        for (size_t i = 0; i < k; i++) {
                uint8_t after[16];
                n_elems += 1 + next_addr(r[i].hi, alen, after);
        }

        uint32_t id = ++*m->set_id;
        struct nftmsg_udata u = {0};
        struct nlmsghdr *nlh = nftmsg_open(m, NFT_MSG_NEWSET, NLM_F_CREATE, 0);
        nftmsg_put_table(nlh, NFTA_SET_TABLE, table);
        nftmsg_attr_strz(nlh, NFTA_SET_NAME, "__set%d");
        nftmsg_attr_u32(nlh, NFTA_SET_FLAGS, htonl(NFT_SET_ANONYMOUS | NFT_SET_CONSTANT | NFT_SET_INTERVAL));
        nftmsg_attr_u32(nlh, NFTA_SET_KEY_TYPE, htonl(m->family == 6 ? NFTMSG_TYPE_IP6ADDR : NFTMSG_TYPE_IPADDR));
        nftmsg_attr_u32(nlh, NFTA_SET_KEY_LEN, htonl(alen));
        nftmsg_attr_u32(nlh, NFTA_SET_ID, htonl(id));
        struct nlattr *desc = nftmsg_nest_start(nlh, NFTA_SET_DESC);
        nftmsg_attr_u32(nlh, NFTA_SET_DESC_SIZE, htonl((uint32_t) n_elems));
        nftmsg_nest_end(nlh, desc);
        nftmsg_ud_u32(&u, NFTMSG_UDATA_SET_KEYBYTEORDER, NFTMSG_BYTEORDER_BIG_ENDIAN);
        nftmsg_ud_u32(&u, NFTMSG_UDATA_SET_MERGE_ELEMENTS, 1);
        nftmsg_attr(nlh, NFTA_SET_USERDATA, u.len, u.b);
        nftmsg_close(m, nlh);

        nlh = nftmsg_open(m, NFT_MSG_NEWSETELEM, NLM_F_CREATE, n_elems * 48);
        nftmsg_put_table(nlh, NFTA_SET_ELEM_LIST_TABLE, table);
        nftmsg_attr_strz(nlh, NFTA_SET_ELEM_LIST_SET, "__set%d");
        nftmsg_attr_u32(nlh, NFTA_SET_ELEM_LIST_SET_ID, htonl(id));
        struct nlattr *list = nftmsg_nest_start(nlh, NFTA_SET_ELEM_LIST_ELEMENTS);
        if (lead)
                put_interval_elem(nlh, zero, alen, true);
        for (size_t i = 0; i < k; i++) {
                uint8_t after[16];
                put_interval_elem(nlh, r[i].lo, alen, false);
                if (next_addr(r[i].hi, alen, after))
                        put_interval_elem(nlh, after, alen, true);
        }
        nftmsg_nest_end(nlh, list);
        nftmsg_close(m, nlh);
        return id;
}
