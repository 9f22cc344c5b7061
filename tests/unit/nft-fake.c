/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The in-memory nf_tables (nft-fake.h). A link's send is the kernel's
 * sendmsg(): a batch is applied, or a request answered, before it returns,
 * and the replies wait in the link's queue for its reads.
 *
 * A batch is applied to a copy of the state, message by message, as the
 * kernel's nfnetlink_rcv_batch() does: every message is tried and its
 * error (or, with NLM_F_ACK, its acknowledgement) queued; then the copy
 * replaces the state only if no message failed and the commit is not made
 * to fail. Tables are small in unit tests, so the copy, and finding
 * objects by walking arrays, cost nothing that matters.
 *
 * This file is the kernel, its links, its answers to requests and its
 * batches; the objects are nft-fake-state.c's, what a message does to them
 * nft-fake-txn.c's.
 */
#include <netinet/in.h>

#include "nft-fake.h"

#include <endian.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply/nftables-link.h"
#include "nft-fake-internal.h"
#include "util/buf.h"

#define MSG_MAX (64 * 1024)

struct nft_fake {
        struct fk_state state;
        uint32_t genid;
        uint32_t next_port;
        size_t refused;
        unsigned fail_commit_in;
        int fail_commit_err;
        char *fail_what;
        int fail_what_err;
        struct buf journal;
        size_t *txn_sizes;
        size_t n_txns;
};

struct fake_link {
        struct nftables_link link;
        struct nft_fake *k;
        uint32_t portid;
        struct buf q;           /* replies not read yet, from q_off */
        size_t q_off;
};

/* --- replies --- */

static void queue(struct fake_link *l, const struct nlmsghdr *nlh) {
        buf_put(&l->q, (const char *) nlh, NLMSG_ALIGN(nlh->nlmsg_len));
}

/* An NLMSG_ERROR about req: err, or 0 for an acknowledgement; as a socket
 * with NETLINK_CAP_ACK and NETLINK_EXT_ACK gets it. */
static void put_error(struct buf *out, uint32_t portid, const struct nlmsghdr *req, int err, const char *text) {
        char m[1024];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(m);
        nlh->nlmsg_type = NLMSG_ERROR;
        nlh->nlmsg_flags = NLM_F_CAPPED | (err && text && *text ? NLM_F_ACK_TLVS : 0);
        nlh->nlmsg_seq = req->nlmsg_seq;
        nlh->nlmsg_pid = portid;
        struct nlmsgerr *e = mnl_nlmsg_put_extra_header(nlh, sizeof *e);
        e->error = err;
        e->msg = *req;
        if (err && text && *text)
                mnl_attr_put_strz(nlh, NLMSGERR_ATTR_MSG, text);
        buf_put(out, (const char *) nlh, NLMSG_ALIGN(nlh->nlmsg_len));
}

static struct nlmsghdr *reply(char *m, struct fake_link *l, const struct nlmsghdr *req, uint16_t type, uint8_t family,
                              bool multi) {
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(m);
        nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | type;
        nlh->nlmsg_flags = multi ? NLM_F_MULTI : 0;
        nlh->nlmsg_seq = req->nlmsg_seq;
        nlh->nlmsg_pid = l->portid;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
        g->nfgen_family = family;
        g->version = NFNETLINK_V0;
        return nlh;
}

static void put_done(struct fake_link *l, const struct nlmsghdr *req) {
        char m[64];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(m);
        nlh->nlmsg_type = NLMSG_DONE;
        nlh->nlmsg_flags = NLM_F_MULTI;
        nlh->nlmsg_seq = req->nlmsg_seq;
        nlh->nlmsg_pid = l->portid;
        int *zero = mnl_nlmsg_put_extra_header(nlh, sizeof *zero);
        *zero = 0;
        queue(l, nlh);
}

static void put_blob(struct nlmsghdr *nlh, uint16_t type, const struct blob *b) {
        if (b->set)
                mnl_attr_put(nlh, type, b->len, b->p);
}

static uint32_t table_use(const struct fk_table *t) {
        uint32_t use = (uint32_t) t->n_chains;
        for (size_t i = 0; i < t->n_sets; i++)
                use += !t->sets[i]->anonymous;
        return use;
}

