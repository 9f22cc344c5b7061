/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * nftables mode's rules as data: the few statement shapes upstream's layout
 * uses, composed into rules, chains, sets and elements. The renderer
 * (render/nft.c) describes the table once in these terms, and two back-ends
 * turn the description into what a consumer needs: nft script text
 * (nftir_format_*: `kproxy render`, the golden tests) and netlink messages
 * (render/nftmsg*.c: the daemon). One description, so the text an operator
 * reads and the bytecode the kernel runs cannot drift apart.
 *
 * Everything here borrows: names and addresses point into the caller's
 * storage and live only for the duration of the sink call they appear in.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/inet.h"

struct buf;

enum nftir_stmt_kind {
        NFTIR_CT_NEW,           /* ct state new */
        NFTIR_ADDR,             /* ipX saddr|daddr [!=] CIDR (an address when the prefix is full) */
        NFTIR_ADDR_SET,         /* ipX saddr|daddr @SET */
        NFTIR_ADDR_LIST,        /* ipX saddr|daddr [!=] { CIDR , ... , ADDR , ... } */
        NFTIR_IIFNAME,          /* iifname [!=] NAME; a trailing '*' matches a prefix */
        NFTIR_FIB_LOCAL,        /* fib saddr|daddr type local */
        NFTIR_NUMGEN,           /* numgen random mod N == 0 */
        NFTIR_VMAP,             /* [ipX daddr .] meta l4proto . th dport vmap @MAP */
        NFTIR_MARK_OR,          /* mark set mark or N */
        NFTIR_MARK_XOR,         /* mark set mark xor N */
        NFTIR_MARK_CLEAR,       /* mark and N == 0 */
        NFTIR_UPDATE_SADDR,     /* update @SET { ipX saddr } */
        NFTIR_L4PROTO,          /* meta l4proto tcp|udp|sctp */
        NFTIR_DNAT,             /* dnat to ADDR:PORT */
        NFTIR_MASQ,             /* masquerade fully-random */
        NFTIR_REJECT,           /* reject (ICMP port unreachable) */
        NFTIR_JUMP,             /* jump CHAIN */
        NFTIR_GOTO,             /* goto CHAIN */
        NFTIR_DROP,
        NFTIR_RETURN,
        _NFTIR_STMT_MAX,
};

/* A name given in two parts, written one after the other ("endpoint-" and
 * a chain body): the renderer keeps bodies once and never concatenates. */
struct nftir_name {
        const char *prefix;
        const char *body;       /* may be NULL */
        /* body is "<8 characters>-<rest>" and the 8 are derived from the
         * rest (render/nft.c's uncut names, as upstream's hashAndTruncate
         * makes them): digests leave them out, and a sink that asked for
         * unhashed names may get them unset. */
        bool derived;
};

struct nftir_stmt {
        enum nftir_stmt_kind kind;
        bool saddr;                     /* ADDR*, FIB_LOCAL: the source address */
        bool neg;                       /* ADDR, ADDR_LIST, IIFNAME: != */
        bool with_addr;                 /* VMAP: the key starts with the destination address */
        uint8_t proto;                  /* L4PROTO: IPPROTO_TCP, ... */
        uint16_t port;                  /* DNAT */
        uint32_t n;                     /* NUMGEN modulus, MARK_* value */
        struct inet_cidr cidr;          /* ADDR; DNAT's address */
        const struct inet_cidr *cidrs;  /* ADDR_LIST: ranges, then addresses */
        size_t n_cidrs;
        const struct inet_addr *addrs;
        size_t n_addrs;
        struct nftir_name name;         /* set, map, chain or interface */
};

#define NFTIR_RULE_MAX_STMTS 4

struct nftir_rule {
        struct nftir_stmt s[NFTIR_RULE_MAX_STMTS];
        size_t n;
        const char *comment;            /* NULL: none */
};

