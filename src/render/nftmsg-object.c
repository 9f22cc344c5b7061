/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The table's objects as nf_tables messages: the table, its named sets and
 * maps, its chains, and their removal by name. Rules are nftmsg-rule.c's,
 * elements nftmsg-elem.c's.
 */
#include <netinet/in.h>

#include "render/nftmsg-object.h"

#include <endian.h>
#include <stdbool.h>

#include "render/nftmsg-put.h"

void nftmsg_table(struct nftmsg *m) {
        struct nftmsg_udata u = {0};
        struct nlmsghdr *nlh = nftmsg_open(m, NFT_MSG_NEWTABLE, NLM_F_CREATE, 0);
        nftmsg_put_table(nlh, NFTA_TABLE_NAME, m->table);
        nftmsg_attr_u32(nlh, NFTA_TABLE_FLAGS, 0);
        nftmsg_ud_str(&u, NFTMSG_UDATA_COMMENT, "rules for kube-proxy");
        nftmsg_attr(nlh, NFTA_TABLE_USERDATA, u.len, u.b);
        nftmsg_close(m, nlh);
}

void nftmsg_table_del(struct nftmsg *m) {
        struct nlmsghdr *nlh = nftmsg_open(m, NFT_MSG_DELTABLE, 0, 0);
        nftmsg_put_table(nlh, NFTA_TABLE_NAME, m->table);
        nftmsg_close(m, nlh);
}

void nftmsg_set(struct nftmsg *m, const struct nftir_set *s) {
        struct nftmsg_udata u = {0};
        uint32_t addr_type = m->family == 6 ? NFTMSG_TYPE_IP6ADDR : NFTMSG_TYPE_IPADDR;
        struct nlmsghdr *nlh = nftmsg_open(m, NFT_MSG_NEWSET, NLM_F_CREATE, 0);

        nftmsg_put_table(nlh, NFTA_SET_TABLE, s->table);
        nftmsg_put_name(nlh, NFTA_SET_NAME, &s->name);
        switch (s->type) {
        case NFTIR_SET_ADDR:
                nftmsg_attr_u32(nlh, NFTA_SET_FLAGS, htonl(s->timeout ? NFT_SET_TIMEOUT | NFT_SET_EVAL : 0));
                nftmsg_attr_u32(nlh, NFTA_SET_KEY_TYPE, htonl(addr_type));
                nftmsg_attr_u32(nlh, NFTA_SET_KEY_LEN, htonl(nftmsg_addr_len(m)));
                nftmsg_ud_u32(&u, NFTMSG_UDATA_SET_KEYBYTEORDER, NFTMSG_BYTEORDER_BIG_ENDIAN);
                break;
        case NFTIR_MAP_ADDR_PROTO_PORT:
        case NFTIR_MAP_PROTO_PORT: {
                bool with_addr = s->type == NFTIR_MAP_ADDR_PROTO_PORT;
                uint32_t type = NFTMSG_TYPE_INET_PROTO << 6 | NFTMSG_TYPE_INET_SERVICE;
                if (with_addr)
                        type |= addr_type << 12;
                nftmsg_attr_u32(nlh, NFTA_SET_FLAGS, htonl(NFT_SET_MAP));
                nftmsg_attr_u32(nlh, NFTA_SET_KEY_TYPE, htonl(type));
                nftmsg_attr_u32(nlh, NFTA_SET_KEY_LEN, htonl((with_addr ? nftmsg_addr_len(m) : 0) + 8));
                nftmsg_attr_u32(nlh, NFTA_SET_DATA_TYPE, htonl(NFT_DATA_VERDICT));
                nftmsg_attr_u32(nlh, NFTA_SET_DATA_LEN, 0);
                /* nft's description of a "type a . b" key: a concatenation, no byte order. */
                struct nftmsg_udata t = {0};
                nftmsg_ud_u32(&t, NFTMSG_UDATA_TYPEOF_EXPR, NFTMSG_EXPR_CONCAT);
                nftmsg_ud_put(&t, NFTMSG_UDATA_TYPEOF_DATA, NULL, 0);
                nftmsg_ud_u32(&u, NFTMSG_UDATA_SET_KEYBYTEORDER, 0);
                nftmsg_ud_u32(&u, NFTMSG_UDATA_SET_DATABYTEORDER, 0);
                nftmsg_ud_put(&u, NFTMSG_UDATA_SET_KEY_TYPEOF, t.b, t.len);
                nftmsg_ud_u32(&u, NFTMSG_UDATA_SET_DATA_INTERVAL, 0);
                break;
        }
        }
        nftmsg_attr_u32(nlh, NFTA_SET_ID, htonl(++*m->set_id));       /* required */
        if (s->timeout)
                nftmsg_attr_u64(nlh, NFTA_SET_TIMEOUT, htobe64((uint64_t) s->timeout * 1000));
        if (s->comment)
                nftmsg_ud_str(&u, NFTMSG_UDATA_SET_COMMENT, s->comment);
        nftmsg_attr(nlh, NFTA_SET_USERDATA, u.len, u.b);
        nftmsg_close(m, nlh);
}