static void reply_table(struct fake_link *l, const struct nlmsghdr *req, const struct fk_table *t, bool multi) {
        char m[MSG_MAX];
        struct nlmsghdr *nlh = reply(m, l, req, NFT_MSG_NEWTABLE, t->family, multi);
        mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, t->name);
        mnl_attr_put_u32(nlh, NFTA_TABLE_FLAGS, htonl(t->flags));
        mnl_attr_put_u32(nlh, NFTA_TABLE_USE, htonl(table_use(t)));
        mnl_attr_put_u64(nlh, NFTA_TABLE_HANDLE, htobe64(1));
        put_blob(nlh, NFTA_TABLE_USERDATA, &t->udata);
        queue(l, nlh);
}

static void reply_chain(struct fake_link *l, const struct nlmsghdr *req, const struct fk_table *t,
                        const struct fk_chain *c, bool multi) {
        char m[MSG_MAX];
        struct nlmsghdr *nlh = reply(m, l, req, NFT_MSG_NEWCHAIN, t->family, multi);
        mnl_attr_put_strz(nlh, NFTA_CHAIN_TABLE, t->name);
        mnl_attr_put_strz(nlh, NFTA_CHAIN_NAME, c->name);
        mnl_attr_put_u64(nlh, NFTA_CHAIN_HANDLE, htobe64(c->handle));
        if (c->base) {
                /* As the kernel dumps nests: without NLA_F_NESTED. */
                struct nlattr *h = mnl_attr_nest_start(nlh, NFTA_CHAIN_HOOK);
                h->nla_type &= (uint16_t) ~NLA_F_NESTED;
                mnl_attr_put_u32(nlh, NFTA_HOOK_HOOKNUM, c->hooknum);
                mnl_attr_put_u32(nlh, NFTA_HOOK_PRIORITY, c->prio);
                mnl_attr_nest_end(nlh, h);
                mnl_attr_put_u32(nlh, NFTA_CHAIN_POLICY, c->policy);
                mnl_attr_put_strz(nlh, NFTA_CHAIN_TYPE, c->type);
        }
        mnl_attr_put_u32(nlh, NFTA_CHAIN_USE, htonl(c->use));
        put_blob(nlh, NFTA_CHAIN_USERDATA, &c->udata);
        queue(l, nlh);
}

static void reply_set(struct fake_link *l, const struct nlmsghdr *req, const struct fk_table *t,
                      const struct fk_set *s) {
        char m[MSG_MAX];
        struct nlmsghdr *nlh = reply(m, l, req, NFT_MSG_NEWSET, t->family, true);
        mnl_attr_put_strz(nlh, NFTA_SET_TABLE, t->name);
        mnl_attr_put_strz(nlh, NFTA_SET_NAME, s->name);
        mnl_attr_put_u64(nlh, NFTA_SET_HANDLE, htobe64(s->handle));
        mnl_attr_put_u32(nlh, NFTA_SET_FLAGS, htonl(s->flags));
        mnl_attr_put_u32(nlh, NFTA_SET_KEY_TYPE, htonl(s->key_type));
        mnl_attr_put_u32(nlh, NFTA_SET_KEY_LEN, htonl(s->key_len));
        if (s->flags & NFT_SET_MAP) {
                mnl_attr_put_u32(nlh, NFTA_SET_DATA_TYPE, htonl(s->data_type));
                mnl_attr_put_u32(nlh, NFTA_SET_DATA_LEN, htonl(s->data_len));
        }
        if (s->timeout)
                mnl_attr_put_u64(nlh, NFTA_SET_TIMEOUT, htobe64(s->timeout));
        put_blob(nlh, NFTA_SET_USERDATA, &s->udata);
        queue(l, nlh);
}

