/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A transaction of the fake kernel: each message of a batch applied to a
 * copy of the state as nf_tables would apply it, with the kernel's
 * refusals (a missing object, a reference to one, deleting what is still
 * referenced, an element whose key has another value), and journalled.
 */
#include "nft-fake-internal.h"

#include <endian.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static uint32_t raw32(const struct nlattr *a) {
        return a && mnl_attr_get_payload_len(a) == 4 ? mnl_attr_get_u32(a) : 0;
}

/* A verdict: NFTA_DATA_VERDICT's code and chain, in a data nest. */
static bool verdict_of(const struct nlattr *data, int32_t *code, const char **chain) {
        const struct nlattr *d[ATTRS_MAX], *v[ATTRS_MAX];
        fk_nested(data, d);
        if (!d[NFTA_DATA_VERDICT])
                return false;
        fk_nested(d[NFTA_DATA_VERDICT], v);
        *code = (int32_t) fk_be32(v[NFTA_VERDICT_CODE]);
        *chain = fk_str(v[NFTA_VERDICT_CHAIN]);
        return true;
}

/* Drops the references a rule or an element holds. */
static void unref_chain(struct fk_table *t, const char *name) {
        struct fk_chain *c = fk_chain_find(t, name, NULL);
        if (c && c->use > 0)
                c->use--;
}

static void unref_set(struct fk_table *t, const char *name) {
        size_t i;
        struct fk_set *s = fk_set_find(t, name, &i);
        if (!s || s->use == 0)
                return;
        /* An anonymous set lives as long as the rule that uses it. */
        if (--s->use == 0 && s->anonymous) {
                fk_set_free(s);
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

static int fail(struct fk_txn *tx, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Records the reason the kernel gives for err; returns err. */
static int fail(struct fk_txn *tx, int err, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(tx->err, sizeof tx->err, fmt, ap);
        va_end(ap);
        return err;
}

/* A name for a message: NULL when the message had none. */
#define N(s) ((s) ? (s) : "?")

static void journal(struct fk_txn *tx, const char *verb, uint8_t family, const char *table, const char *what) {
        buf_printf(&tx->journal, "%s %s %s %s", verb, fk_family_name(family), table ? table : "?", what ? what : "");
}

static const char *set_by_id(struct fk_txn *tx, uint8_t family, const char *table, uint32_t id) {
        for (size_t i = 0; i < tx->n_ids; i++)
                if (tx->ids[i].id == id && tx->ids[i].family == family && strcmp(tx->ids[i].table, table) == 0)
                        return tx->ids[i].name;
        return NULL;
}

static int new_table(struct fk_txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX];
        fk_attrs(nlh, tb);
        const char *name = fk_str(tb[NFTA_TABLE_NAME]);
        if (!name)
                return fail(tx, -EINVAL, "a table without a name");
        journal(tx, "add table", family, name, NULL);
        if (fk_table_find(tx->st, family, name))
                return nlh->nlmsg_flags & NLM_F_EXCL ? fail(tx, -EEXIST, "table %s exists", name) : 0;
        struct fk_table *t = fk_xcalloc(1, sizeof *t);
        t->family = family;
        t->name = fk_xstrdup(name);
        t->flags = fk_be32(tb[NFTA_TABLE_FLAGS]);
        t->udata = fk_blob_of(tb[NFTA_TABLE_USERDATA]);
        t->next_handle = 1;
        tx->st->t = fk_push(tx->st->t, &tx->st->n, sizeof *tx->st->t);
        tx->st->t[tx->st->n - 1] = t;
        return 0;
}

static int del_table(struct fk_txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX];
        fk_attrs(nlh, tb);
        const char *name = fk_str(tb[NFTA_TABLE_NAME]);
        journal(tx, "delete table", family, name, NULL);
        for (size_t i = 0; i < tx->st->n; i++) {
                if (tx->st->t[i]->family != family || strcmp(tx->st->t[i]->name, name ? name : "") != 0)
                        continue;
                fk_table_free(tx->st->t[i]);
                memmove(&tx->st->t[i], &tx->st->t[i + 1], (tx->st->n - i - 1) * sizeof *tx->st->t);
                tx->st->n--;
                return 0;
        }
        return fail(tx, -ENOENT, "no table %s", N(name));
}

static int new_chain(struct fk_txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX], *h[ATTRS_MAX];
        fk_attrs(nlh, tb);
        fk_nested(tb[NFTA_CHAIN_HOOK], h);
        const char *tname = fk_str(tb[NFTA_CHAIN_TABLE]), *name = fk_str(tb[NFTA_CHAIN_NAME]);
        const char *type = fk_str(tb[NFTA_CHAIN_TYPE]);
        struct fk_table *t = fk_table_find(tx->st, family, tname);
        journal(tx, "add chain", family, tname ? tname : "?", name);
        if (!t)
                return fail(tx, -ENOENT, "no table %s", N(tname));
        if (!name)
                return fail(tx, -EINVAL, "a chain without a name");
        struct fk_chain *c = fk_chain_find(t, name, NULL);
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
        c = fk_xcalloc(1, sizeof *c);
        c->name = fk_xstrdup(name);
        c->handle = t->next_handle++;
        c->udata = fk_blob_of(tb[NFTA_CHAIN_USERDATA]);
        if (tb[NFTA_CHAIN_HOOK]) {
                c->base = true;
                c->type = fk_xstrdup(type ? type : "filter");
                c->hooknum = raw32(h[NFTA_HOOK_HOOKNUM]);
                c->prio = raw32(h[NFTA_HOOK_PRIORITY]);
                c->policy = tb[NFTA_CHAIN_POLICY] ? raw32(tb[NFTA_CHAIN_POLICY]) : htonl(NF_ACCEPT);
        }
        t->chains = fk_push(t->chains, &t->n_chains, sizeof *t->chains);
        t->chains[t->n_chains - 1] = c;
        return 0;
}

