/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What the fake kernel's files share (nft-fake.h is the interface): the
 * objects it keeps (nft-fake-state.c), a transaction's application of
 * messages to them (nft-fake-txn.c), and small readers of netlink
 * attributes. nft-fake.c is the kernel and its links.
 */
#include <netinet/in.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/buf.h"

#define KEY_MAX 64

struct blob {
        uint8_t *p;
        size_t len;
        bool set;
};

struct fk_elem {
        uint8_t key[KEY_MAX];
        uint32_t key_len, flags;
        bool verdict;
        int32_t code;           /* NF_DROP, NFT_GOTO, ... */
        char *chain;            /* a jump's or goto's */
        struct blob udata;
};

struct fk_set {
        char *name;
        bool anonymous;
        uint32_t flags, key_type, key_len, data_type, data_len;
        uint64_t timeout;       /* ms, 0: none */
        struct blob udata;
        struct fk_elem *el;
        size_t n_el;
        unsigned use;           /* rules that refer to it */
        uint64_t handle;
};

struct fk_rule {
        uint64_t handle;
        struct blob exprs, udata;
        char **chains;          /* jumped or gone to */
        size_t n_chains;
        char **sets;            /* looked up or updated */
        size_t n_sets;
        char *text;             /* for nft_fake_text() */
};

struct fk_chain {
        char *name;
        uint64_t handle;
        bool base;
        char *type;
        uint32_t hooknum, prio, policy;         /* as sent: network order */
        struct blob udata;
        struct fk_rule *rules;
        size_t n_rules;
        unsigned use;           /* rules and elements that point here */
};

struct fk_table {
        uint8_t family;         /* NFPROTO_IPV4, NFPROTO_IPV6 */
        char *name;
        uint32_t flags;
        struct blob udata;
        struct fk_chain **chains;
        size_t n_chains;
        struct fk_set **sets;
        size_t n_sets;
        uint64_t next_handle;
        unsigned next_anon;
};

struct fk_state {
        struct fk_table **t;
        size_t n;
};

/* --- nft-fake-state.c --- */

void *fk_xcalloc(size_t n, size_t size);
char *fk_xstrdup(const char *s);
/* Appends one element of size to v (n elements), zeroed; returns v. */
void *fk_push(void *v, size_t *n, size_t size);
/* A copy of a's payload (a may be NULL: an unset blob). */
struct blob fk_blob_of(const struct nlattr *a);
void fk_hex(struct buf *b, const uint8_t *p, size_t len);

void fk_elem_done(struct fk_elem *e);
void fk_set_free(struct fk_set *s);
void fk_rule_done(struct fk_rule *r);
void fk_chain_free(struct fk_chain *c);
void fk_table_free(struct fk_table *t);
void fk_state_done(struct fk_state *s);
/* A deep copy of s in out. */
void fk_state_copy(const struct fk_state *s, struct fk_state *out);

/* Lookups by name (NULL: not found); ret_i, if not NULL, gets the index. */
struct fk_table *fk_table_find(const struct fk_state *s, uint8_t family, const char *name);
struct fk_chain *fk_chain_find(const struct fk_table *t, const char *name, size_t *ret_i);
struct fk_set *fk_set_find(const struct fk_table *t, const char *name, size_t *ret_i);
/* An element by key and interval-end flag. */
struct fk_elem *fk_elem_find(const struct fk_set *s, const uint8_t *key, size_t len, uint32_t flags, size_t *ret_i);
const char *fk_family_name(uint8_t family);
/* A table's text for nft_fake_text(): chains and named sets by name. */
void fk_table_text(const struct fk_table *t, struct buf *out);

/* --- nft-fake-txn.c --- */

struct fk_set_id {
        uint32_t id;
        uint8_t family;
        char *table, *name;
};

struct fk_txn {
        struct fk_state *st;
        struct fk_set_id *ids;
        size_t n_ids;
        struct buf journal;
        char err[256];
};

/* Applies one message of a batch to tx's state, journalling it. Returns 0
 * or -errno (the reason in tx->err). */
int fk_apply(struct fk_txn *tx, const struct nlmsghdr *nlh);
void fk_txn_done(struct fk_txn *tx);

/* --- attributes --- */

#define ATTRS_MAX 32

/* A message's attributes by type, in tb[ATTRS_MAX]. */
static inline void fk_attrs(const struct nlmsghdr *nlh, const struct nlattr **tb) {
        const struct nlattr *a;
        memset(tb, 0, ATTRS_MAX * sizeof *tb);
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                if (mnl_attr_get_type(a) < ATTRS_MAX)
                        tb[mnl_attr_get_type(a)] = a;
        }
}

/* A nest's attributes by type (none when n is NULL). */
static inline void fk_nested(const struct nlattr *n, const struct nlattr **tb) {
        const struct nlattr *a;
        memset(tb, 0, ATTRS_MAX * sizeof *tb);
        if (!n)
                return;
        mnl_attr_for_each_nested(a, n) {
                if (mnl_attr_get_type(a) < ATTRS_MAX)
                        tb[mnl_attr_get_type(a)] = a;
        }
}

static inline const char *fk_str(const struct nlattr *a) {
        return a && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0 ? mnl_attr_get_str(a) : NULL;
}

/* A 32-bit attribute in host order (0 when missing). */
static inline uint32_t fk_be32(const struct nlattr *a) {
        return a && mnl_attr_get_payload_len(a) == 4 ? ntohl(mnl_attr_get_u32(a)) : 0;
}