static void reply_rule(struct fake_link *l, const struct nlmsghdr *req, const struct fk_table *t,
                       const struct fk_chain *c, const struct fk_rule *r) {
        char m[MSG_MAX];
        struct nlmsghdr *nlh = reply(m, l, req, NFT_MSG_NEWRULE, t->family, true);
        mnl_attr_put_strz(nlh, NFTA_RULE_TABLE, t->name);
        mnl_attr_put_strz(nlh, NFTA_RULE_CHAIN, c->name);
        mnl_attr_put_u64(nlh, NFTA_RULE_HANDLE, htobe64(r->handle));
        put_blob(nlh, NFTA_RULE_EXPRESSIONS, &r->exprs);
        put_blob(nlh, NFTA_RULE_USERDATA, &r->udata);
        queue(l, nlh);
}

/* A request outside a batch: a get (one object) or a dump. */
static void request(struct fake_link *l, const struct nlmsghdr *req) {
        const struct fk_state *st = &l->k->state;
        const struct nfgenmsg *g = mnl_nlmsg_get_payload(req);
        const struct nlattr *tb[ATTRS_MAX];
        bool dump = req->nlmsg_flags & NLM_F_DUMP;
        uint8_t family = g->nfgen_family;
        fk_attrs(req, tb);

        switch (req->nlmsg_type & 0xff) {
        case NFT_MSG_GETTABLE:
                for (size_t i = 0; dump && i < st->n; i++)
                        if (st->t[i]->family == family)
                                reply_table(l, req, st->t[i], true);
                if (!dump) {
                        const struct fk_table *t = fk_table_find(st, family, fk_str(tb[NFTA_TABLE_NAME]));
                        if (!t) {
                                put_error(&l->q, l->portid, req, -ENOENT, NULL);
                                return;
                        }
                        reply_table(l, req, t, false);
                }
                break;
        case NFT_MSG_GETCHAIN:
                for (size_t i = 0; dump && i < st->n; i++)
                        for (size_t j = 0; st->t[i]->family == family && j < st->t[i]->n_chains; j++)
                                reply_chain(l, req, st->t[i], st->t[i]->chains[j], true);
                if (!dump) {
                        const struct fk_table *t = fk_table_find(st, family, fk_str(tb[NFTA_CHAIN_TABLE]));
                        const struct fk_chain *c = fk_chain_find(t, fk_str(tb[NFTA_CHAIN_NAME]), NULL);
                        if (!c) {
                                put_error(&l->q, l->portid, req, -ENOENT, NULL);
                                return;
                        }
                        reply_chain(l, req, t, c, false);
                }
                break;
        case NFT_MSG_GETSET: {
                const struct fk_table *t = fk_table_find(st, family, fk_str(tb[NFTA_SET_TABLE]));
                for (size_t i = 0; t && i < t->n_sets; i++)
                        reply_set(l, req, t, t->sets[i]);
                break;
        }
        case NFT_MSG_GETRULE: {
                const struct fk_table *t = fk_table_find(st, family, fk_str(tb[NFTA_RULE_TABLE]));
                const struct fk_chain *c = fk_chain_find(t, fk_str(tb[NFTA_RULE_CHAIN]), NULL);
                for (size_t i = 0; c && i < c->n_rules; i++)
                        reply_rule(l, req, t, c, &c->rules[i]);
                break;
        }
        case NFT_MSG_GETGEN: {
                char m[256];
                struct nlmsghdr *nlh = reply(m, l, req, NFT_MSG_NEWGEN, AF_UNSPEC, false);
                mnl_attr_put_u32(nlh, NFTA_GEN_ID, htonl(l->k->genid));
                queue(l, nlh);
                break;
        }
        default:
                put_error(&l->q, l->portid, req, -EOPNOTSUPP, "the fake kernel does not answer this request");
                return;
        }
        if (dump)
                put_done(l, req);
        else if (req->nlmsg_flags & NLM_F_ACK)
                put_error(&l->q, l->portid, req, 0, NULL);
}

/* --- batches --- */

/* The messages between begin and end (exclusive), as nfnetlink runs a
 * batch: each tried, its error or acknowledgement queued after the
 * commit's own answer. */