static void chain_flush(struct fk_table *t, struct fk_chain *c) {
        for (size_t i = 0; i < c->n_rules; i++) {
                rule_unref(t, &c->rules[i]);
                fk_rule_done(&c->rules[i]);
        }
        c->n_rules = 0;
}

static int del_chain(struct fk_txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX];
        fk_attrs(nlh, tb);
        const char *tname = fk_str(tb[NFTA_CHAIN_TABLE]), *name = fk_str(tb[NFTA_CHAIN_NAME]);
        struct fk_table *t = fk_table_find(tx->st, family, tname);
        size_t i;
        struct fk_chain *c = fk_chain_find(t, name, &i);
        journal(tx, "delete chain", family, tname ? tname : "?", name);
        if (!c)
                return fail(tx, -ENOENT, "no chain %s", N(name));
        /* Its own rules go with it; what points at it must have gone. */
        chain_flush(t, c);
        if (c->use > 0)
                return fail(tx, -EBUSY, "chain %s is still referenced", N(name));
        fk_chain_free(c);
        memmove(&t->chains[i], &t->chains[i + 1], (t->n_chains - i - 1) * sizeof *t->chains);
        t->n_chains--;
        return 0;
}

/* The references of one expression, checked and recorded in r, and its
 * text. */
static int rule_expr(struct fk_txn *tx, struct fk_table *t, const struct nlattr *e, struct fk_rule *r,
                     struct buf *text) {
        const struct nlattr *x[ATTRS_MAX], *d[ATTRS_MAX], *a;
        fk_nested(e, x);
        const char *name = fk_str(x[NFTA_EXPR_NAME]);
        if (!name)
                return fail(tx, -EINVAL, "an expression without a name");
        fk_nested(x[NFTA_EXPR_DATA], d);
        const char *set = NULL, *anon = NULL;
        if (strcmp(name, "immediate") == 0 && d[NFTA_IMMEDIATE_DATA]) {
                int32_t code;
                const char *chain;
                if (verdict_of(d[NFTA_IMMEDIATE_DATA], &code, &chain) && (code == NFT_JUMP || code == NFT_GOTO)) {
                        if (!fk_chain_find(t, chain, NULL))
                                return fail(tx, -ENOENT, "no chain %s to jump to", N(chain));
                        r->chains = fk_push(r->chains, &r->n_chains, sizeof *r->chains);
                        r->chains[r->n_chains - 1] = fk_xstrdup(chain);
                }
        } else if (strcmp(name, "lookup") == 0) {
                set = fk_str(d[NFTA_LOOKUP_SET]);
                if (d[NFTA_LOOKUP_SET_ID])
                        set = anon = set_by_id(tx, t->family, t->name, fk_be32(d[NFTA_LOOKUP_SET_ID]));
        } else if (strcmp(name, "dynset") == 0) {
                set = fk_str(d[NFTA_DYNSET_SET_NAME]);
                if (d[NFTA_DYNSET_SET_ID])
                        set = set_by_id(tx, t->family, t->name, fk_be32(d[NFTA_DYNSET_SET_ID]));
        }
        if ((strcmp(name, "lookup") == 0 || strcmp(name, "dynset") == 0) && !fk_set_find(t, set, NULL))
                return fail(tx, -ENOENT, "no set %s", N(set));
        if (set) {
                r->sets = fk_push(r->sets, &r->n_sets, sizeof *r->sets);
                r->sets[r->n_sets - 1] = fk_xstrdup(set);
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
                        fk_hex(text, mnl_attr_get_payload(a), mnl_attr_get_payload_len(a));
                        buf_putc(text, ' ');
                }
        if (anon) {
                const struct fk_set *s = fk_set_find(t, anon, NULL);
                buf_puts(text, "{");
                for (size_t i = 0; i < s->n_el; i++) {
                        fk_hex(text, s->el[i].key, s->el[i].key_len);
                        buf_puts(text, s->el[i].flags & NFT_SET_ELEM_INTERVAL_END ? "e," : ",");
                }
                buf_puts(text, "}");
        }
        buf_puts(text, ")");
        return 0;
}

