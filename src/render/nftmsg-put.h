/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What the encoder's files share, and nothing else of kproxy uses
 * (render/nftmsg.h is the interface): netlink attribute writers, the
 * opening and closing of a message, user-data blobs, nft's type numbers;
 * all prefixed nftmsg_ and NFTMSG_.
 *
 * The writers are libmnl's, inline: a full sync writes millions of
 * attributes, and the calls (through the PLT) were a fifth of rendering
 * its messages (perf at 10k services). The same bytes as libmnl's. They
 * stay inline here, not behind calls, so the split into files costs the
 * encoder nothing.
 */
#include <netinet/in.h>

#include <assert.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdint.h>
#include <string.h>

#include "render/nftir.h"
#include "render/nftmsg-stream.h"

/* libnftnl's user-data TLV types, which nft reads back to print objects. */
#define NFTMSG_UDATA_COMMENT 0                 /* table, chain, rule, element */
#define NFTMSG_UDATA_SET_KEYBYTEORDER 0
#define NFTMSG_UDATA_SET_DATABYTEORDER 1
#define NFTMSG_UDATA_SET_MERGE_ELEMENTS 2
#define NFTMSG_UDATA_SET_KEY_TYPEOF 3
#define NFTMSG_UDATA_SET_DATA_INTERVAL 6
#define NFTMSG_UDATA_SET_COMMENT 7
#define NFTMSG_UDATA_TYPEOF_EXPR 0
#define NFTMSG_UDATA_TYPEOF_DATA 1

/* nft's datatype ids, and its concatenation of them (6 bits each). */
#define NFTMSG_TYPE_IPADDR 7
#define NFTMSG_TYPE_IP6ADDR 8
#define NFTMSG_TYPE_INET_PROTO 12
#define NFTMSG_TYPE_INET_SERVICE 13
#define NFTMSG_EXPR_CONCAT 13
#define NFTMSG_BYTEORDER_BIG_ENDIAN 2

#define NFTMSG_MSG_ROOM 4096           /* bound on one message but element lists */

static inline uint8_t nftmsg_nfproto(const struct nftmsg *m) {
        return m->family == 6 ? NFPROTO_IPV6 : NFPROTO_IPV4;
}

static inline unsigned nftmsg_addr_len(const struct nftmsg *m) {
        return m->family == 6 ? 16 : 4;
}

static inline struct nlattr *nftmsg_attr_tail(const struct nlmsghdr *nlh) {
        return (struct nlattr *) ((char *) nlh + MNL_ALIGN(nlh->nlmsg_len));
}

static inline void nftmsg_attr(struct nlmsghdr *nlh, uint16_t type, size_t len, const void *data) {
        struct nlattr *a = nftmsg_attr_tail(nlh);
        uint16_t alen = (uint16_t) (MNL_ATTR_HDRLEN + len);
        a->nla_type = type;
        a->nla_len = alen;
        memcpy((char *) a + MNL_ATTR_HDRLEN, data, len);
        size_t pad = MNL_ALIGN(len) - len;
        if (pad > 0)
                memset((char *) a + MNL_ATTR_HDRLEN + len, 0, pad);
        nlh->nlmsg_len += MNL_ALIGN(alen);
}

static inline void nftmsg_attr_u8(struct nlmsghdr *nlh, uint16_t type, uint8_t v) {
        nftmsg_attr(nlh, type, sizeof v, &v);
}

static inline void nftmsg_attr_u32(struct nlmsghdr *nlh, uint16_t type, uint32_t v) {
        nftmsg_attr(nlh, type, sizeof v, &v);
}

static inline void nftmsg_attr_u64(struct nlmsghdr *nlh, uint16_t type, uint64_t v) {
        nftmsg_attr(nlh, type, sizeof v, &v);
}

static inline void nftmsg_attr_strz(struct nlmsghdr *nlh, uint16_t type, const char *s) {
        nftmsg_attr(nlh, type, strlen(s) + 1, s);
}

