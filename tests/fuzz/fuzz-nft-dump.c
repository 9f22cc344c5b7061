/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the kernel's side of nf_tables netlink made of the
 * input. The handle (apply/nftables-handle.c) talks through a link (the seam the
 * unit tests' in-memory kernel uses) whose replies are the input's
 * records: [u16 length][u8 flags][bytes]. Each reply's messages get the
 * sequence number of a request just sent (the input's number modulo the
 * requests in flight) and, by a flag, the handle's port id, so that the
 * readers get past libmnl's checks to their own parsing. The first byte
 * is nft_readers_run()'s mode; then every reader runs over the replies:
 * nftables_list() (chains and sets), nftables_table_use(),
 * nftables_genid(), nftables_chain_present(), the chains' read-back as
 * rule digests (apply/nftables-readback.c) and a commit's replies
 * (apply/nftables-commit.c). The seeds are a kernel's answers to the same
 * sequence (tests/fuzz/seeds/seeds-nft.c).
 *
 * The bytes of the receive buffer past what a reply filled (and its last
 * message's padding, zero, as the kernel's) are poisoned
 * (until the buffer's next read or its free; the readers' buffers are all
 * on the heap), so a reader that looks past the data it was given (a
 * message shorter than its header says) is a sanitizer report, not a read
 * of stale bytes. Each message's length is within its reply, as the
 * kernel's always are (see link_recv()).
 */
#include <errno.h>
#include <libmnl/libmnl.h>
#include <sanitizer/asan_interface.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apply/nftables.h"
#include "apply/nftables-link.h"
#include "nft-readers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PORTID 4242

struct fuzz_link {
        struct nftables_link link;
        const uint8_t **data;           /* the input, shared by the handle's links */
        size_t *left;
        uint32_t seq0, n_seq;           /* the requests of the last send */
};

static int link_send(struct nftables_link *nl, const void *buf, size_t len) {
        struct fuzz_link *l = (struct fuzz_link *) nl;
        int left = (int) len;

        l->n_seq = 0;
        for (const struct nlmsghdr *nlh = buf; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left)) {
                if (l->n_seq++ == 0)
                        l->seq0 = nlh->nlmsg_seq;
        }
        return 0;
}

static ssize_t link_recv(struct nftables_link *nl, void *buf, size_t len) {
        struct fuzz_link *l = (struct fuzz_link *) nl;
        uint16_t n;
        uint8_t flags;

        ASAN_UNPOISON_MEMORY_REGION(buf, len);
        if (*l->left < 3)
                return -EAGAIN;
        memcpy(&n, *l->data, 2);
        flags = (*l->data)[2];
        *l->data += 3;
        *l->left -= 3;
        if (n > *l->left)
                n = (uint16_t) *l->left;
        if (n > len)
                n = (uint16_t) len;
        if (n == 0)
                return -EAGAIN;         /* a socket never reads nothing */
        memcpy(buf, *l->data, n);
        *l->data += n;
        *l->left -= n;

        int left = n;
        for (struct nlmsghdr *nlh = buf; mnl_nlmsg_ok(nlh, left); nlh = (struct nlmsghdr *) mnl_nlmsg_next(nlh, &left)) {
                /* mnl_nlmsg_ok() compares nlmsg_len as an int: a length
                 * over 2 GiB passes, and mnl_nlmsg_next() wraps on it (the
                 * readers' mnl_cb_run() loops for ever). The kernel's
                 * messages are always within the datagram; so are these. */
                if (nlh->nlmsg_len > (uint32_t) left)
                        nlh->nlmsg_len = (uint32_t) left;
                if (!(flags & 1) && l->n_seq)
                        nlh->nlmsg_seq = l->seq0 + nlh->nlmsg_seq % l->n_seq;
                if (!(flags & 2))
                        nlh->nlmsg_pid = flags & 4 ? 0 : PORTID;
        }
        /* The kernel pads each message to NLMSG_ALIGN(), where libmnl's
         * attribute walks end: the padding of the last is there, zero. */
        size_t end = NLMSG_ALIGN((size_t) n) < len ? NLMSG_ALIGN((size_t) n) : len;
        memset((char *) buf + n, 0, end - n);
        ASAN_POISON_MEMORY_REGION((char *) buf + end, len - end);
        return n;
}

static uint32_t link_portid(const struct nftables_link *nl) {
        (void) nl;
        return PORTID;
}

static void link_free(struct nftables_link *nl) {
        free(nl);
}

static const struct nftables_link_ops fuzz_ops = {link_send, link_recv, link_portid, link_free};

struct input {
        const uint8_t *data;
        size_t left;
};

static int link_open(void *kernel, size_t rcvbuf, struct nftables_link **ret) {
        struct input *in = kernel;
        struct fuzz_link *l = calloc(1, sizeof *l);

        (void) rcvbuf;
        if (!l)
                return -ENOMEM;
        l->link.ops = &fuzz_ops;
        l->data = &in->data;
        l->left = &in->left;
        *ret = &l->link;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct input in = {data, size};
        struct nftables *n;

        if (size < 1)
                return 0;
        in.data++;
        in.left--;
        if (nftables_open_on(link_open, &in, &n) < 0)
                abort();
        nft_readers_run(n, data[0]);
        nftables_close(n);
        return 0;
}