static void obj_by_name(struct nftmsg *m, uint16_t type, uint16_t table_attr, uint16_t name_attr, const char *name) {
        struct nlmsghdr *nlh = nftmsg_open(m, type, 0, 0);
        nftmsg_put_table(nlh, table_attr, m->table);
        nftmsg_attr_strz(nlh, name_attr, name);
        nftmsg_close(m, nlh);
}

void nftmsg_set_del(struct nftmsg *m, const char *name) {
        obj_by_name(m, NFT_MSG_DELSET, NFTA_SET_TABLE, NFTA_SET_NAME, name);
}

void nftmsg_set_flush(struct nftmsg *m, const char *name) {
        obj_by_name(m, NFT_MSG_DELSETELEM, NFTA_SET_ELEM_LIST_TABLE, NFTA_SET_ELEM_LIST_SET, name);
}

void nftmsg_chain_flush(struct nftmsg *m, const char *name) {
        obj_by_name(m, NFT_MSG_DELRULE, NFTA_RULE_TABLE, NFTA_RULE_CHAIN, name);
}

void nftmsg_chain_del(struct nftmsg *m, const char *name) {
        obj_by_name(m, NFT_MSG_DELCHAIN, NFTA_CHAIN_TABLE, NFTA_CHAIN_NAME, name);
}

static uint32_t hook_num(const char *hook) {
        if (strcmp(hook, "prerouting") == 0)
                return NF_INET_PRE_ROUTING;
        if (strcmp(hook, "input") == 0)
                return NF_INET_LOCAL_IN;
        if (strcmp(hook, "forward") == 0)
                return NF_INET_FORWARD;
        if (strcmp(hook, "output") == 0)
                return NF_INET_LOCAL_OUT;
        assert(strcmp(hook, "postrouting") == 0);
        return NF_INET_POST_ROUTING;
}

void nftmsg_chain(struct nftmsg *m, const struct nftir_chain *c) {
        struct nlmsghdr *nlh = nftmsg_open(m, NFT_MSG_NEWCHAIN, NLM_F_CREATE, 0);
        nftmsg_put_table(nlh, NFTA_CHAIN_TABLE, c->table);
        nftmsg_put_name(nlh, NFTA_CHAIN_NAME, &c->name);
        if (c->type) {
                nftmsg_attr_strz(nlh, NFTA_CHAIN_TYPE, c->type);
                struct nlattr *h = nftmsg_nest_start(nlh, NFTA_CHAIN_HOOK);
                nftmsg_attr_u32(nlh, NFTA_HOOK_HOOKNUM, htonl(hook_num(c->hook)));
                nftmsg_attr_u32(nlh, NFTA_HOOK_PRIORITY, htonl((uint32_t) c->prio));
                nftmsg_nest_end(nlh, h);
        }
        if (c->comment) {
                struct nftmsg_udata u = {0};
                nftmsg_ud_str(&u, NFTMSG_UDATA_COMMENT, c->comment);
                nftmsg_attr(nlh, NFTA_CHAIN_USERDATA, u.len, u.b);
        }
        nftmsg_close(m, nlh);
}
