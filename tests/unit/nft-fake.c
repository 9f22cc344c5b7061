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
#include "util/buf.h"

#define KEY_MAX 64
#define MSG_MAX (64 * 1024)

struct blob {
        uint8_t *p;
        size_t len;
        bool set;
};

struct fk_elem {
        uint8_t key[KEY_MAX];
        uint32_t key_len, flags;
        bool verdict;
        int32_t code;           /* NF_DROP, NFT_GOTO, ... */
        char *chain;            /* a jump's or goto's */
        struct blob udata;
};

struct fk_set {
        char *name;
        bool anonymous;
        uint32_t flags, key_type, key_len, data_type, data_len;
        uint64_t timeout;       /* ms, 0: none */
        struct blob udata;
        struct fk_elem *el;
        size_t n_el;
        unsigned use;           /* rules that refer to it */
        uint64_t handle;
};

struct fk_rule {
        uint64_t handle;
        struct blob exprs, udata;
        char **chains;          /* jumped or gone to */
        size_t n_chains;
        char **sets;            /* looked up or updated */
        size_t n_sets;
        char *text;             /* for nft_fake_text() */
};

struct fk_chain {
        char *name;
        uint64_t handle;
        bool base;
        char *type;
        uint32_t hooknum, prio, policy;         /* as sent: network order */
        struct blob udata;
        struct fk_rule *rules;
        size_t n_rules;
        unsigned use;           /* rules and elements that point here */
};

struct fk_table {
        uint8_t family;         /* NFPROTO_IPV4, NFPROTO_IPV6 */
        char *name;
        uint32_t flags;
        struct blob udata;
        struct fk_chain **chains;
        size_t n_chains;
        struct fk_set **sets;
        size_t n_sets;
        uint64_t next_handle;
        unsigned next_anon;
};

struct fk_state {
        struct fk_table **t;
        size_t n;
};

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

/* --- memory --- */

static void *xcalloc(size_t n, size_t size) {
        void *p = calloc(n ? n : 1, size);
        if (!p)
                abort();
        return p;
}

static char *xstrdup(const char *s) {
        char *p = strdup(s);
        if (!p)
                abort();
        return p;
}

/* Appends one element of size to *v (n elements), returning it zeroed. */
static void *push(void *v, size_t *n, size_t size) {
        char *p = realloc(v, (*n + 1) * size);
        if (!p)
                abort();
        memset(p + *n * size, 0, size);
        (*n)++;
        return p;
}

static struct blob blob_dup(const void *p, size_t len) {
        struct blob b = {xcalloc(1, len), len, true};
        memcpy(b.p, p, len);
        return b;
}

static struct blob blob_of(const struct nlattr *a) {
        if (!a)
                return (struct blob) {NULL, 0, false};
        return blob_dup(mnl_attr_get_payload(a), mnl_attr_get_payload_len(a));
}

static struct blob blob_copy(const struct blob *b) {
        return b->set ? blob_dup(b->p, b->len) : (struct blob) {NULL, 0, false};
}

static char **strv_copy(char **v, size_t n) {
        char **c = xcalloc(n, sizeof *c);
        for (size_t i = 0; i < n; i++)
                c[i] = xstrdup(v[i]);
        return c;
}