static void batch(struct fake_link *l, const struct nlmsghdr *begin, const char *from, const char *to) {
        struct nft_fake *k = l->k;
        struct fk_state copy;
        struct fk_txn tx = {&copy, NULL, 0, BUF_INIT, ""};
        struct buf answers = BUF_INIT;
        size_t n = 0;
        bool failed = false;

        fk_state_copy(&k->state, &copy);
        for (const char *p = from; p < to;) {
                const struct nlmsghdr *nlh = (const struct nlmsghdr *) p;
                size_t before = tx.journal.len;
                tx.err[0] = '\0';
                int err = fk_apply(&tx, nlh);
                if (err == 0 && k->fail_what && tx.journal.data && strstr(tx.journal.data + before, k->fail_what)) {
                        err = k->fail_what_err;
                        snprintf(tx.err, sizeof tx.err, "injected failure");
                        free(k->fail_what);
                        k->fail_what = NULL;
                }
                failed |= err != 0;
                if (err || (nlh->nlmsg_flags & NLM_F_ACK))
                        put_error(&answers, l->portid, nlh, err, tx.err);
                n++;
                p += NLMSG_ALIGN(nlh->nlmsg_len);
        }
        int commit = 0;
        if (k->fail_commit_in && --k->fail_commit_in == 0)
                commit = k->fail_commit_err;
        if (!failed && commit)
                put_error(&l->q, l->portid, begin, commit, "injected failure of the commit");
        if (failed || commit) {
                k->refused++;
                fk_state_done(&copy);
        } else {
                fk_state_done(&k->state);
                k->state = copy;
                k->genid++;
                k->txn_sizes = fk_push(k->txn_sizes, &k->n_txns, sizeof *k->txn_sizes);
                k->txn_sizes[k->n_txns - 1] = n;
                if (tx.journal.len)
                        buf_put(&k->journal, tx.journal.data, tx.journal.len);
        }
        buf_put(&l->q, answers.data ? answers.data : "", answers.len);
        buf_done(&answers);
        fk_txn_done(&tx);
}

/* --- the link --- */

static int fake_send(struct nftables_link *link, const void *buf, size_t len) {
        struct fake_link *l = (struct fake_link *) link;
        const char *p = buf, *end = p + len;
        while (p < end) {
                const struct nlmsghdr *nlh = (const struct nlmsghdr *) p;
                if (nlh->nlmsg_len < NLMSG_HDRLEN || p + nlh->nlmsg_len > end)
                        return -EINVAL;
                if (nlh->nlmsg_type != NFNL_MSG_BATCH_BEGIN) {
                        request(l, nlh);
                        p += NLMSG_ALIGN(nlh->nlmsg_len);
                        continue;
                }
                const char *from = p + NLMSG_ALIGN(nlh->nlmsg_len), *q = from;
                while (q < end && ((const struct nlmsghdr *) q)->nlmsg_type != NFNL_MSG_BATCH_END)
                        q += NLMSG_ALIGN(((const struct nlmsghdr *) q)->nlmsg_len);
                if (q >= end)
                        return -EINVAL;         /* a batch without its end */
                batch(l, nlh, from, q);
                p = q + NLMSG_ALIGN(((const struct nlmsghdr *) q)->nlmsg_len);
        }
        return 0;
}

static ssize_t fake_recv(struct nftables_link *link, void *buf, size_t len) {
        struct fake_link *l = (struct fake_link *) link;
        size_t n = 0;
        while (l->q_off + n < l->q.len) {
                const struct nlmsghdr *nlh = (const struct nlmsghdr *) (l->q.data + l->q_off + n);
                size_t size = NLMSG_ALIGN(nlh->nlmsg_len);
                if (n + size > len)
                        break;
                n += size;
        }
        if (n == 0)     /* nothing will come: the kernel answered everything in the send */
                return l->q_off < l->q.len ? -ENOSPC : -EAGAIN;
        memcpy(buf, l->q.data + l->q_off, n);
        l->q_off += n;
        if (l->q_off == l->q.len) {
                buf_clear(&l->q);
                l->q_off = 0;
        }
        return (ssize_t) n;
}

static uint32_t fake_portid(const struct nftables_link *link) {
        return ((const struct fake_link *) link)->portid;
}

static void fake_free(struct nftables_link *link) {
        struct fake_link *l = (struct fake_link *) link;
        if (!l)
                return;
        buf_done(&l->q);
        free(l);
}

static const struct nftables_link_ops fake_ops = {fake_send, fake_recv, fake_portid, fake_free};

