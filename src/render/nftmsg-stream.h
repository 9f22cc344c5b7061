/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The message stream the encoder writes into (render/nftmsg.h): one
 * growing buffer of nf_tables messages, framed as a batch, appended to
 * other streams of the same family. The bottom of the encoder.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