static void strv_free(char **v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

static void hex(struct buf *b, const uint8_t *p, size_t len) {
        for (size_t i = 0; i < len; i++)
                buf_printf(b, "%02x", p[i]);
}

/* --- the state: freeing and copying --- */

static void elem_done(struct fk_elem *e) {
        free(e->chain);
        free(e->udata.p);
}

static void set_free(struct fk_set *s) {
        for (size_t i = 0; i < s->n_el; i++)
                elem_done(&s->el[i]);
        free(s->el);
        free(s->name);
        free(s->udata.p);
        free(s);
}

static void rule_done(struct fk_rule *r) {
        free(r->exprs.p);
        free(r->udata.p);
        strv_free(r->chains, r->n_chains);
        strv_free(r->sets, r->n_sets);
        free(r->text);
}

static void chain_free(struct fk_chain *c) {
        for (size_t i = 0; i < c->n_rules; i++)
                rule_done(&c->rules[i]);
        free(c->rules);
        free(c->name);
        free(c->type);
        free(c->udata.p);
        free(c);
}

static void table_free(struct fk_table *t) {
        for (size_t i = 0; i < t->n_chains; i++)
                chain_free(t->chains[i]);
        for (size_t i = 0; i < t->n_sets; i++)
                set_free(t->sets[i]);
        free(t->chains);
        free(t->sets);
        free(t->name);
        free(t->udata.p);
        free(t);
}

static void state_done(struct fk_state *s) {
        for (size_t i = 0; i < s->n; i++)
                table_free(s->t[i]);
        free(s->t);
        *s = (struct fk_state) {NULL, 0};
}

static struct fk_set *set_copy(const struct fk_set *s) {
        struct fk_set *c = xcalloc(1, sizeof *c);
        *c = *s;
        c->name = xstrdup(s->name);
        c->udata = blob_copy(&s->udata);
        c->el = xcalloc(s->n_el, sizeof *c->el);
        for (size_t i = 0; i < s->n_el; i++) {
                c->el[i] = s->el[i];
                c->el[i].chain = s->el[i].chain ? xstrdup(s->el[i].chain) : NULL;
                c->el[i].udata = blob_copy(&s->el[i].udata);
        }
        return c;
}

static struct fk_chain *chain_copy(const struct fk_chain *s) {
        struct fk_chain *c = xcalloc(1, sizeof *c);
        *c = *s;
        c->name = xstrdup(s->name);
        c->type = s->type ? xstrdup(s->type) : NULL;
        c->udata = blob_copy(&s->udata);
        c->rules = xcalloc(s->n_rules, sizeof *c->rules);
        for (size_t i = 0; i < s->n_rules; i++) {
                const struct fk_rule *r = &s->rules[i];
                c->rules[i] = (struct fk_rule) {r->handle, blob_copy(&r->exprs), blob_copy(&r->udata),
                                                strv_copy(r->chains, r->n_chains), r->n_chains,
                                                strv_copy(r->sets, r->n_sets), r->n_sets, xstrdup(r->text)};
        }
        return c;
}

static void state_copy(const struct fk_state *s, struct fk_state *out) {
        out->n = s->n;
        out->t = xcalloc(s->n, sizeof *out->t);
        for (size_t i = 0; i < s->n; i++) {
                const struct fk_table *t = s->t[i];
                struct fk_table *c = out->t[i] = xcalloc(1, sizeof *c);
                *c = *t;
                c->name = xstrdup(t->name);
                c->udata = blob_copy(&t->udata);
                c->chains = xcalloc(t->n_chains, sizeof *c->chains);
                for (size_t j = 0; j < t->n_chains; j++)
                        c->chains[j] = chain_copy(t->chains[j]);
                c->sets = xcalloc(t->n_sets, sizeof *c->sets);
                for (size_t j = 0; j < t->n_sets; j++)
                        c->sets[j] = set_copy(t->sets[j]);
        }
}

/* --- finding --- */

static struct fk_table *table_find(const struct fk_state *s, uint8_t family, const char *name) {
        for (size_t i = 0; name && i < s->n; i++)
                if (s->t[i]->family == family && strcmp(s->t[i]->name, name) == 0)
                        return s->t[i];
        return NULL;
}

static struct fk_chain *chain_find(const struct fk_table *t, const char *name, size_t *ret_i) {
        for (size_t i = 0; t && name && i < t->n_chains; i++)
                if (strcmp(t->chains[i]->name, name) == 0) {
                        if (ret_i)
                                *ret_i = i;
                        return t->chains[i];
                }
        return NULL;
}

static struct fk_set *set_find(const struct fk_table *t, const char *name, size_t *ret_i) {
        for (size_t i = 0; t && name && i < t->n_sets; i++)
                if (strcmp(t->sets[i]->name, name) == 0) {
                        if (ret_i)
                                *ret_i = i;
                        return t->sets[i];
                }
        return NULL;
}

static struct fk_elem *elem_find(const struct fk_set *s, const uint8_t *key, size_t len, uint32_t flags,
                                 size_t *ret_i) {
        for (size_t i = 0; i < s->n_el; i++) {
                const struct fk_elem *e = &s->el[i];
                if (e->key_len == len && memcmp(e->key, key, len) == 0 &&
                    (e->flags & NFT_SET_ELEM_INTERVAL_END) == (flags & NFT_SET_ELEM_INTERVAL_END)) {
                        if (ret_i)
                                *ret_i = i;
                        return &s->el[i];
                }
        }
        return NULL;
}

/* Drops the references a rule or an element holds. */
static void unref_chain(struct fk_table *t, const char *name) {
        struct fk_chain *c = chain_find(t, name, NULL);
        if (c && c->use > 0)
                c->use--;
}

static void unref_set(struct fk_table *t, const char *name) {
        size_t i;
        struct fk_set *s = set_find(t, name, &i);
        if (!s || s->use == 0)
                return;
        /* An anonymous set lives as long as the rule that uses it. */
        if (--s->use == 0 && s->anonymous) {
                set_free(s);
                memmove(&t->sets[i], &t->sets[i + 1], (t->n_sets - i - 1) * sizeof *t->sets);
                t->n_sets--;
        }
}

static void rule_unref(struct fk_table *t, struct fk_rule *r) {
        for (size_t i = 0; i < r->n_chains; i++)
                unref_chain(t, r->chains[i]);
        for (size_t i = 0; i < r->n_sets; i++)
                unref_set(t, r->sets[i]);
}

static void elem_unref(struct fk_table *t, struct fk_elem *e) {
        if (e->chain)
                unref_chain(t, e->chain);
}

/* --- attributes --- */

#define ATTRS_MAX 32

static void attrs(const struct nlmsghdr *nlh, const struct nlattr **tb) {
        const struct nlattr *a;
        memset(tb, 0, ATTRS_MAX * sizeof *tb);
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                if (mnl_attr_get_type(a) < ATTRS_MAX)
                        tb[mnl_attr_get_type(a)] = a;
        }
}

static void nested(const struct nlattr *n, const struct nlattr **tb) {
        const struct nlattr *a;
        memset(tb, 0, ATTRS_MAX * sizeof *tb);
        if (!n)
                return;
        mnl_attr_for_each_nested(a, n) {
                if (mnl_attr_get_type(a) < ATTRS_MAX)
                        tb[mnl_attr_get_type(a)] = a;
        }
}

