/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fake kernel's objects: tables, chains and their rules, sets and their
 * elements, kept by name in small arrays (unit tests' tables are small),
 * freed and copied whole (a batch is applied to a copy), found by name,
 * and written out as text in a canonical order.
 */
#include "nft-fake-internal.h"

#include <linux/netfilter.h>
#include <stdio.h>
#include <stdlib.h>

void *fk_xcalloc(size_t n, size_t size) {
        void *p = calloc(n ? n : 1, size);
        if (!p)
                abort();
        return p;
}

char *fk_xstrdup(const char *s) {
        char *p = strdup(s);
        if (!p)
                abort();
        return p;
}

/* Appends one element of size to *v (n elements), returning it zeroed. */
void *fk_push(void *v, size_t *n, size_t size) {
        char *p = realloc(v, (*n + 1) * size);
        if (!p)
                abort();
        memset(p + *n * size, 0, size);
        (*n)++;
        return p;
}

static struct blob blob_dup(const void *p, size_t len) {
        struct blob b = {fk_xcalloc(1, len), len, true};
        memcpy(b.p, p, len);
        return b;
}

struct blob fk_blob_of(const struct nlattr *a) {
        if (!a)
                return (struct blob) {NULL, 0, false};
        return blob_dup(mnl_attr_get_payload(a), mnl_attr_get_payload_len(a));
}

static struct blob blob_copy(const struct blob *b) {
        return b->set ? blob_dup(b->p, b->len) : (struct blob) {NULL, 0, false};
}

static char **strv_copy(char **v, size_t n) {
        char **c = fk_xcalloc(n, sizeof *c);
        for (size_t i = 0; i < n; i++)
                c[i] = fk_xstrdup(v[i]);
        return c;
}

static void strv_free(char **v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

void fk_hex(struct buf *b, const uint8_t *p, size_t len) {
        for (size_t i = 0; i < len; i++)
                buf_printf(b, "%02x", p[i]);
}

/* --- the state: freeing and copying --- */

void fk_elem_done(struct fk_elem *e) {
        free(e->chain);
        free(e->udata.p);
}

void fk_set_free(struct fk_set *s) {
        for (size_t i = 0; i < s->n_el; i++)
                fk_elem_done(&s->el[i]);
        free(s->el);
        free(s->name);
        free(s->udata.p);
        free(s);
}

void fk_rule_done(struct fk_rule *r) {
        free(r->exprs.p);
        free(r->udata.p);
        strv_free(r->chains, r->n_chains);
        strv_free(r->sets, r->n_sets);
        free(r->text);
}

void fk_chain_free(struct fk_chain *c) {
        for (size_t i = 0; i < c->n_rules; i++)
                fk_rule_done(&c->rules[i]);
        free(c->rules);
        free(c->name);
        free(c->type);
        free(c->udata.p);
        free(c);
}

void fk_table_free(struct fk_table *t) {
        for (size_t i = 0; i < t->n_chains; i++)
                fk_chain_free(t->chains[i]);
        for (size_t i = 0; i < t->n_sets; i++)
                fk_set_free(t->sets[i]);
        free(t->chains);
        free(t->sets);
        free(t->name);
        free(t->udata.p);
        free(t);
}

void fk_state_done(struct fk_state *s) {
        for (size_t i = 0; i < s->n; i++)
                fk_table_free(s->t[i]);
        free(s->t);
        *s = (struct fk_state) {NULL, 0};
}

static struct fk_set *set_copy(const struct fk_set *s) {
        struct fk_set *c = fk_xcalloc(1, sizeof *c);
        *c = *s;
        c->name = fk_xstrdup(s->name);
        c->udata = blob_copy(&s->udata);
        c->el = fk_xcalloc(s->n_el, sizeof *c->el);
        for (size_t i = 0; i < s->n_el; i++) {
                c->el[i] = s->el[i];
                c->el[i].chain = s->el[i].chain ? fk_xstrdup(s->el[i].chain) : NULL;
                c->el[i].udata = blob_copy(&s->el[i].udata);
        }
        return c;
}

static struct fk_chain *chain_copy(const struct fk_chain *s) {
        struct fk_chain *c = fk_xcalloc(1, sizeof *c);
        *c = *s;
        c->name = fk_xstrdup(s->name);
        c->type = s->type ? fk_xstrdup(s->type) : NULL;
        c->udata = blob_copy(&s->udata);
        c->rules = fk_xcalloc(s->n_rules, sizeof *c->rules);
        for (size_t i = 0; i < s->n_rules; i++) {
                const struct fk_rule *r = &s->rules[i];
                c->rules[i] = (struct fk_rule) {r->handle, blob_copy(&r->exprs), blob_copy(&r->udata),
                                                strv_copy(r->chains, r->n_chains), r->n_chains,
                                                strv_copy(r->sets, r->n_sets), r->n_sets, fk_xstrdup(r->text)};
        }
        return c;
}

void fk_state_copy(const struct fk_state *s, struct fk_state *out) {
        out->n = s->n;
        out->t = fk_xcalloc(s->n, sizeof *out->t);
        for (size_t i = 0; i < s->n; i++) {
                const struct fk_table *t = s->t[i];
                struct fk_table *c = out->t[i] = fk_xcalloc(1, sizeof *c);
                *c = *t;
                c->name = fk_xstrdup(t->name);
                c->udata = blob_copy(&t->udata);
                c->chains = fk_xcalloc(t->n_chains, sizeof *c->chains);
                for (size_t j = 0; j < t->n_chains; j++)
                        c->chains[j] = chain_copy(t->chains[j]);
                c->sets = fk_xcalloc(t->n_sets, sizeof *c->sets);
                for (size_t j = 0; j < t->n_sets; j++)
                        c->sets[j] = set_copy(t->sets[j]);
        }
}

/* --- finding --- */

struct fk_table *fk_table_find(const struct fk_state *s, uint8_t family, const char *name) {
        for (size_t i = 0; name && i < s->n; i++)
                if (s->t[i]->family == family && strcmp(s->t[i]->name, name) == 0)
                        return s->t[i];
        return NULL;
}

struct fk_chain *fk_chain_find(const struct fk_table *t, const char *name, size_t *ret_i) {
        for (size_t i = 0; t && name && i < t->n_chains; i++)
                if (strcmp(t->chains[i]->name, name) == 0) {
                        if (ret_i)
                                *ret_i = i;
                        return t->chains[i];
                }
        return NULL;
}

struct fk_set *fk_set_find(const struct fk_table *t, const char *name, size_t *ret_i) {
        for (size_t i = 0; t && name && i < t->n_sets; i++)
                if (strcmp(t->sets[i]->name, name) == 0) {
                        if (ret_i)
                                *ret_i = i;
                        return t->sets[i];
                }
        return NULL;
}

struct fk_elem *fk_elem_find(const struct fk_set *s, const uint8_t *key, size_t len, uint32_t flags,
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

const char *fk_family_name(uint8_t family) {
        return family == NFPROTO_IPV6 ? "ip6" : family == NFPROTO_IPV4 ? "ip" : "?";
}

/* --- text --- */

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

void fk_table_text(const struct fk_table *t, struct buf *out) {
        char **items = fk_xcalloc(t->n_chains + t->n_sets, sizeof *items);
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
                        fk_hex(&b, c->udata.p, c->udata.len);
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
                        fk_hex(&b, s->udata.p, s->udata.len);
                }
                buf_putc(&b, '\n');
                char **el = fk_xcalloc(s->n_el, sizeof *el);
                for (size_t j = 0; j < s->n_el; j++) {
                        struct buf e = BUF_INIT;
                        buf_puts(&e, "    element ");
                        fk_hex(&e, s->el[j].key, s->el[j].key_len);
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