static int new_rule(struct fk_txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX], *e;
        fk_attrs(nlh, tb);
        const char *tname = fk_str(tb[NFTA_RULE_TABLE]), *cname = fk_str(tb[NFTA_RULE_CHAIN]);
        struct fk_table *t = fk_table_find(tx->st, family, tname);
        struct fk_chain *c = fk_chain_find(t, cname, NULL);
        struct fk_rule r = {0};
        struct buf text = BUF_INIT;
        int err = 0;

        journal(tx, "add rule", family, tname ? tname : "?", cname);
        if (!c)
                return fail(tx, -ENOENT, "no chain %s", N(cname));
        r.exprs = fk_blob_of(tb[NFTA_RULE_EXPRESSIONS]);
        r.udata = fk_blob_of(tb[NFTA_RULE_USERDATA]);
        if (tb[NFTA_RULE_EXPRESSIONS])
                mnl_attr_for_each_nested(e, tb[NFTA_RULE_EXPRESSIONS]) {
                        if (err == 0)
                                err = rule_expr(tx, t, e, &r, &text);
                }
        if (r.udata.set) {
                buf_puts(&text, " udata ");
                fk_hex(&text, r.udata.p, r.udata.len);
        }
        r.text = buf_steal(&text);
        if (!r.text)
                r.text = fk_xstrdup("");
        if (err < 0) {
                fk_rule_done(&r);
                return err;
        }
        for (size_t i = 0; i < r.n_chains; i++)
                fk_chain_find(t, r.chains[i], NULL)->use++;
        for (size_t i = 0; i < r.n_sets; i++)
                fk_set_find(t, r.sets[i], NULL)->use++;
        r.handle = t->next_handle++;
        c->rules = fk_push(c->rules, &c->n_rules, sizeof *c->rules);
        if (!(nlh->nlmsg_flags & NLM_F_APPEND)) {
                /* Without NLM_F_APPEND (nft insert), at the start. */
                memmove(&c->rules[1], &c->rules[0], (c->n_rules - 1) * sizeof *c->rules);
                c->rules[0] = r;
        } else {
                c->rules[c->n_rules - 1] = r;
        }
        return 0;
}