static const char *str(const struct nlattr *a) {
        return a && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0 ? mnl_attr_get_str(a) : NULL;
}

static uint32_t be32(const struct nlattr *a) {
        return a && mnl_attr_get_payload_len(a) == 4 ? ntohl(mnl_attr_get_u32(a)) : 0;
}

static uint32_t raw32(const struct nlattr *a) {
        return a && mnl_attr_get_payload_len(a) == 4 ? mnl_attr_get_u32(a) : 0;
}

static const char *family_name(uint8_t family) {
        return family == NFPROTO_IPV6 ? "ip6" : family == NFPROTO_IPV4 ? "ip" : "?";
}

/* A verdict: NFTA_DATA_VERDICT's code and chain, in a data nest. */
static bool verdict_of(const struct nlattr *data, int32_t *code, const char **chain) {
        const struct nlattr *d[ATTRS_MAX], *v[ATTRS_MAX];
        nested(data, d);
        if (!d[NFTA_DATA_VERDICT])
                return false;
        nested(d[NFTA_DATA_VERDICT], v);
        *code = (int32_t) be32(v[NFTA_VERDICT_CODE]);
        *chain = str(v[NFTA_VERDICT_CHAIN]);
        return true;
}

/* --- a transaction --- */

struct set_id {
        uint32_t id;
        uint8_t family;
        char *table, *name;
};

struct txn {
        struct fk_state *st;
        struct set_id *ids;
        size_t n_ids;
        struct buf journal;
        char err[256];
};

static int fail(struct txn *tx, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Records the reason the kernel gives for err; returns err. */
static int fail(struct txn *tx, int err, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(tx->err, sizeof tx->err, fmt, ap);
        va_end(ap);
        return err;
}

/* A name for a message: NULL when the message had none. */
#define N(s) ((s) ? (s) : "?")

static void journal(struct txn *tx, const char *verb, uint8_t family, const char *table, const char *what) {
        buf_printf(&tx->journal, "%s %s %s %s", verb, family_name(family), table, what ? what : "");
}

static const char *set_by_id(struct txn *tx, uint8_t family, const char *table, uint32_t id) {
        for (size_t i = 0; i < tx->n_ids; i++)
                if (tx->ids[i].id == id && tx->ids[i].family == family && strcmp(tx->ids[i].table, table) == 0)
                        return tx->ids[i].name;
        return NULL;
}

static int new_table(struct txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX];
        attrs(nlh, tb);
        const char *name = str(tb[NFTA_TABLE_NAME]);
        if (!name)
                return fail(tx, -EINVAL, "a table without a name");
        journal(tx, "add table", family, name, NULL);
        if (table_find(tx->st, family, name))
                return nlh->nlmsg_flags & NLM_F_EXCL ? fail(tx, -EEXIST, "table %s exists", name) : 0;
        struct fk_table *t = xcalloc(1, sizeof *t);
        t->family = family;
        t->name = xstrdup(name);
        t->flags = be32(tb[NFTA_TABLE_FLAGS]);
        t->udata = blob_of(tb[NFTA_TABLE_USERDATA]);
        t->next_handle = 1;
        tx->st->t = push(tx->st->t, &tx->st->n, sizeof *tx->st->t);
        tx->st->t[tx->st->n - 1] = t;
        return 0;
}

static int del_table(struct txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX];
        attrs(nlh, tb);
        const char *name = str(tb[NFTA_TABLE_NAME]);
        journal(tx, "delete table", family, name, NULL);
        for (size_t i = 0; i < tx->st->n; i++) {
                if (tx->st->t[i]->family != family || strcmp(tx->st->t[i]->name, name ? name : "") != 0)
                        continue;
                table_free(tx->st->t[i]);
                memmove(&tx->st->t[i], &tx->st->t[i + 1], (tx->st->n - i - 1) * sizeof *tx->st->t);
                tx->st->n--;
                return 0;
        }
        return fail(tx, -ENOENT, "no table %s", N(name));
}

static int new_chain(struct txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX], *h[ATTRS_MAX];
        attrs(nlh, tb);
        nested(tb[NFTA_CHAIN_HOOK], h);
        const char *tname = str(tb[NFTA_CHAIN_TABLE]), *name = str(tb[NFTA_CHAIN_NAME]);
        const char *type = str(tb[NFTA_CHAIN_TYPE]);
        struct fk_table *t = table_find(tx->st, family, tname);
        journal(tx, "add chain", family, tname ? tname : "?", name);
        if (!t)
                return fail(tx, -ENOENT, "no table %s", N(tname));
        if (!name)
                return fail(tx, -EINVAL, "a chain without a name");
        struct fk_chain *c = chain_find(t, name, NULL);
        if (c) {
                if (nlh->nlmsg_flags & NLM_F_EXCL)
                        return fail(tx, -EEXIST, "chain %s exists", N(name));
                /* The kernel changes no hook, priority or type in place. */
                if (tb[NFTA_CHAIN_HOOK] &&
                    (!c->base || c->hooknum != raw32(h[NFTA_HOOK_HOOKNUM]) || c->prio != raw32(h[NFTA_HOOK_PRIORITY]) ||
                     strcmp(c->type ? c->type : "", type ? type : "filter") != 0))
                        return fail(tx, -EEXIST, "chain %s exists with another hook", N(name));
                if (tb[NFTA_CHAIN_POLICY])
                        c->policy = raw32(tb[NFTA_CHAIN_POLICY]);
                return 0;
        }
        c = xcalloc(1, sizeof *c);
        c->name = xstrdup(name);
        c->handle = t->next_handle++;
        c->udata = blob_of(tb[NFTA_CHAIN_USERDATA]);
        if (tb[NFTA_CHAIN_HOOK]) {
                c->base = true;
                c->type = xstrdup(type ? type : "filter");
                c->hooknum = raw32(h[NFTA_HOOK_HOOKNUM]);
                c->prio = raw32(h[NFTA_HOOK_PRIORITY]);
                c->policy = tb[NFTA_CHAIN_POLICY] ? raw32(tb[NFTA_CHAIN_POLICY]) : htonl(NF_ACCEPT);
        }
        t->chains = push(t->chains, &t->n_chains, sizeof *t->chains);
        t->chains[t->n_chains - 1] = c;
        return 0;
}

