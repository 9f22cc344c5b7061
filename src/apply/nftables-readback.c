/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading chains back. The reads go on a link of their own (the probe),
 * opened on first use: its small reads keep the kernel's dump messages
 * small (the kernel sizes them by the largest read so far on the socket),
 * and a round of lookups sent at once queues its answers there.
 */
#include <netinet/in.h>

#include "apply/nftables-readback.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdlib.h>
#include <string.h>

#include "apply/nftables-internal.h"
#include "util/cleanup.h"
#include "util/hmap.h"

/* A round's answers wait in the socket's queue until the send returns: a
 * few hundred bytes each (the kernel trims them), so 128 stay far below
 * the queue's size, raised to PROBE_RCVBUF where allowed. */
#define PROBE_ROUND 128
#define PROBE_RCVBUF (4 * 1024 * 1024)
#define PROBE_RECV_BUF 8192     /* the default of probe_read */

/* Reads replies until fn, called for each message, says it has seen the
 * last (1) or fails (-errno). */
static int read_replies(const struct nftables *nft, char *rbuf, int (*fn)(const struct nlmsghdr *nlh, void *ctx),
                        void *ctx) {
        for (;;) {
                ssize_t len = nft->probe->ops->recv(nft->probe, rbuf, nft->probe_read);
                if (len < 0)
                        return (int) len;
                int left = (int) len;
                for (const struct nlmsghdr *nlh = (const void *) rbuf; mnl_nlmsg_ok(nlh, left);
                     nlh = mnl_nlmsg_next(nlh, &left)) {
                        int r = fn(nlh, ctx);
                        if (r != 0)
                                return r < 0 ? r : 0;
                }
        }
}

struct lookups {
        uint32_t seq0;
        size_t n, pending;
        uint64_t *spec;         /* 0: no such chain */
};

static int on_lookup(const struct nlmsghdr *nlh, void *ctx) {
        struct lookups *l = ctx;
        uint32_t i = nlh->nlmsg_seq - l->seq0;
        if (i >= l->n)
                return 0;
        if (nlh->nlmsg_type == NLMSG_ERROR) {
                int err = nftables_reply_error(nlh);
                if (err == 0)
                        return 0;
                if (err != -ENOENT)
                        return err;
                l->spec[i] = 0;
        } else if ((nlh->nlmsg_type & 0xff) == NFT_MSG_NEWCHAIN) {
                l->spec[i] = nftables_chain_spec(nlh);
        } else {
                return 0;
        }
        return --l->pending == 0;
}

/* Which of names[0..n) exist: their lookups (consecutive sequence
 * numbers) in one send on n's probe link; spec[i] set (0: none). */
static int probe_chains(struct nftables *nft, uint8_t family, const char *table, const char *const *names, size_t n,
                        uint64_t *spec, char *rbuf) {
        if (n == 0)
                return 0;
        _cleanup_free_ char *buf = malloc(n * (64 + NFT_CHAIN_MAXNAMELEN));
        size_t off = 0;
        if (!buf)
                return -ENOMEM;
        uint32_t seq0 = nft->seq + 1;
        for (size_t i = 0; i < n; i++) {
                struct nlmsghdr *nlh = nftables_request(nft, buf + off, NFT_MSG_GETCHAIN, 0, family);
                mnl_attr_put_strz(nlh, NFTA_CHAIN_TABLE, table);
                mnl_attr_put_strz(nlh, NFTA_CHAIN_NAME, names[i]);
                off += nlh->nlmsg_len;
        }
        int r = nft->probe->ops->send(nft->probe, buf, off);
        if (r < 0)
                return r;
        struct lookups l = {seq0, n, n, spec};
        return read_replies(nft, rbuf, on_lookup, &l);
}

struct rules_dump {
        uint32_t seq;
        struct nftables_chain_digest *d;
        nftables_target_fn fn;
        void *userdata;
};

