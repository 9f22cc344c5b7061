/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Committing a batch. Replies: the batch's last message carries NLM_F_ACK,
 * and the kernel answers it only after the commit (or the abort), so
 * reading up to that answer collects every error of the batch. The kernel
 * processes the batch inside the send, so the replies are queued by the
 * time it returns.
 */
#include <stdint.h>

#include "apply/nftables-commit.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply/nftables-internal.h"
#include "render/nftmsg.h"
#include "util/cleanup.h"

const char *nftables_msg_type_name(uint16_t type) {
        static const char *const names[NFT_MSG_MAX] = {
                [NFT_MSG_NEWTABLE] = "add table",    [NFT_MSG_DELTABLE] = "delete table",
                [NFT_MSG_NEWCHAIN] = "add chain",    [NFT_MSG_DELCHAIN] = "delete chain",
                [NFT_MSG_NEWRULE] = "add rule",      [NFT_MSG_DELRULE] = "flush chain",
                [NFT_MSG_NEWSET] = "add set",        [NFT_MSG_DELSET] = "delete set",
                [NFT_MSG_NEWSETELEM] = "add element", [NFT_MSG_DELSETELEM] = "delete element",
        };
        type &= 0xff;
        return type < NFT_MSG_MAX && names[type] ? names[type] : "message";
}

/* The object a message is about: the chain of a rule, the set of an
 * element, else the object's own name. */
static const char *msg_object(const struct nlmsghdr *nlh) {
        uint16_t want;
        switch (nlh->nlmsg_type & 0xff) {
        case NFT_MSG_NEWCHAIN:
        case NFT_MSG_DELCHAIN:
                want = NFTA_CHAIN_NAME;
                break;
        case NFT_MSG_NEWTABLE:
        case NFT_MSG_DELTABLE:
                want = NFTA_TABLE_NAME;
                break;
        default:        /* rules: chain; sets: name; elements: set */
                want = 2;
                break;
        }
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                if (mnl_attr_get_type(a) == want && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
                        return mnl_attr_get_str(a);
        }
        return "?";
}

static const struct nlmsghdr *find_seq(const struct nftmsg *m, uint32_t seq) {
        for (size_t off = 0; off < m->b.len;) {
                const struct nlmsghdr *nlh = (const struct nlmsghdr *) (m->b.data + off);
                if (nlh->nlmsg_seq == seq)
                        return nlh;
                off += NLMSG_ALIGN(nlh->nlmsg_len);
        }
        return NULL;
}

/* The kernel's extended-ack text, if it sent one. */
static const char *ext_msg(const struct nlmsghdr *nlh) {
        if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
                return NULL;
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(struct nlmsgerr)) {
                if (mnl_attr_get_type(a) == NLMSGERR_ATTR_MSG && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
                        return mnl_attr_get_str(a);
        }
        return NULL;
}

/* The first error's description in err: the failing message's type and
 * object, or the commit's as a whole (reported against the batch begin). */
static void describe(const struct nftmsg *m, const struct nlmsghdr *nlh, int r, uint32_t first_seq, char *err,
                     size_t errlen) {
        const struct nlmsghdr *bad = find_seq(m, nlh->nlmsg_seq);
        const char *text = ext_msg(nlh);
        if (bad && nlh->nlmsg_seq != first_seq)
                snprintf(err, errlen, "%s %s: %s%s%s", nftables_msg_type_name(bad->nlmsg_type), msg_object(bad),
                         strerror(-r), text ? ": " : "", text ? text : "");
        else
                snprintf(err, errlen, "commit: %s%s%s", strerror(-r), text ? ": " : "", text ? text : "");
}

int nftables_commit(struct nftables *n, const struct nftmsg *m, char *err, size_t errlen) {
        _cleanup_free_ char *rbuf = NULL;
        const struct nlmsghdr *first = (const struct nlmsghdr *) m->b.data;
        uint32_t first_seq, last_seq;
        int r = 0;

        if (errlen)
                err[0] = '\0';
        if (m->n == 0)
                return 0;       /* nothing to change */
        first_seq = first->nlmsg_seq;
        last_seq = ((const struct nlmsghdr *) (m->b.data + m->last))->nlmsg_seq;

        r = n->link->ops->send(n->link, m->b.data, m->b.len);
        if (r < 0)
                return r;
        rbuf = malloc(NFTABLES_RECV_BUF);
        if (!rbuf)
                return -ENOMEM;
        for (;;) {
                ssize_t len = n->link->ops->recv(n->link, rbuf, NFTABLES_RECV_BUF);
                if (len < 0)
                        return len == -EAGAIN ? -ETIMEDOUT : (int) len;
                int left = (int) len;
                for (const struct nlmsghdr *nlh = (const struct nlmsghdr *) rbuf; mnl_nlmsg_ok(nlh, left);
                     nlh = mnl_nlmsg_next(nlh, &left)) {
                        if (nlh->nlmsg_type != NLMSG_ERROR || nlh->nlmsg_seq < first_seq ||
                            nlh->nlmsg_seq > last_seq)
                                continue;       /* not about this batch */
                        int e = nftables_reply_error(nlh);      /* the length checked */
                        if (e != 0 && r == 0) {
                                r = e;
                                describe(m, nlh, r, first_seq, err, errlen);
                        }
                        if (nlh->nlmsg_seq == last_seq)
                                return r;
                }
        }
}