static void chain_flush(struct fk_table *t, struct fk_chain *c) {
        for (size_t i = 0; i < c->n_rules; i++) {
                rule_unref(t, &c->rules[i]);
                rule_done(&c->rules[i]);
        }
        c->n_rules = 0;
}

static int del_chain(struct txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX];
        attrs(nlh, tb);
        const char *tname = str(tb[NFTA_CHAIN_TABLE]), *name = str(tb[NFTA_CHAIN_NAME]);
        struct fk_table *t = table_find(tx->st, family, tname);
        size_t i;
        struct fk_chain *c = chain_find(t, name, &i);
        journal(tx, "delete chain", family, tname ? tname : "?", name);
        if (!c)
                return fail(tx, -ENOENT, "no chain %s", N(name));
        /* Its own rules go with it; what points at it must have gone. */
        chain_flush(t, c);
        if (c->use > 0)
                return fail(tx, -EBUSY, "chain %s is still referenced", N(name));
        chain_free(c);
        memmove(&t->chains[i], &t->chains[i + 1], (t->n_chains - i - 1) * sizeof *t->chains);
        t->n_chains--;
        return 0;
}

/* The references of one expression, checked and recorded in r, and its
 * text. */
static int rule_expr(struct txn *tx, struct fk_table *t, const struct nlattr *e, struct fk_rule *r, struct buf *text) {
        const struct nlattr *x[ATTRS_MAX], *d[ATTRS_MAX], *a;
        nested(e, x);
        const char *name = str(x[NFTA_EXPR_NAME]);
        if (!name)
                return fail(tx, -EINVAL, "an expression without a name");
        nested(x[NFTA_EXPR_DATA], d);
        const char *set = NULL, *anon = NULL;
        if (strcmp(name, "immediate") == 0 && d[NFTA_IMMEDIATE_DATA]) {
                int32_t code;
                const char *chain;
                if (verdict_of(d[NFTA_IMMEDIATE_DATA], &code, &chain) && (code == NFT_JUMP || code == NFT_GOTO)) {
                        if (!chain_find(t, chain, NULL))
                                return fail(tx, -ENOENT, "no chain %s to jump to", N(chain));
                        r->chains = push(r->chains, &r->n_chains, sizeof *r->chains);
                        r->chains[r->n_chains - 1] = xstrdup(chain);
                }
        } else if (strcmp(name, "lookup") == 0) {
                set = str(d[NFTA_LOOKUP_SET]);
                if (d[NFTA_LOOKUP_SET_ID])
                        set = anon = set_by_id(tx, t->family, t->name, be32(d[NFTA_LOOKUP_SET_ID]));
        } else if (strcmp(name, "dynset") == 0) {
                set = str(d[NFTA_DYNSET_SET_NAME]);
                if (d[NFTA_DYNSET_SET_ID])
                        set = set_by_id(tx, t->family, t->name, be32(d[NFTA_DYNSET_SET_ID]));
        }
        if ((strcmp(name, "lookup") == 0 || strcmp(name, "dynset") == 0) && !set_find(t, set, NULL))
                return fail(tx, -ENOENT, "no set %s", N(set));
        if (set) {
                r->sets = push(r->sets, &r->n_sets, sizeof *r->sets);
                r->sets[r->n_sets - 1] = xstrdup(set);
        }
        /* The text: the expression as sent, but an anonymous set as what
         * it holds (its name and id are the transaction's). */
        buf_printf(text, " %s(", name);
        if (x[NFTA_EXPR_DATA])
                mnl_attr_for_each_nested(a, x[NFTA_EXPR_DATA]) {
                        uint16_t type = mnl_attr_get_type(a);
                        if (anon && (type == NFTA_LOOKUP_SET || type == NFTA_LOOKUP_SET_ID))
                                continue;
                        buf_printf(text, "%u:", type);
                        hex(text, mnl_attr_get_payload(a), mnl_attr_get_payload_len(a));
                        buf_putc(text, ' ');
                }
        if (anon) {
                const struct fk_set *s = set_find(t, anon, NULL);
                buf_puts(text, "{");
                for (size_t i = 0; i < s->n_el; i++) {
                        hex(text, s->el[i].key, s->el[i].key_len);
                        buf_puts(text, s->el[i].flags & NFT_SET_ELEM_INTERVAL_END ? "e," : ",");
                }
                buf_puts(text, "}");
        }
        buf_puts(text, ")");
        return 0;
}

