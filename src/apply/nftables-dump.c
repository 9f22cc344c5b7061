/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Asking nf_tables what it holds. Each question is one request on the
 * handle's link (nftables_talk()), answered by objects and an
 * acknowledgement, or by a dump that ends with NLMSG_DONE.
 */
#include <netinet/in.h>

#include "apply/nftables-dump.h"

#include <endian.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdlib.h>
#include <string.h>

#include "apply/nftables-internal.h"
#include "apply/nftables-handle.h"
#include "render/nftir.h"
#include "util/hmap.h"

struct dump_ctx {
        uint16_t name_attr;
        uint16_t table_attr;
        const char *table;
        struct hmap *out;
        bool sets;
};

static int dump_cb(const struct nlmsghdr *nlh, void *data) {
        struct dump_ctx *c = data;
        const struct nlattr *a;
        const char *table = NULL, *name = NULL;
        uint32_t flags = 0;
        uint64_t timeout = 0;

        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                uint16_t t = mnl_attr_get_type(a);
                if (t == c->table_attr && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
                        table = mnl_attr_get_str(a);
                else if (t == c->name_attr && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
                        name = mnl_attr_get_str(a);
                else if (c->sets && t == NFTA_SET_FLAGS && mnl_attr_validate(a, MNL_TYPE_U32) == 0)
                        flags = ntohl(mnl_attr_get_u32(a));
                else if (c->sets && t == NFTA_SET_TIMEOUT && mnl_attr_validate(a, MNL_TYPE_U64) == 0)
                        timeout = be64toh(mnl_attr_get_u64(a));
        }
        if (!table || !name || strcmp(table, c->table) != 0 || (flags & NFT_SET_ANONYMOUS))
                return MNL_CB_OK;
        if (c->sets) {
                struct nftables_set *set = malloc(sizeof *set + strlen(name) + 1);
                if (!set)
                        return MNL_CB_ERROR;
                set->timeout_ms = timeout;
                strcpy(set->name, name);
                free(hmap_put(c->out, set->name, set));
        } else {
                char *k = strdup(name);
                if (!k)
                        return MNL_CB_ERROR;
                free(hmap_put(c->out, k, k));
        }
        return MNL_CB_OK;
}

int nftables_list(struct nftables *n, uint8_t family, const char *table, struct hmap *ret_chains,
                  struct hmap *ret_sets) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct nlmsghdr *nlh;
        int r;

        nlh = nftables_request(n, buf, NFT_MSG_GETTABLE, NLM_F_ACK, family);
        mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, table);
        r = nftables_talk(n, nlh, NULL, NULL);
        if (r < 0)
                return r;

        if (ret_chains) {
                struct dump_ctx chains = {NFTA_CHAIN_NAME, NFTA_CHAIN_TABLE, table, ret_chains, false};
                nlh = nftables_request(n, buf, NFT_MSG_GETCHAIN, NLM_F_DUMP, family);
                mnl_attr_put_strz(nlh, NFTA_CHAIN_TABLE, table);
                r = nftables_talk(n, nlh, dump_cb, &chains);
                if (r < 0 || !ret_sets)
                        return r;
        }

        struct dump_ctx sets = {NFTA_SET_NAME, NFTA_SET_TABLE, table, ret_sets, true};
        nlh = nftables_request(n, buf, NFT_MSG_GETSET, NLM_F_DUMP, family);
        mnl_attr_put_strz(nlh, NFTA_SET_TABLE, table);
        return nftables_talk(n, nlh, dump_cb, &sets);
}

void nftables_names_done(struct hmap *names) {
        const char *k;
        void *v;
        for (size_t i = 0; hmap_next(names, &i, &k, &v);)
                free(v);
        hmap_done(names);
}

int nftables_chain_present(struct nftables *n, uint8_t family, const char *table, const char *chain) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct nlmsghdr *nlh = nftables_request(n, buf, NFT_MSG_GETCHAIN, NLM_F_ACK, family);
        mnl_attr_put_strz(nlh, NFTA_CHAIN_TABLE, table);
        mnl_attr_put_strz(nlh, NFTA_CHAIN_NAME, chain);
        int r = nftables_talk(n, nlh, NULL, NULL);
        return r == 0 ? 1 : r == -ENOENT ? 0 : r;
}

static int table_use_cb(const struct nlmsghdr *nlh, void *data) {
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
                if (mnl_attr_get_type(a) == NFTA_TABLE_USE && mnl_attr_validate(a, MNL_TYPE_U32) == 0)
                        *(int64_t *) data = ntohl(mnl_attr_get_u32(a));
        return MNL_CB_OK;
}

int nftables_table_use(struct nftables *n, uint8_t family, const char *table, uint32_t *ret) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        int64_t use = -1;
        struct nlmsghdr *nlh = nftables_request(n, buf, NFT_MSG_GETTABLE, NLM_F_ACK, family);
        mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, table);
        int r = nftables_talk(n, nlh, table_use_cb, &use);
        if (r < 0)
                return r;
        if (use < 0)
                return -EBADMSG;
        *ret = (uint32_t) use;
        return 0;
}

static int gen_cb(const struct nlmsghdr *nlh, void *data) {
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                if (mnl_attr_get_type(a) == NFTA_GEN_ID && mnl_attr_validate(a, MNL_TYPE_U32) == 0)
                        *(uint32_t *) data = ntohl(mnl_attr_get_u32(a));
        }
        return MNL_CB_OK;
}

int nftables_genid(struct nftables *n, uint32_t *ret) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        uint32_t gen = 0;
        struct nlmsghdr *nlh = nftables_request(n, buf, NFT_MSG_GETGEN, NLM_F_ACK, 4);
        int r = nftables_talk(n, nlh, gen_cb, &gen);
        if (r == 0)
                *ret = gen;
        return r;
}

bool nftables_table_present(uint8_t family) {
        struct nftables *n = NULL;
        char buf[MNL_SOCKET_BUFFER_SIZE];
        bool present = false;

        if (nftables_open(&n) < 0)
                return false;
        struct nlmsghdr *nlh = nftables_request(n, buf, NFT_MSG_GETTABLE, NLM_F_ACK, family);
        char name[NFTIR_TABLE_NAME_MAX];
        mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, nftir_table_name(0, name));
        present = nftables_talk(n, nlh, NULL, NULL) == 0;
        nftables_close(n);
        return present;
}
