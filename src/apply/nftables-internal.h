/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What the files of nftables mode's kernel access share, and nothing else
 * of kproxy uses (apply/nftables.h is the interface): the handle's layout
 * and the two ways of asking the kernel something (nftables-handle.c).
 */
#include <libmnl/libmnl.h>
#include <stddef.h>
#include <stdint.h>

#include "apply/nftables-link.h"

#define NFTABLES_RECV_BUF (64 * 1024)

struct nftables {
        nftables_link_open_fn open;     /* how more links to the same kernel are opened */
        void *kernel;
        struct nftables_link *link;     /* batches, dumps, single requests */
        uint32_t portid;                /* link's */
        uint32_t seq;                   /* for dumps and single requests */
        struct nftables_link *probe;    /* nftables_rule_digests()'s, opened on first use */
        size_t probe_read;              /* its reads, the size of the kernel's dump messages; 0: default */
};

/* A request of type (NFT_MSG_GET*) for the family (4 or 6) in buf, with
 * the next sequence number; the caller adds its attributes. */
struct nlmsghdr *nftables_request(struct nftables *n, char *buf, uint16_t type, uint16_t flags, uint8_t family);
/* Sends nlh on n's link and runs cb (may be NULL) over the replies until
 * the dump ends or the request is acknowledged. Returns 0 or -errno (the
 * kernel's error, if it answered with one). */
int nftables_talk(struct nftables *n, struct nlmsghdr *nlh, mnl_cb_t cb, void *data);
/* The error of an NLMSG_ERROR message (0: an acknowledgement). */
int nftables_reply_error(const struct nlmsghdr *nlh);
