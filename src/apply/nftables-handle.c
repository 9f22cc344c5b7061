/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of nftables mode's kernel access: kproxy talks nf_tables
 * netlink itself, so a change costs what the kernel does and no more. `nft
 * -f` (and libnftables) first reads the whole ruleset into a cache, which at
 * 20k services is more than half of a one-element change; kproxy keeps its
 * own state and sends only the batch. A batch is one transaction: the
 * kernel applies all of it or none.
 *
 * This file is the handle: the link it talks through (apply/nftables-link.h:
 * the kernel's socket, or a test's in-memory kernel) and the one way of
 * asking the kernel something and reading its answer, which the dumps,
 * the reading back of chains and the cleanup share.
 */
#include <netinet/in.h>

#include "apply/nftables-handle.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdlib.h>
#include <time.h>

#include "apply/nftables-internal.h"
#include "util/cleanup.h"

int nftables_open_on(nftables_link_open_fn open, void *kernel, struct nftables **ret) {
        struct nftables *n = calloc(1, sizeof *n);
        int r;

        if (!n)
                return -ENOMEM;
        n->open = open;
        n->kernel = kernel;
        r = open(kernel, 0, &n->link);
        if (r < 0) {
                free(n);
                return r;
        }
        n->portid = n->link->ops->portid(n->link);
        n->seq = (uint32_t) time(NULL);
        *ret = n;
        return 0;
}

int nftables_open(struct nftables **ret) {
        return nftables_open_on(nftables_link_socket, NULL, ret);
}

struct nftables *nftables_close(struct nftables *n) {
        if (!n)
                return NULL;
        if (n->link)
                n->link->ops->free(n->link);
        if (n->probe)
                n->probe->ops->free(n->probe);
        free(n);
        return NULL;
}

uint32_t nftables_portid(const struct nftables *n) {
        return n->portid;
}

struct nlmsghdr *nftables_request(struct nftables *n, char *buf, uint16_t type, uint16_t flags, uint8_t family) {
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | type;
        nlh->nlmsg_flags = NLM_F_REQUEST | flags;
        nlh->nlmsg_seq = ++n->seq;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
        g->nfgen_family = family == 6 ? NFPROTO_IPV6 : NFPROTO_IPV4;
        g->version = NFNETLINK_V0;
        return nlh;
}

int nftables_talk(struct nftables *n, struct nlmsghdr *nlh, mnl_cb_t cb, void *data) {
        _cleanup_free_ char *rbuf = malloc(NFTABLES_RECV_BUF);
        uint32_t seq = nlh->nlmsg_seq;
        int r;

        if (!rbuf)
                return -ENOMEM;
        r = n->link->ops->send(n->link, nlh, nlh->nlmsg_len);
        if (r < 0)
                return r;
        for (;;) {
                ssize_t len = n->link->ops->recv(n->link, rbuf, NFTABLES_RECV_BUF);
                if (len < 0)
                        return (int) len;
                r = mnl_cb_run(rbuf, (size_t) len, seq, n->portid, cb, data);
                /* errno is the negated error of the reply: INT_MIN
                 * stays negative (and is not an errno). */
                if (r < 0)
                        return errno > 0 ? -errno : -EPROTO;
                if (r == MNL_CB_STOP)
                        return 0;
        }
}

int nftables_reply_error(const struct nlmsghdr *nlh) {
        const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
        if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof *e))
                return -EBADMSG;
        /* A negated errno, or 0 for an acknowledgement; anything else
         * (INT_MIN cannot even be negated) is not the kernel's. */
        return e->error <= 0 && e->error >= -4095 ? e->error : -EPROTO;
}