static inline struct nlattr *nftmsg_nest_start(struct nlmsghdr *nlh, uint16_t type) {
        struct nlattr *a = nftmsg_attr_tail(nlh);
        a->nla_type = NLA_F_NESTED | type;
        nlh->nlmsg_len += MNL_ALIGN(sizeof(struct nlattr));
        return a;
}

static inline void nftmsg_nest_end(struct nlmsghdr *nlh, struct nlattr *a) {
        a->nla_len = (uint16_t) ((char *) nftmsg_attr_tail(nlh) - (char *) a);
}

/* Opens a message with room for `extra` bytes of attributes. */
static inline struct nlmsghdr *nftmsg_open(struct nftmsg *m, uint16_t type, uint16_t flags, size_t extra) {
        buf_reserve(&m->b, NFTMSG_MSG_ROOM + extra);
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(m->b.data + m->b.len);
        nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | type;
        nlh->nlmsg_flags = NLM_F_REQUEST | flags;
        nlh->nlmsg_seq = ++m->seq;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
        g->nfgen_family = nftmsg_nfproto(m);
        g->version = NFNETLINK_V0;
        g->res_id = 0;
        return nlh;
}

static inline void nftmsg_close(struct nftmsg *m, struct nlmsghdr *nlh) {
        m->last = m->b.len;
        m->b.len += nlh->nlmsg_len;
        assert(m->b.len < m->b.cap);
        m->n++;
}

/* The name of table idx as an attribute (every message carries one). */
void nftmsg_put_table(struct nlmsghdr *nlh, uint16_t type, unsigned idx);

static inline void nftmsg_put_name(struct nlmsghdr *nlh, uint16_t type, const struct nftir_name *n) {
        char s[512];
        nftmsg_attr_strz(nlh, type, nftir_name_join(n, s, sizeof s));
}

/* NFTA_DATA_VALUE in a nest of type. */
static inline void nftmsg_put_data(struct nlmsghdr *nlh, uint16_t type, const void *v, size_t len) {
        struct nlattr *n = nftmsg_nest_start(nlh, type);
        nftmsg_attr(nlh, NFTA_DATA_VALUE, len, v);
        nftmsg_nest_end(nlh, n);
}

/* A verdict (NFTA_DATA_VERDICT: code, and chain for a jump or goto) in a nest of type. */
static inline void nftmsg_put_verdict(struct nlmsghdr *nlh, uint16_t type, int code, const char *chain) {
        struct nlattr *dn = nftmsg_nest_start(nlh, type);
        struct nlattr *v = nftmsg_nest_start(nlh, NFTA_DATA_VERDICT);
        nftmsg_attr_u32(nlh, NFTA_VERDICT_CODE, htonl((uint32_t) code));
        if (chain)
                nftmsg_attr_strz(nlh, NFTA_VERDICT_CHAIN, chain);
        nftmsg_nest_end(nlh, v);
        nftmsg_nest_end(nlh, dn);
}

/* The mask of a prefix of len bytes. */
static inline void nftmsg_prefix_mask(uint8_t *mask, unsigned len, unsigned prefix) {
        memset(mask, 0, len);
        for (unsigned i = 0; i < prefix; i++)
                mask[i / 8] |= (uint8_t) (0x80 >> (i % 8));
}

/* A user-data blob of TLVs (type u8, length u8, value). */
struct nftmsg_udata {
        uint8_t b[256];
        size_t len;
};

static inline void nftmsg_ud_put(struct nftmsg_udata *u, uint8_t type, const void *v, size_t len) {
        assert(u->len + 2 + len <= sizeof u->b && len < 256);
        u->b[u->len++] = type;
        u->b[u->len++] = (uint8_t) len;
        if (len > 0)
                memcpy(u->b + u->len, v, len);
        u->len += len;
}

static inline void nftmsg_ud_u32(struct nftmsg_udata *u, uint8_t type, uint32_t v) {
        nftmsg_ud_put(u, type, &v, sizeof v);
}

static inline void nftmsg_ud_str(struct nftmsg_udata *u, uint8_t type, const char *s) {
        size_t n = strlen(s) + 1;
        if (n > 200)
                n = 200;        /* comments are kproxy's own, short; never overflow */
        nftmsg_ud_put(u, type, s, n);
}
