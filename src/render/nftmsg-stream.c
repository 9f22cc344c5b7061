/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The message stream: a buffer of nf_tables messages that becomes one
 * batch, numbered in sequence, and the copying of messages from one
 * stream into another (renumbered). What each message says is the other
 * files' (nftmsg-object.c, nftmsg-rule.c, nftmsg-elem.c).
 */
#include "render/nftmsg-stream.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <string.h>
#include <sys/socket.h>

void nftmsg_init(struct nftmsg *m, uint8_t family, uint32_t seq) {
        *m = (struct nftmsg) {.family = family, .seq = seq};
        m->set_id = &m->own_set_id;
}

void nftmsg_share_set_ids(struct nftmsg *m, struct nftmsg *other) {
        m->set_id = other->set_id;
}

void nftmsg_done(struct nftmsg *m) {
        buf_done(&m->b);
}

void nftmsg_clear(struct nftmsg *m) {
        buf_clear(&m->b);
        m->n = 0;
}

static void batch_msg(struct nftmsg *m, uint16_t type) {
        buf_reserve(&m->b, 64);
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(m->b.data + m->b.len);
        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = NLM_F_REQUEST;
        nlh->nlmsg_seq = ++m->seq;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
        g->nfgen_family = AF_UNSPEC;
        g->version = NFNETLINK_V0;
        g->res_id = htons(NFNL_SUBSYS_NFTABLES);
        m->b.len += nlh->nlmsg_len;     /* not counted in n, not `last` */
}

void nftmsg_batch_begin(struct nftmsg *m) {
        batch_msg(m, NFNL_MSG_BATCH_BEGIN);
}

void nftmsg_batch_end(struct nftmsg *m) {
        if (m->n > 0)
                ((struct nlmsghdr *) (m->b.data + m->last))->nlmsg_flags |= NLM_F_ACK;
        batch_msg(m, NFNL_MSG_BATCH_END);
}

/* Pieces small enough that memcpy() keeps them in the cache: a large copy
 * bypasses it (non-temporal stores), and renumbering the messages after
 * one of 100 MB read every header back from memory (a quarter of a full
 * render, measured). */
#define APPEND_PIECE (64 * 1024)

void nftmsg_append_range(struct nftmsg *m, const struct nftmsg *src, size_t off, size_t len) {
        if (len == 0)
                return;         /* src may be an empty buffer's NULL */
        size_t o = m->b.len, end = m->b.len + len;
        buf_reserve(&m->b, len);
        while (m->b.len < end) {
                size_t piece = end - m->b.len < APPEND_PIECE ? end - m->b.len : APPEND_PIECE;
                memcpy(m->b.data + m->b.len, src->b.data + off, piece);
                m->b.len += piece;
                off += piece;
                /* The messages whose header is in: each is whole by the end. */
                while (o + NLMSG_HDRLEN <= m->b.len) {
                        struct nlmsghdr *nlh = (struct nlmsghdr *) (m->b.data + o);
                        nlh->nlmsg_seq = ++m->seq;
                        m->last = o;
                        m->n++;
                        o += NLMSG_ALIGN(nlh->nlmsg_len);
                }
        }
        m->b.data[m->b.len] = '\0';    /* as buf_put() leaves it */
}

void nftmsg_append(struct nftmsg *m, const struct nftmsg *src) {
        nftmsg_append_range(m, src, 0, src->b.len);
}
