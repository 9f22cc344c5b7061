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

#include "render/nftmsg-internal.h"

void nftmsg_table(struct nftmsg *m) {
        struct udata u = {0};
        struct nlmsghdr *nlh = msg(m, NFT_MSG_NEWTABLE, NLM_F_CREATE, 0);
        nftmsg_put_table(nlh, NFTA_TABLE_NAME, m->table);
        attr_u32(nlh, NFTA_TABLE_FLAGS, 0);
        ud_str(&u, UDATA_COMMENT, "rules for kube-proxy");
        attr_put(nlh, NFTA_TABLE_USERDATA, u.len, u.b);
        msg_end(m, nlh);
}

void nftmsg_table_del(struct nftmsg *m) {
        struct nlmsghdr *nlh = msg(m, NFT_MSG_DELTABLE, 0, 0);
        nftmsg_put_table(nlh, NFTA_TABLE_NAME, m->table);
        msg_end(m, nlh);
}

void nftmsg_set(struct nftmsg *m, const struct nftir_set *s) {
        struct udata u = {0};
        uint32_t addr_type = m->family == 6 ? TYPE_IP6ADDR : TYPE_IPADDR;
        struct nlmsghdr *nlh = msg(m, NFT_MSG_NEWSET, NLM_F_CREATE, 0);

        nftmsg_put_table(nlh, NFTA_SET_TABLE, s->table);
        put_name(nlh, NFTA_SET_NAME, &s->name);
        switch (s->type) {
        case NFTIR_SET_ADDR:
                attr_u32(nlh, NFTA_SET_FLAGS, htonl(s->timeout ? NFT_SET_TIMEOUT | NFT_SET_EVAL : 0));
                attr_u32(nlh, NFTA_SET_KEY_TYPE, htonl(addr_type));
                attr_u32(nlh, NFTA_SET_KEY_LEN, htonl(addr_len(m)));
                ud_u32(&u, UDATA_SET_KEYBYTEORDER, BYTEORDER_BIG_ENDIAN);
                break;
        case NFTIR_MAP_ADDR_PROTO_PORT:
        case NFTIR_MAP_PROTO_PORT: {
                bool with_addr = s->type == NFTIR_MAP_ADDR_PROTO_PORT;
                uint32_t type = TYPE_INET_PROTO << 6 | TYPE_INET_SERVICE;
                if (with_addr)
                        type |= addr_type << 12;
                attr_u32(nlh, NFTA_SET_FLAGS, htonl(NFT_SET_MAP));
                attr_u32(nlh, NFTA_SET_KEY_TYPE, htonl(type));
                attr_u32(nlh, NFTA_SET_KEY_LEN, htonl((with_addr ? addr_len(m) : 0) + 8));
                attr_u32(nlh, NFTA_SET_DATA_TYPE, htonl(NFT_DATA_VERDICT));
                attr_u32(nlh, NFTA_SET_DATA_LEN, 0);
                /* nft's description of a "type a . b" key: a concatenation, no byte order. */
                struct udata t = {0};
                ud_u32(&t, UDATA_TYPEOF_EXPR, EXPR_CONCAT);
                ud_put(&t, UDATA_TYPEOF_DATA, NULL, 0);
                ud_u32(&u, UDATA_SET_KEYBYTEORDER, 0);
                ud_u32(&u, UDATA_SET_DATABYTEORDER, 0);
                ud_put(&u, UDATA_SET_KEY_TYPEOF, t.b, t.len);
                ud_u32(&u, UDATA_SET_DATA_INTERVAL, 0);
                break;
        }
        }
        attr_u32(nlh, NFTA_SET_ID, htonl(++*m->set_id));       /* required */
        if (s->timeout)
                attr_u64(nlh, NFTA_SET_TIMEOUT, htobe64((uint64_t) s->timeout * 1000));
        if (s->comment)
                ud_str(&u, UDATA_SET_COMMENT, s->comment);
        attr_put(nlh, NFTA_SET_USERDATA, u.len, u.b);
        msg_end(m, nlh);
}

static void obj_by_name(struct nftmsg *m, uint16_t type, uint16_t table_attr, uint16_t name_attr, const char *name) {
        struct nlmsghdr *nlh = msg(m, type, 0, 0);
        nftmsg_put_table(nlh, table_attr, m->table);
        attr_strz(nlh, name_attr, name);
        msg_end(m, nlh);
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
        struct nlmsghdr *nlh = msg(m, NFT_MSG_NEWCHAIN, NLM_F_CREATE, 0);
        nftmsg_put_table(nlh, NFTA_CHAIN_TABLE, c->table);
        put_name(nlh, NFTA_CHAIN_NAME, &c->name);
        if (c->type) {
                attr_strz(nlh, NFTA_CHAIN_TYPE, c->type);
                struct nlattr *h = nest_start(nlh, NFTA_CHAIN_HOOK);
                attr_u32(nlh, NFTA_HOOK_HOOKNUM, htonl(hook_num(c->hook)));
                attr_u32(nlh, NFTA_HOOK_PRIORITY, htonl((uint32_t) c->prio));
                nest_end(nlh, h);
        }
        if (c->comment) {
                struct udata u = {0};
                ud_str(&u, UDATA_COMMENT, c->comment);
                attr_put(nlh, NFTA_CHAIN_USERDATA, u.len, u.b);
        }
        msg_end(m, nlh);
}