static int new_rule(struct txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX], *e;
        attrs(nlh, tb);
        const char *tname = str(tb[NFTA_RULE_TABLE]), *cname = str(tb[NFTA_RULE_CHAIN]);
        struct fk_table *t = table_find(tx->st, family, tname);
        struct fk_chain *c = chain_find(t, cname, NULL);
        struct fk_rule r = {0};
        struct buf text = BUF_INIT;
        int err = 0;

        journal(tx, "add rule", family, tname ? tname : "?", cname);
        if (!c)
                return fail(tx, -ENOENT, "no chain %s", N(cname));
        r.exprs = blob_of(tb[NFTA_RULE_EXPRESSIONS]);
        r.udata = blob_of(tb[NFTA_RULE_USERDATA]);
        if (tb[NFTA_RULE_EXPRESSIONS])
                mnl_attr_for_each_nested(e, tb[NFTA_RULE_EXPRESSIONS]) {
                        if (err == 0)
                                err = rule_expr(tx, t, e, &r, &text);
                }
        if (r.udata.set) {
                buf_puts(&text, " udata ");
                hex(&text, r.udata.p, r.udata.len);
        }
        r.text = buf_steal(&text);
        if (!r.text)
                r.text = xstrdup("");
        if (err < 0) {
                rule_done(&r);
                return err;
        }
        for (size_t i = 0; i < r.n_chains; i++)
                chain_find(t, r.chains[i], NULL)->use++;
        for (size_t i = 0; i < r.n_sets; i++)
                set_find(t, r.sets[i], NULL)->use++;
        r.handle = t->next_handle++;
        c->rules = push(c->rules, &c->n_rules, sizeof *c->rules);
        if (!(nlh->nlmsg_flags & NLM_F_APPEND)) {
                /* Without NLM_F_APPEND (nft insert), at the start. */
                memmove(&c->rules[1], &c->rules[0], (c->n_rules - 1) * sizeof *c->rules);
                c->rules[0] = r;
        } else {
                c->rules[c->n_rules - 1] = r;
        }
        return 0;
}

static int del_rule(struct txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX];
        attrs(nlh, tb);
        const char *tname = str(tb[NFTA_RULE_TABLE]), *cname = str(tb[NFTA_RULE_CHAIN]);
        struct fk_table *t = table_find(tx->st, family, tname);
        struct fk_chain *c = chain_find(t, cname, NULL);
        journal(tx, tb[NFTA_RULE_HANDLE] ? "delete rule" : "flush chain", family, tname ? tname : "?", cname);
        if (!c)
                return fail(tx, -ENOENT, "no chain %s", N(cname));
        if (!tb[NFTA_RULE_HANDLE]) {
                chain_flush(t, c);
                return 0;
        }
        uint64_t handle = be64toh(mnl_attr_get_u64(tb[NFTA_RULE_HANDLE]));
        for (size_t i = 0; i < c->n_rules; i++) {
                if (c->rules[i].handle != handle)
                        continue;
                rule_unref(t, &c->rules[i]);
                rule_done(&c->rules[i]);
                memmove(&c->rules[i], &c->rules[i + 1], (c->n_rules - i - 1) * sizeof *c->rules);
                c->n_rules--;
                return 0;
        }
        return fail(tx, -ENOENT, "no such rule in %s", N(cname));
}

static int new_set(struct txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX];
        attrs(nlh, tb);
        const char *tname = str(tb[NFTA_SET_TABLE]), *name = str(tb[NFTA_SET_NAME]);
        struct fk_table *t = table_find(tx->st, family, tname);
        struct fk_set want = {
                .flags = be32(tb[NFTA_SET_FLAGS]),
                .key_type = be32(tb[NFTA_SET_KEY_TYPE]),
                .key_len = be32(tb[NFTA_SET_KEY_LEN]),
                .data_type = be32(tb[NFTA_SET_DATA_TYPE]),
                .data_len = be32(tb[NFTA_SET_DATA_LEN]),
                .timeout = tb[NFTA_SET_TIMEOUT] ? be64toh(mnl_attr_get_u64(tb[NFTA_SET_TIMEOUT])) : 0,
        };
        char anon[32];

        journal(tx, "add set", family, tname ? tname : "?", name);
        if (!t)
                return fail(tx, -ENOENT, "no table %s", N(tname));
        if (!name || want.key_len == 0 || want.key_len > KEY_MAX)
                return fail(tx, -EINVAL, "set %s: no name, or a bad key length", N(name));
        if (want.flags & NFT_SET_ANONYMOUS) {
                snprintf(anon, sizeof anon, "__set%u", t->next_anon++);
                name = anon;
        }
        struct fk_set *s = set_find(t, name, NULL);
        if (s) {
                if (nlh->nlmsg_flags & NLM_F_EXCL)
                        return fail(tx, -EEXIST, "set %s exists", N(name));
                if (s->flags != want.flags || s->key_type != want.key_type || s->key_len != want.key_len ||
                    s->data_type != want.data_type || s->data_len != want.data_len || s->timeout != want.timeout)
                        return fail(tx, -EEXIST, "set %s exists with another type", N(name));
        } else {
                s = xcalloc(1, sizeof *s);
                *s = want;
                s->name = xstrdup(name);
                s->anonymous = want.flags & NFT_SET_ANONYMOUS;
                s->udata = blob_of(tb[NFTA_SET_USERDATA]);
                s->handle = t->next_handle++;
                t->sets = push(t->sets, &t->n_sets, sizeof *t->sets);
                t->sets[t->n_sets - 1] = s;
        }
        if (tb[NFTA_SET_ID]) {
                tx->ids = push(tx->ids, &tx->n_ids, sizeof *tx->ids);
                tx->ids[tx->n_ids - 1] = (struct set_id) {be32(tb[NFTA_SET_ID]), family, xstrdup(t->name),
                                                          xstrdup(name)};
        }
        return 0;
}