static int on_rule(const struct nlmsghdr *nlh, void *ctx) {
        struct rules_dump *rd = ctx;
        if (nlh->nlmsg_seq != rd->seq)
                return 0;
        if (nlh->nlmsg_flags & NLM_F_DUMP_INTR)
                return -EINTR;  /* the table changed meanwhile */
        if (nlh->nlmsg_type == NLMSG_DONE)
                return 1;
        if (nlh->nlmsg_type == NLMSG_ERROR)
                return nftables_reply_error(nlh);        /* 0: an acknowledgement */
        if ((nlh->nlmsg_type & 0xff) == NFT_MSG_NEWRULE) {
                rd->d->digest = nftables_rule_msg_digest(rd->d->digest, nlh);
                if (rd->fn)
                        nftables_rule_targets(nlh, rd->fn, rd->userdata);
        }
        return 0;
}

/* The rules of one chain, folded into d (a dump on n's probe link). */
static int probe_rules(struct nftables *nft, uint8_t family, const char *table, const char *name,
                       struct nftables_chain_digest *d, char *rbuf, nftables_target_fn fn, void *userdata) {
        char buf[128 + NFT_CHAIN_MAXNAMELEN];
        struct nlmsghdr *req = nftables_request(nft, buf, NFT_MSG_GETRULE, NLM_F_DUMP, family);
        mnl_attr_put_strz(req, NFTA_RULE_TABLE, table);
        mnl_attr_put_strz(req, NFTA_RULE_CHAIN, name);
        int r = nft->probe->ops->send(nft->probe, req, req->nlmsg_len);
        if (r < 0)
                return r;
        struct rules_dump rd = {req->nlmsg_seq, d, fn, userdata};
        return read_replies(nft, rbuf, on_rule, &rd);
}

int nftables_rule_digests(struct nftables *n, uint8_t family, const char *table, const char *const *names,
                          size_t n_names, struct hmap *ret) {
        return nftables_rule_digests_walk(n, family, table, names, n_names, ret, NULL, NULL);
}

int nftables_rule_digests_walk(struct nftables *n, uint8_t family, const char *table, const char *const *names,
                               size_t n_names, struct hmap *ret, nftables_target_fn fn, void *userdata) {
        if (!n->probe_read)
                n->probe_read = PROBE_RECV_BUF;
        _cleanup_free_ char *rbuf = malloc(n->probe_read);
        uint64_t spec[PROBE_ROUND];
        int r = 0;

        if (!rbuf)
                return -ENOMEM;
        /* Its own link: its small reads keep the kernel's dump messages
         * small (it sizes them by the largest read so far). */
        if (!n->probe && (r = n->open(n->kernel, PROBE_RCVBUF, &n->probe)) < 0) {
                n->probe = NULL;
                return r;
        }
        for (size_t done = 0; r == 0 && done < n_names; done += PROBE_ROUND) {
                size_t k = n_names - done < PROBE_ROUND ? n_names - done : PROBE_ROUND;
                r = probe_chains(n, family, table, names + done, k, spec, rbuf);
                for (size_t i = 0; r == 0 && i < k; i++) {
                        if (!spec[i])
                                continue;
                        const char *name = names[done + i];
                        struct nftables_chain_digest *d = malloc(sizeof *d + strlen(name) + 1);
                        if (!d) {
                                r = -ENOMEM;
                                break;
                        }
                        d->digest = NFTABLES_DIGEST_INIT;
                        d->spec = spec[i];
                        strcpy(d->name, name);
                        free(hmap_put(ret, d->name, d));
                        r = probe_rules(n, family, table, name, d, rbuf, fn, userdata);
                }
        }
        if (r < 0) {
                /* Replies of an interrupted round may still be queued. */
                n->probe->ops->free(n->probe);
                n->probe = NULL;
        }
        return r;
}

void nftables_set_dump_messages(struct nftables *n, size_t bytes) {
        if (!n->probe)
                n->probe_read = bytes;
}