static int del_rule(struct fk_txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX];
        fk_attrs(nlh, tb);
        const char *tname = fk_str(tb[NFTA_RULE_TABLE]), *cname = fk_str(tb[NFTA_RULE_CHAIN]);
        struct fk_table *t = fk_table_find(tx->st, family, tname);
        struct fk_chain *c = fk_chain_find(t, cname, NULL);
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
                fk_rule_done(&c->rules[i]);
                memmove(&c->rules[i], &c->rules[i + 1], (c->n_rules - i - 1) * sizeof *c->rules);
                c->n_rules--;
                return 0;
        }
        return fail(tx, -ENOENT, "no such rule in %s", N(cname));
}

static int new_set(struct fk_txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX];
        fk_attrs(nlh, tb);
        const char *tname = fk_str(tb[NFTA_SET_TABLE]), *name = fk_str(tb[NFTA_SET_NAME]);
        struct fk_table *t = fk_table_find(tx->st, family, tname);
        struct fk_set want = {
                .flags = fk_be32(tb[NFTA_SET_FLAGS]),
                .key_type = fk_be32(tb[NFTA_SET_KEY_TYPE]),
                .key_len = fk_be32(tb[NFTA_SET_KEY_LEN]),
                .data_type = fk_be32(tb[NFTA_SET_DATA_TYPE]),
                .data_len = fk_be32(tb[NFTA_SET_DATA_LEN]),
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
        struct fk_set *s = fk_set_find(t, name, NULL);
        if (s) {
                if (nlh->nlmsg_flags & NLM_F_EXCL)
                        return fail(tx, -EEXIST, "set %s exists", N(name));
                if (s->flags != want.flags || s->key_type != want.key_type || s->key_len != want.key_len ||
                    s->data_type != want.data_type || s->data_len != want.data_len || s->timeout != want.timeout)
                        return fail(tx, -EEXIST, "set %s exists with another type", N(name));
        } else {
                s = fk_xcalloc(1, sizeof *s);
                *s = want;
                s->name = fk_xstrdup(name);
                s->anonymous = want.flags & NFT_SET_ANONYMOUS;
                s->udata = fk_blob_of(tb[NFTA_SET_USERDATA]);
                s->handle = t->next_handle++;
                t->sets = fk_push(t->sets, &t->n_sets, sizeof *t->sets);
                t->sets[t->n_sets - 1] = s;
        }
        if (tb[NFTA_SET_ID]) {
                tx->ids = fk_push(tx->ids, &tx->n_ids, sizeof *tx->ids);
                tx->ids[tx->n_ids - 1] = (struct fk_set_id) {fk_be32(tb[NFTA_SET_ID]), family, fk_xstrdup(t->name),
                                                          fk_xstrdup(name)};
        }
        return 0;
}

static void set_flush(struct fk_table *t, struct fk_set *s) {
        for (size_t i = 0; i < s->n_el; i++) {
                elem_unref(t, &s->el[i]);
                fk_elem_done(&s->el[i]);
        }
        s->n_el = 0;
}

static int del_set(struct fk_txn *tx, const struct nlmsghdr *nlh, uint8_t family) {
        const struct nlattr *tb[ATTRS_MAX];
        fk_attrs(nlh, tb);
        const char *tname = fk_str(tb[NFTA_SET_TABLE]), *name = fk_str(tb[NFTA_SET_NAME]);
        struct fk_table *t = fk_table_find(tx->st, family, tname);
        size_t i;
        struct fk_set *s = fk_set_find(t, name, &i);
        journal(tx, "delete set", family, tname ? tname : "?", name);
        if (!s)
                return fail(tx, -ENOENT, "no set %s", N(name));
        if (s->use > 0)
                return fail(tx, -EBUSY, "set %s is still referenced", N(name));
        set_flush(t, s);
        fk_set_free(s);
        memmove(&t->sets[i], &t->sets[i + 1], (t->n_sets - i - 1) * sizeof *t->sets);
        t->n_sets--;
        return 0;
}