static void set_flush(struct fk_table *t, struct fk_set *s) {
        for (size_t i = 0; i < s->n_el; i++) {
                elem_unref(t, &s->el[i]);
                elem_done(&s->el[i]);
        }
        s->n_el = 0;
}

static int del_set(struct txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX];
        attrs(nlh, tb);
        const char *tname = str(tb[NFTA_SET_TABLE]), *name = str(tb[NFTA_SET_NAME]);
        struct fk_table *t = table_find(tx->st, family, tname);
        size_t i;
        struct fk_set *s = set_find(t, name, &i);
        journal(tx, "delete set", family, tname ? tname : "?", name);
        if (!s)
                return fail(tx, -ENOENT, "no set %s", N(name));
        if (s->use > 0)
                return fail(tx, -EBUSY, "set %s is still referenced", N(name));
        set_flush(t, s);
        set_free(s);
        memmove(&t->sets[i], &t->sets[i + 1], (t->n_sets - i - 1) * sizeof *t->sets);
        t->n_sets--;
        return 0;
}

/* One element of NFTA_SET_ELEM_LIST_ELEMENTS, added (add) or deleted. */
static int set_elem(struct txn *tx, struct fk_table *t, struct fk_set *s, const struct nlattr *el, bool add) {
        const struct nlattr *a[ATTRS_MAX], *k[ATTRS_MAX];
        nested(el, a);
        nested(a[NFTA_SET_ELEM_KEY], k);
        if (!k[NFTA_DATA_VALUE] || mnl_attr_get_payload_len(k[NFTA_DATA_VALUE]) != s->key_len)
                return fail(tx, -EINVAL, "an element of %s with a bad key", N(s->name));
        struct fk_elem e = {.key_len = s->key_len, .flags = be32(a[NFTA_SET_ELEM_FLAGS])};
        memcpy(e.key, mnl_attr_get_payload(k[NFTA_DATA_VALUE]), s->key_len);
        const char *chain = NULL;
        e.verdict = a[NFTA_SET_ELEM_DATA] && verdict_of(a[NFTA_SET_ELEM_DATA], &e.code, &chain);

        buf_printf(&tx->journal, " %s ", s->name);
        hex(&tx->journal, e.key, e.key_len);
        if (add && e.verdict)
                buf_printf(&tx->journal, " %s%s%s", e.code == NFT_GOTO ? "goto" : e.code == NFT_JUMP ? "jump" : "drop",
                           chain ? " " : "", chain ? chain : "");
        size_t i;
        struct fk_elem *old = elem_find(s, e.key, e.key_len, e.flags, &i);
        if (!add) {
                if (!old)
                        return fail(tx, -ENOENT, "no such element in %s", N(s->name));
                elem_unref(t, old);
                elem_done(old);
                memmove(&s->el[i], &s->el[i + 1], (s->n_el - i - 1) * sizeof *s->el);
                s->n_el--;
                return 0;
        }
        if (chain && !chain_find(t, chain, NULL))
                return fail(tx, -ENOENT, "no chain %s for an element", N(chain));
        if (old) {
                bool same = old->verdict == e.verdict && old->code == e.code &&
                            strcmp(old->chain ? old->chain : "", chain ? chain : "") == 0;
                return same ? 0 : fail(tx, -EBUSY, "an element of %s has another value", N(s->name));
        }
        e.chain = chain ? xstrdup(chain) : NULL;
        e.udata = blob_of(a[NFTA_SET_ELEM_USERDATA]);
        if (chain)
                chain_find(t, chain, NULL)->use++;
        s->el = push(s->el, &s->n_el, sizeof *s->el);
        s->el[s->n_el - 1] = e;
        return 0;
}