int nft_fake_open(void *kernel, size_t rcvbuf, struct nftables_link **ret) {
        struct nft_fake *k = kernel;
        struct fake_link *l = fk_xcalloc(1, sizeof *l);
        (void) rcvbuf;
        l->link.ops = &fake_ops;
        l->k = k;
        l->portid = ++k->next_port;
        *ret = &l->link;
        return 0;
}

/* --- the kernel --- */

struct nft_fake *nft_fake_new(void) {
        struct nft_fake *k = fk_xcalloc(1, sizeof *k);
        k->next_port = 1000;
        return k;
}

struct nft_fake *nft_fake_free(struct nft_fake *k) {
        if (!k)
                return NULL;
        fk_state_done(&k->state);
        free(k->fail_what);
        free(k->txn_sizes);
        buf_done(&k->journal);
        free(k);
        return NULL;
}

void nft_fake_fail_commit(struct nft_fake *k, unsigned n, int err) {
        k->fail_commit_in = n;
        k->fail_commit_err = err;
}

void nft_fake_fail_object(struct nft_fake *k, const char *what, int err) {
        free(k->fail_what);
        k->fail_what = fk_xstrdup(what);
        k->fail_what_err = err;
}

uint32_t nft_fake_genid(const struct nft_fake *k) {
        return k->genid;
}

size_t nft_fake_refused(const struct nft_fake *k) {
        return k->refused;
}

size_t nft_fake_txn_messages(const struct nft_fake *k, uint32_t i) {
        return i < k->n_txns ? k->txn_sizes[i] : 0;
}

const char *nft_fake_journal(const struct nft_fake *k) {
        return k->journal.data ? k->journal.data : "";
}

void nft_fake_journal_clear(struct nft_fake *k) {
        buf_clear(&k->journal);
}

size_t nft_fake_journal_count(const struct nft_fake *k, const char *what) {
        size_t n = 0;
        for (const char *l = nft_fake_journal(k); *l;) {
                const char *nl = strchr(l, '\n');
                size_t len = nl ? (size_t) (nl - l) : strlen(l);
                char line[1024];
                snprintf(line, sizeof line, "%.*s", (int) len, l);
                n += strstr(line, what) != NULL;
                l += len + (nl != NULL);
        }
        return n;
}

static int cmp_table(const void *a, const void *b) {
        const struct fk_table *x = *(const struct fk_table *const *) a, *y = *(const struct fk_table *const *) b;
        return x->family != y->family ? x->family - y->family : strcmp(x->name, y->name);
}

void nft_fake_text(const struct nft_fake *k, struct buf *out) {
        const struct fk_table **t = fk_xcalloc(k->state.n, sizeof *t);
        memcpy(t, k->state.t, k->state.n * sizeof *t);
        qsort(t, k->state.n, sizeof *t, cmp_table);
        for (size_t i = 0; i < k->state.n; i++) {
                buf_printf(out, "table %s %s flags %u\n", fk_family_name(t[i]->family), t[i]->name, t[i]->flags);
                fk_table_text(t[i], out);
        }
        free(t);
}

static uint8_t nfproto(uint8_t family) {
        return family == 6 ? NFPROTO_IPV6 : NFPROTO_IPV4;
}

int nft_fake_has_chain(const struct nft_fake *k, uint8_t family, const char *table, const char *chain) {
        const struct fk_table *t = fk_table_find(&k->state, nfproto(family), table);
        return !t ? -ENOENT : fk_chain_find(t, chain, NULL) != NULL;
}

int nft_fake_has_elem(const struct nft_fake *k, uint8_t family, const char *table, const char *set,
                      const uint8_t *key, size_t key_len) {
        const struct fk_set *s = fk_set_find(fk_table_find(&k->state, nfproto(family), table), set, NULL);
        return !s ? -ENOENT : fk_elem_find(s, key, key_len, 0, NULL) != NULL;
}

int nft_fake_rules(const struct nft_fake *k, uint8_t family, const char *table, const char *chain) {
        const struct fk_chain *c = fk_chain_find(fk_table_find(&k->state, nfproto(family), table), chain, NULL);
        return c ? (int) c->n_rules : -ENOENT;
}