/* One element of NFTA_SET_ELEM_LIST_ELEMENTS, added (add) or deleted. */
static int set_elem(struct fk_txn *tx, struct fk_table *t, struct fk_set *s, const struct nlattr *el, bool add) {
        const struct nlattr *a[ATTRS_MAX], *k[ATTRS_MAX];
        fk_nested(el, a);
        fk_nested(a[NFTA_SET_ELEM_KEY], k);
        if (!k[NFTA_DATA_VALUE] || mnl_attr_get_payload_len(k[NFTA_DATA_VALUE]) != s->key_len)
                return fail(tx, -EINVAL, "an element of %s with a bad key", N(s->name));
        struct fk_elem e = {.key_len = s->key_len, .flags = fk_be32(a[NFTA_SET_ELEM_FLAGS])};
        memcpy(e.key, mnl_attr_get_payload(k[NFTA_DATA_VALUE]), s->key_len);
        const char *chain = NULL;
        e.verdict = a[NFTA_SET_ELEM_DATA] && verdict_of(a[NFTA_SET_ELEM_DATA], &e.code, &chain);

        buf_printf(&tx->journal, " %s ", s->name);
        fk_hex(&tx->journal, e.key, e.key_len);
        if (add && e.verdict)
                buf_printf(&tx->journal, " %s%s%s", e.code == NFT_GOTO ? "goto" : e.code == NFT_JUMP ? "jump" : "drop",
                           chain ? " " : "", chain ? chain : "");
        size_t i;
        struct fk_elem *old = fk_elem_find(s, e.key, e.key_len, e.flags, &i);
        if (!add) {
                if (!old)
                        return fail(tx, -ENOENT, "no such element in %s", N(s->name));
                elem_unref(t, old);
                fk_elem_done(old);
                memmove(&s->el[i], &s->el[i + 1], (s->n_el - i - 1) * sizeof *s->el);
                s->n_el--;
                return 0;
        }
        if (chain && !fk_chain_find(t, chain, NULL))
                return fail(tx, -ENOENT, "no chain %s for an element", N(chain));
        if (old) {
                bool same = old->verdict == e.verdict && old->code == e.code &&
                            strcmp(old->chain ? old->chain : "", chain ? chain : "") == 0;
                return same ? 0 : fail(tx, -EBUSY, "an element of %s has another value", N(s->name));
        }
        e.chain = chain ? fk_xstrdup(chain) : NULL;
        e.udata = fk_blob_of(a[NFTA_SET_ELEM_USERDATA]);
        if (chain)
                fk_chain_find(t, chain, NULL)->use++;
        s->el = fk_push(s->el, &s->n_el, sizeof *s->el);
        s->el[s->n_el - 1] = e;
        return 0;
}

static int set_elems(struct fk_txn *tx, const struct nlmsghdr *nlh, uint8_t family, bool add) {
        const struct nlattr *tb[ATTRS_MAX], *el;
        fk_attrs(nlh, tb);
        const char *tname = fk_str(tb[NFTA_SET_ELEM_LIST_TABLE]), *name = fk_str(tb[NFTA_SET_ELEM_LIST_SET]);
        struct fk_table *t = fk_table_find(tx->st, family, tname);
        if (t && tb[NFTA_SET_ELEM_LIST_SET_ID])
                name = set_by_id(tx, family, tname, fk_be32(tb[NFTA_SET_ELEM_LIST_SET_ID]));
        struct fk_set *s = fk_set_find(t, name, NULL);
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
                                   fk_family_name(family), t->name);
                        err = set_elem(tx, t, s, el, add);
                        buf_putc(&tx->journal, '\n');
                }
        return err;
}

/* Applies one message of a batch to tx's state. Returns 0 or -errno (the
 * reason in tx->err). */
int fk_apply(struct fk_txn *tx, const struct nlmsghdr *nlh) {
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

void fk_txn_done(struct fk_txn *tx) {
        for (size_t i = 0; i < tx->n_ids; i++) {
                free(tx->ids[i].table);
                free(tx->ids[i].name);
        }
        free(tx->ids);
        buf_done(&tx->journal);
}