static int set_elems(struct txn *tx, const struct nlmsghdr *nlh, uint8_t family, bool add) {
        const struct nlattr *tb[ATTRS_MAX], *el;
        attrs(nlh, tb);
        const char *tname = str(tb[NFTA_SET_ELEM_LIST_TABLE]), *name = str(tb[NFTA_SET_ELEM_LIST_SET]);
        struct fk_table *t = table_find(tx->st, family, tname);
        if (t && tb[NFTA_SET_ELEM_LIST_SET_ID])
                name = set_by_id(tx, family, tname, be32(tb[NFTA_SET_ELEM_LIST_SET_ID]));
        struct fk_set *s = set_find(t, name, NULL);
        int err = 0;
        if (!s) {
                journal(tx, add ? "add element" : "delete element", family, tname ? tname : "?", name);
                buf_putc(&tx->journal, '\n');
                return fail(tx, -ENOENT, "no set %s", N(name));
        }
        if (!add && !tb[NFTA_SET_ELEM_LIST_ELEMENTS]) {
                journal(tx, "flush set", family, t->name, s->name);
                buf_putc(&tx->journal, '\n');
                set_flush(t, s);
                return 0;
        }
        if (tb[NFTA_SET_ELEM_LIST_ELEMENTS])
                mnl_attr_for_each_nested(el, tb[NFTA_SET_ELEM_LIST_ELEMENTS]) {
                        if (err < 0)
                                break;
                        buf_printf(&tx->journal, "%s %s %s", add ? "add element" : "delete element",
                                   family_name(family), t->name);
                        err = set_elem(tx, t, s, el, add);
                        buf_putc(&tx->journal, '\n');
                }
        return err;
}

/* Applies one message of a batch to tx's state. Returns 0 or -errno (the
 * reason in tx->err). */
