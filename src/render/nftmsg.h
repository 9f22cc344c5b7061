/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The netlink back-end of the nftables description: nf_tables messages for
 * kproxy's tables (render/nftir.h), appended to a buffer that becomes one batch
 * (transaction). Pure: builds bytes, never sends them (apply/nftables.h
 * does). The expressions are the ones nft 1.0.6 generates for the same
 * script text, so `nft list` shows the daemon's table exactly as it shows
 * `nft -f` of `kproxy render`'s output (tests/netns/test-nftmsg.sh proves
 * it against the kernel).
 *
 * Messages are encoded with libmnl's attribute helpers straight into one
 * growing buffer: no allocation per rule (libnftnl's object model costs
 * about 0.6 µs per rule, measured: half a second at 20k services).
 *
 * This header is the message stream (nftmsg.c) and, for its callers, the
 * one include of the whole encoder:
 *
 *   nftmsg-object.h    the table, sets and maps, chains, and their removal
 *   nftmsg-rule.h      a chain's rules (nftmsg-interval.h: their anonymous sets)
 *   nftmsg-elem.h      map and set elements
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "render/nftmsg-elem.h"
#include "render/nftmsg-object.h"
#include "render/nftmsg-rule.h"
#include "util/buf.h"

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

void nftmsg_init(struct nftmsg *m, uint8_t family, uint32_t seq);
void nftmsg_done(struct nftmsg *m);
/* Forgets the messages, keeps the buffer and the counters. */
void nftmsg_clear(struct nftmsg *m);
/* m numbers its sets in other's count from now on (other must outlive m's use). */
void nftmsg_share_set_ids(struct nftmsg *m, struct nftmsg *other);

/* A batch is begin, messages, end. The end asks the kernel to acknowledge
 * the last message: its answer comes after the commit, so it marks the end
 * of the kernel's replies (apply/nftables-commit.c waits for it). */
void nftmsg_batch_begin(struct nftmsg *m);
void nftmsg_batch_end(struct nftmsg *m);

/* Appends src's messages (whole, from another nftmsg of the same family)
 * to m, renumbering them in m's sequence. */
void nftmsg_append(struct nftmsg *m, const struct nftmsg *src);
/* The same for the messages in bytes [off, off + len) of src. */
void nftmsg_append_range(struct nftmsg *m, const struct nftmsg *src, size_t off, size_t len);
