/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The netlink back-end of the nftables description: nf_tables messages for
 * kproxy's tables (render/nftir.h), appended to a buffer that becomes one batch
 * (transaction). Pure: builds bytes, never sends them (apply/nftables.c
 * does). The expressions are the ones nft 1.0.6 generates for the same
 * script text, so `nft list` shows the daemon's table exactly as it shows
 * `nft -f` of `kproxy render`'s output (tests/netns/test-nftmsg.sh proves
 * it against the kernel).
 *
 * Messages are encoded with libmnl's attribute helpers straight into one
 * growing buffer: no allocation per rule (libnftnl's object model costs
 * about 0.6 µs per rule, measured: half a second at 20k services).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

struct nftir_set;
struct nftir_chain;
struct nftir_elem;

struct nftmsg {
        struct buf b;
        uint8_t family;         /* 4 or 6 */
        uint16_t table;         /* of the table's own and the by-name messages; objects carry theirs */
        uint32_t seq;           /* of the last message */
        uint32_t *set_id;       /* last id given to a set: ids must be unique in a
                                 * batch, so buffers appended into one share a count */
        uint32_t own_set_id;
        size_t n;               /* messages, batch markers excluded */
        size_t last;            /* offset of the last of them */
};

#define NFTMSG_KEY_MAX 24       /* ipv6_addr . inet_proto . inet_service */

void nftmsg_init(struct nftmsg *m, uint8_t family, uint32_t seq);
void nftmsg_done(struct nftmsg *m);
/* Forgets the messages, keeps the buffer and the counters. */
void nftmsg_clear(struct nftmsg *m);
/* m numbers its sets in other's count from now on (other must outlive m's use). */
void nftmsg_share_set_ids(struct nftmsg *m, struct nftmsg *other);

/* A batch is begin, messages, end. The end asks the kernel to acknowledge
 * the last message: its answer comes after the commit, so it marks the end
 * of the kernel's replies (apply/nftables.c waits for it). */
void nftmsg_batch_begin(struct nftmsg *m);
void nftmsg_batch_end(struct nftmsg *m);

void nftmsg_table(struct nftmsg *m);
void nftmsg_table_del(struct nftmsg *m);
void nftmsg_set(struct nftmsg *m, const struct nftir_set *s);
void nftmsg_set_del(struct nftmsg *m, const char *name);
/* Empties a set or map. */
void nftmsg_set_flush(struct nftmsg *m, const char *name);
/* The chain itself (created if missing, left alone if it exists). */
void nftmsg_chain(struct nftmsg *m, const struct nftir_chain *c);
/* The chain's rules, appended. */
void nftmsg_rules(struct nftmsg *m, const struct nftir_chain *c);
void nftmsg_chain_flush(struct nftmsg *m, const char *name);
void nftmsg_chain_del(struct nftmsg *m, const char *name);
void nftmsg_elem(struct nftmsg *m, const struct nftir_elem *e);
/* Deletes an element by its key (nftmsg_elem_key()'s bytes). */
void nftmsg_elem_del(struct nftmsg *m, const char *set, const uint8_t *key, size_t key_len);

/* The kernel's key of an element: address, protocol and port as the
 * concatenation lays them out (each field in 4-byte registers). Returns
 * its length. */
size_t nftmsg_elem_key(uint8_t family, const struct nftir_elem *e, uint8_t key[NFTMSG_KEY_MAX]);

/* Appends src's messages (whole, from another nftmsg of the same family)
 * to m, renumbering them in m's sequence. */
void nftmsg_append(struct nftmsg *m, const struct nftmsg *src);
/* src's element messages (nftmsg_elem()'s, one element each), as few
 * messages as possible: one per set, up to about 32 kB each. The kernel
 * looks the set up once per message, not once per element. */
void nftmsg_append_elems_merged(struct nftmsg *m, const struct nftmsg *src);
/* The same for the messages in bytes [off, off + len) of src. */
void nftmsg_append_range(struct nftmsg *m, const struct nftmsg *src, size_t off, size_t len);