static int apply(struct txn *tx, const struct nlmsghdr *nlh) {
        const struct nfgenmsg *g = mnl_nlmsg_get_payload(nlh);
        uint8_t family = g->nfgen_family;
        int err;
        if ((nlh->nlmsg_type >> 8) != NFNL_SUBSYS_NFTABLES)
                return fail(tx, -EINVAL, "not an nf_tables message");
        switch (nlh->nlmsg_type & 0xff) {
        case NFT_MSG_NEWTABLE:
                err = new_table(tx, nlh, family);
                break;
        case NFT_MSG_DELTABLE:
                err = del_table(tx, nlh, family);
                break;
        case NFT_MSG_NEWCHAIN:
                err = new_chain(tx, nlh, family);
                break;
        case NFT_MSG_DELCHAIN:
                err = del_chain(tx, nlh, family);
                break;
        case NFT_MSG_NEWRULE:
                err = new_rule(tx, nlh, family);
                break;
        case NFT_MSG_DELRULE:
                err = del_rule(tx, nlh, family);
                break;
        case NFT_MSG_NEWSET:
                err = new_set(tx, nlh, family);
                break;
        case NFT_MSG_DELSET:
                err = del_set(tx, nlh, family);
                break;
        case NFT_MSG_NEWSETELEM:
                return set_elems(tx, nlh, family, true);
        case NFT_MSG_DELSETELEM:
                return set_elems(tx, nlh, family, false);
        default:
                journal(tx, "unknown message", family, "", NULL);
                err = fail(tx, -EOPNOTSUPP, "message type %u", nlh->nlmsg_type & 0xff);
        }
        buf_putc(&tx->journal, '\n');
        return err;
}

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
        attrs(req, tb);

        switch (req->nlmsg_type & 0xff) {
        case NFT_MSG_GETTABLE:
                for (size_t i = 0; dump && i < st->n; i++)
                        if (st->t[i]->family == family)
                                reply_table(l, req, st->t[i], true);
                if (!dump) {
                        const struct fk_table *t = table_find(st, family, str(tb[NFTA_TABLE_NAME]));
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
                        const struct fk_table *t = table_find(st, family, str(tb[NFTA_CHAIN_TABLE]));
                        const struct fk_chain *c = chain_find(t, str(tb[NFTA_CHAIN_NAME]), NULL);
                        if (!c) {
                                put_error(&l->q, l->portid, req, -ENOENT, NULL);
                                return;
                        }
                        reply_chain(l, req, t, c, false);
                }
                break;
        case NFT_MSG_GETSET: {
                const struct fk_table *t = table_find(st, family, str(tb[NFTA_SET_TABLE]));
                for (size_t i = 0; t && i < t->n_sets; i++)
                        reply_set(l, req, t, t->sets[i]);
                break;
        }
        case NFT_MSG_GETRULE: {
                const struct fk_table *t = table_find(st, family, str(tb[NFTA_RULE_TABLE]));
                const struct fk_chain *c = chain_find(t, str(tb[NFTA_RULE_CHAIN]), NULL);
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

static void txn_done(struct txn *tx) {
        for (size_t i = 0; i < tx->n_ids; i++) {
                free(tx->ids[i].table);
                free(tx->ids[i].name);
        }
        free(tx->ids);
        buf_done(&tx->journal);
}

/* The messages between begin and end (exclusive), as nfnetlink runs a
 * batch: each tried, its error or acknowledgement queued after the
 * commit's own answer. */
static void batch(struct fake_link *l, const struct nlmsghdr *begin, const char *from, const char *to) {
        struct nft_fake *k = l->k;
        struct fk_state copy;
        struct txn tx = {&copy, NULL, 0, BUF_INIT, ""};
        struct buf answers = BUF_INIT;
        size_t n = 0;
        bool failed = false;

        state_copy(&k->state, &copy);
        for (const char *p = from; p < to;) {
                const struct nlmsghdr *nlh = (const struct nlmsghdr *) p;
                size_t before = tx.journal.len;
                tx.err[0] = '\0';
                int err = apply(&tx, nlh);
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
                state_done(&copy);
        } else {
                state_done(&k->state);
                k->state = copy;
                k->genid++;
                k->txn_sizes = push(k->txn_sizes, &k->n_txns, sizeof *k->txn_sizes);
                k->txn_sizes[k->n_txns - 1] = n;
                if (tx.journal.len)
                        buf_put(&k->journal, tx.journal.data, tx.journal.len);
        }
        buf_put(&l->q, answers.data ? answers.data : "", answers.len);
        buf_done(&answers);
        txn_done(&tx);
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
        struct fake_link *l = xcalloc(1, sizeof *l);
        (void) rcvbuf;
        l->link.ops = &fake_ops;
        l->k = k;
        l->portid = ++k->next_port;
        *ret = &l->link;
        return 0;
}

/* --- the kernel --- */

struct nft_fake *nft_fake_new(void) {
        struct nft_fake *k = xcalloc(1, sizeof *k);
        k->next_port = 1000;
        return k;
}

struct nft_fake *nft_fake_free(struct nft_fake *k) {
        if (!k)
                return NULL;
        state_done(&k->state);
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
        k->fail_what = xstrdup(what);
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

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static void table_text(const struct fk_table *t, struct buf *out) {
        char **items = xcalloc(t->n_chains + t->n_sets, sizeof *items);
        size_t n = 0;
        for (size_t i = 0; i < t->n_chains; i++) {
                const struct fk_chain *c = t->chains[i];
                struct buf b = BUF_INIT;
                buf_printf(&b, "  chain %s", c->name);
                if (c->base)
                        buf_printf(&b, " type %s hook %u prio %d policy %u", c->type, ntohl(c->hooknum),
                                   (int32_t) ntohl(c->prio), ntohl(c->policy));
                if (c->udata.set) {
                        buf_puts(&b, " udata ");
                        hex(&b, c->udata.p, c->udata.len);
                }
                buf_putc(&b, '\n');
                for (size_t j = 0; j < c->n_rules; j++)
                        buf_printf(&b, "    rule%s\n", c->rules[j].text);
                items[n++] = buf_steal(&b);
        }
        for (size_t i = 0; i < t->n_sets; i++) {
                const struct fk_set *s = t->sets[i];
                if (s->anonymous)
                        continue;       /* in the rules that use them */
                struct buf b = BUF_INIT;
                buf_printf(&b, "  set %s flags %#x key %u/%u data %u/%u timeout %llu", s->name, s->flags, s->key_type,
                           s->key_len, s->data_type, s->data_len, (unsigned long long) s->timeout);
                if (s->udata.set) {
                        buf_puts(&b, " udata ");
                        hex(&b, s->udata.p, s->udata.len);
                }
                buf_putc(&b, '\n');
                char **el = xcalloc(s->n_el, sizeof *el);
                for (size_t j = 0; j < s->n_el; j++) {
                        struct buf e = BUF_INIT;
                        buf_puts(&e, "    element ");
                        hex(&e, s->el[j].key, s->el[j].key_len);
                        if (s->el[j].verdict)
                                buf_printf(&e, " verdict %d %s", s->el[j].code, s->el[j].chain ? s->el[j].chain : "");
                        buf_putc(&e, '\n');
                        el[j] = buf_steal(&e);
                }
                qsort(el, s->n_el, sizeof *el, cmp_str);
                for (size_t j = 0; j < s->n_el; j++) {
                        buf_puts(&b, el[j]);
                        free(el[j]);
                }
                free(el);
                items[n++] = buf_steal(&b);
        }
        qsort(items, n, sizeof *items, cmp_str);
        for (size_t i = 0; i < n; i++) {
                buf_puts(out, items[i]);
                free(items[i]);
        }
        free(items);
}

static int cmp_table(const void *a, const void *b) {
        const struct fk_table *x = *(const struct fk_table *const *) a, *y = *(const struct fk_table *const *) b;
        return x->family != y->family ? x->family - y->family : strcmp(x->name, y->name);
}

void nft_fake_text(const struct nft_fake *k, struct buf *out) {
        const struct fk_table **t = xcalloc(k->state.n, sizeof *t);
        memcpy(t, k->state.t, k->state.n * sizeof *t);
        qsort(t, k->state.n, sizeof *t, cmp_table);
        for (size_t i = 0; i < k->state.n; i++) {
                buf_printf(out, "table %s %s flags %u\n", family_name(t[i]->family), t[i]->name, t[i]->flags);
                table_text(t[i], out);
        }
        free(t);
}

static uint8_t nfproto(uint8_t family) {
        return family == 6 ? NFPROTO_IPV6 : NFPROTO_IPV4;
}

int nft_fake_has_chain(const struct nft_fake *k, uint8_t family, const char *table, const char *chain) {
        const struct fk_table *t = table_find(&k->state, nfproto(family), table);
        return !t ? -ENOENT : chain_find(t, chain, NULL) != NULL;
}

int nft_fake_has_elem(const struct nft_fake *k, uint8_t family, const char *table, const char *set,
                      const uint8_t *key, size_t key_len) {
        const struct fk_set *s = set_find(table_find(&k->state, nfproto(family), table), set, NULL);
        return !s ? -ENOENT : elem_find(s, key, key_len, 0, NULL) != NULL;
}

int nft_fake_rules(const struct nft_fake *k, uint8_t family, const char *table, const char *chain) {
        const struct fk_chain *c = chain_find(table_find(&k->state, nfproto(family), table), chain, NULL);
        return c ? (int) c->n_rules : -ENOENT;
}
