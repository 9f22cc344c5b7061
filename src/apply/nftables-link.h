/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What struct nftables talks through: one netlink channel to nf_tables.
 * The daemon's is a NETLINK_NETFILTER socket (nftables_link_socket());
 * the unit tests give it an in-memory kernel instead (tests/unit/nft-fake.c),
 * so that everything above the channel (the batch's replies, the dumps,
 * the reading back of chains, the sync's decisions) runs as it does
 * against the kernel, without root and in microseconds.
 *
 * A link carries whole netlink messages both ways, as the socket does: the
 * kernel processes what is sent inside the send (nf_tables does its work
 * in sendmsg()), so its replies are queued by the time send() returns.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct nftables_link;

struct nftables_link_ops {
        /* Sends len bytes of whole messages (a batch, or requests).
         * Returns 0 or -errno. */
        int (*send)(struct nftables_link *l, const void *buf, size_t len);
        /* Reads queued replies: whole messages, at most len bytes. Returns
         * the bytes read, or -errno (-EAGAIN when nothing came in time). */
        ssize_t (*recv)(struct nftables_link *l, void *buf, size_t len);
        /* The port id the kernel stamps on replies to this link, and on
         * notifications of the changes sent through it. */
        uint32_t (*portid)(const struct nftables_link *l);
        void (*free)(struct nftables_link *l);
};

/* The first member of every kind of link. */
struct nftables_link {
        const struct nftables_link_ops *ops;
};

/* Opens another channel to the same kernel: rcvbuf is the receive queue
 * the caller wants (0: the default), for a channel whose replies pile up
 * while it sends. Returns 0 or -errno. */
typedef int (*nftables_link_open_fn)(void *kernel, size_t rcvbuf, struct nftables_link **ret);

/* The kernel's: a NETLINK_NETFILTER socket with extended acks and without
 * echoed requests in errors, whose reads give up after 60 s. kernel is
 * unused (NULL). */
int nftables_link_socket(void *kernel, size_t rcvbuf, struct nftables_link **ret);
