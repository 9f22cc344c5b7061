/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Map and set elements as nf_tables messages: one element a message as
 * the renderer gives them, merged into one message per set (up to about
 * 32 kB) where many go together.
 */
#include <netinet/in.h>

#include "render/nftmsg-elem.h"

#include <errno.h>

#include "render/nftmsg-put.h"
#include "util/cleanup.h"

size_t nftmsg_elem_key(uint8_t family, const struct nftir_elem *e, uint8_t key[NFTMSG_KEY_MAX]) {
        unsigned alen = family == 6 ? 16 : 4;
        size_t n = 0;
        memset(key, 0, NFTMSG_KEY_MAX);
        if (e->with_addr) {
                memcpy(key, e->addr.bytes, alen);
                n = alen;
        }
        if (e->proto) {
                key[n] = e->proto;              /* in a 4-byte register */
                uint16_t port = htons(e->port);
                memcpy(key + n + 4, &port, 2);
                n += 8;
        }
        return n;
}

static void elem_msg(struct nftmsg *m, uint16_t type, const char *set, const uint8_t *key, size_t key_len,
                     const struct nftir_elem *e) {
        struct nlmsghdr *nlh = nftmsg_open(m, type, type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0, 0);
        nftmsg_put_table(nlh, NFTA_SET_ELEM_LIST_TABLE, e ? e->table : m->table);
        nftmsg_attr_strz(nlh, NFTA_SET_ELEM_LIST_SET, set);
        struct nlattr *list = nftmsg_nest_start(nlh, NFTA_SET_ELEM_LIST_ELEMENTS);
        struct nlattr *el = nftmsg_nest_start(nlh, NFTA_LIST_ELEM);
        nftmsg_put_data(nlh, NFTA_SET_ELEM_KEY, key, key_len);
        if (e && e->proto) {
                char name[512];
                nftmsg_put_verdict(nlh, NFTA_SET_ELEM_DATA, e->verdict == NFTIR_GOTO ? NFT_GOTO : NF_DROP,
                            e->verdict == NFTIR_GOTO ? nftir_name_join(&e->chain, name, sizeof name) : NULL);
        }
        if (e && e->comment) {
                struct nftmsg_udata u = {0};
                nftmsg_ud_str(&u, NFTMSG_UDATA_COMMENT, e->comment);
                nftmsg_attr(nlh, NFTA_SET_ELEM_USERDATA, u.len, u.b);
        }
        nftmsg_nest_end(nlh, el);
        nftmsg_nest_end(nlh, list);
        nftmsg_close(m, nlh);
}

void nftmsg_elem(struct nftmsg *m, const struct nftir_elem *e) {
        uint8_t key[NFTMSG_KEY_MAX];
        size_t n = nftmsg_elem_key(m->family, e, key);
        elem_msg(m, NFT_MSG_NEWSETELEM, e->set, key, n, e);
}

void nftmsg_elem_del(struct nftmsg *m, const char *set, const uint8_t *key, size_t key_len) {
        elem_msg(m, NFT_MSG_DELSETELEM, set, key, key_len, NULL);
}

#define MERGED_MAX (32 * 1024)

/* The table and set names and the first list element of a one-element message. */
static int elem_parts(const struct nlmsghdr *nlh, const char **ret_table, const char **ret_set,
                      const struct nlattr **ret_elem) {
        const struct nlattr *a, *e;
        *ret_table = *ret_set = NULL;
        *ret_elem = NULL;
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                if (mnl_attr_get_type(a) == NFTA_SET_ELEM_LIST_TABLE)
                        *ret_table = mnl_attr_get_str(a);
                else if (mnl_attr_get_type(a) == NFTA_SET_ELEM_LIST_SET)
                        *ret_set = mnl_attr_get_str(a);
                else if (mnl_attr_get_type(a) == NFTA_SET_ELEM_LIST_ELEMENTS)
                        mnl_attr_for_each_nested(e, a) {
                                *ret_elem = e;
                                break;
                        }
        }
        return *ret_table && *ret_set && *ret_elem ? 0 : -EINVAL;
}

void nftmsg_append_elems_merged(struct nftmsg *m, const struct nftmsg *src) {
        /* A handful of maps per table; a set beyond these is not merged. */
        const char *tables[2 * NFTIR_TABLES_MAX + 8], *sets[2 * NFTIR_TABLES_MAX + 8];
        size_t n_sets = 0;

        /* The sets, in order of first use. */
        for (size_t off = 0; off < src->b.len;) {
                const struct nlmsghdr *nlh = (const struct nlmsghdr *) (src->b.data + off);
                const char *table, *set;
                const struct nlattr *e;
                off += NLMSG_ALIGN(nlh->nlmsg_len);
                if (elem_parts(nlh, &table, &set, &e) < 0)
                        continue;
                size_t i = 0;
                while (i < n_sets && (strcmp(sets[i], set) != 0 || strcmp(tables[i], table) != 0))
                        i++;
                if (i == n_sets && n_sets < ELEMENTSOF(sets)) {
                        tables[n_sets] = table;
                        sets[n_sets++] = set;
                }
        }
        for (size_t i = 0; i < n_sets; i++) {
                struct nlmsghdr *nlh = NULL;
                struct nlattr *list = NULL;
                for (size_t off = 0; off < src->b.len;) {
                        const struct nlmsghdr *one = (const struct nlmsghdr *) (src->b.data + off);
                        const char *table, *set;
                        const struct nlattr *e;
                        off += NLMSG_ALIGN(one->nlmsg_len);
                        if (elem_parts(one, &table, &set, &e) < 0 || strcmp(set, sets[i]) != 0 ||
                            strcmp(table, tables[i]) != 0)
                                continue;
                        if (nlh && nlh->nlmsg_len + e->nla_len > MERGED_MAX) {
                                nftmsg_nest_end(nlh, list);
                                nftmsg_close(m, nlh);
                                nlh = NULL;
                        }
                        if (!nlh) {
                                nlh = nftmsg_open(m, NFT_MSG_NEWSETELEM, NLM_F_CREATE, MERGED_MAX + 1024);
                                nftmsg_attr_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, tables[i]);
                                nftmsg_attr_strz(nlh, NFTA_SET_ELEM_LIST_SET, sets[i]);
                                list = nftmsg_nest_start(nlh, NFTA_SET_ELEM_LIST_ELEMENTS);
                        }
                        memcpy(mnl_nlmsg_get_payload_tail(nlh), e, MNL_ALIGN(e->nla_len));
                        nlh->nlmsg_len += MNL_ALIGN(e->nla_len);
                }
                if (nlh) {
                        nftmsg_nest_end(nlh, list);
                        nftmsg_close(m, nlh);
                }
        }
}