struct nftir_chain {
        struct nftir_name name;
        uint16_t table;                 /* nftir_table_name()'s index */
        const char *type, *hook;        /* base chains: "nat", "prerouting"; NULL otherwise */
        int prio;
        const char *comment;
        const struct nftir_rule *rules;
        size_t n_rules;
};

enum nftir_set_type {
        NFTIR_SET_ADDR,                 /* type ipvX_addr */
        NFTIR_MAP_ADDR_PROTO_PORT,      /* type ipvX_addr . inet_proto . inet_service : verdict */
        NFTIR_MAP_PROTO_PORT,           /* type inet_proto . inet_service : verdict */
};

struct nftir_set {
        struct nftir_name name;
        uint16_t table;
        enum nftir_set_type type;
        const char *comment;
        uint32_t timeout;               /* seconds; non-zero: flags dynamic,timeout (affinity) */
};

struct nftir_elem {
        const char *set;
        uint16_t table;                 /* the set's */
        bool with_addr;                 /* key starts with addr */
        struct inet_addr addr;
        uint8_t proto;                  /* 0: a plain address set */
        uint16_t port;
        enum nftir_stmt_kind verdict;   /* maps: NFTIR_GOTO or NFTIR_DROP */
        struct nftir_name chain;        /* NFTIR_GOTO's target */
        const char *comment;
};

/* kproxy's tables: 0 is upstream's "kube-proxy", which holds everything
 * unless services are sharded (render_params.nft_shards = N): then the nat
 * side of the services (their service-, local-, external- and endpoint-
 * chains, affinity sets and service-ips / service-nodeports elements, with
 * their own nat base chains) is spread over "kube-proxy-1" .. "kube-proxy-N",
 * and "kube-proxy" keeps the filter side and masquerading. The kernel
 * validates a table's whole jump graph on every commit that adds a jump,
 * per table: a change then costs the validation of one shard. */
#define NFTIR_TABLE_NAME_MAX 24
#define NFTIR_TABLES_MAX 64             /* shards */
const char *nftir_table_name(unsigned idx, char out[NFTIR_TABLE_NAME_MAX]);
/* The index of one of kproxy's tables by its name, or -1. */
int nftir_table_index(const char *name);
/* Whether a map is of the nat side (a shard's, when there are shards). */
bool nftir_nat_map(const char *name);

/* What the renderer writes to. family is 4 or 6 for every table. */
struct nftir_sink {
        void (*table)(void *ud, unsigned idx);
        void (*set)(void *ud, const struct nftir_set *s);
        void (*chain)(void *ud, const struct nftir_chain *c);
        void (*elem)(void *ud, const struct nftir_elem *e);
        void *ud;
        /* The sink only compares digests and names' rests (nftsync's
         * resync): derived names may come with their 8 characters unset
         * ("********"), which spares a SHA-256 per name. */
        bool unhashed;
};

/* The nft script lines of one object, appended to out ("add ... \n"). */
void nftir_format_table(uint8_t family, unsigned table, struct buf *out);
void nftir_format_set(uint8_t family, const struct nftir_set *s, struct buf *out);
/* "add chain ..." only; the rules are nftir_format_rule()'s. */
void nftir_format_chain(uint8_t family, const struct nftir_chain *c, struct buf *out);
void nftir_format_rule(uint8_t family, const struct nftir_chain *chain, const struct nftir_rule *r, struct buf *out);
void nftir_format_elem(uint8_t family, const struct nftir_elem *e, struct buf *out);

/* 64-bit digests of what a chain holds (its rules; not its name) and of
 * what an element maps to (not its key), for telling unchanged objects
 * from changed ones without keeping them. */
uint64_t nftir_chain_hash(const struct nftir_chain *c);
uint64_t nftir_elem_value_hash(const struct nftir_elem *e);

/* Appends a name's two parts to out; returns out. */
const char *nftir_name_join(const struct nftir_name *n, char *out, size_t len);
