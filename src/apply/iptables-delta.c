/* SPDX-License-Identifier: Apache-2.0 */
#include "apply/iptables-delta.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apply/iptables-lines.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/fnv.h"
#include "util/hmap.h"

/* Chains shorter than this are written whole: cheap, and it spares the
 * tool reading the chain's rules back for -D and -I. */
#define DELTA_MIN_RULES 16

/* What the last sync left in one chain: its "-A NAME ..." lines. */
struct remembered {
        char *key;              /* "table NAME" */
        char *text;             /* the lines, each ending in '\n' */
        struct iptables_line *lines;
        size_t n;
};

struct iptables_delta {
        struct hmap chains;     /* key -> struct remembered */
        bool valid;
};

/* One table section of the input: the chains it declares that are not a
 * service's own, with the lines of their rules. */
struct section_chain {
        char key[96];
        const char *name;
        size_t name_len;
        struct iptables_line *lines;
        size_t n, cap;
        int verdict;            /* 0 whole, 1 unchanged, 2 by rule */
};

struct section {
        struct section_chain *c;
        size_t n, cap;
};

static void section_done(struct section *s) {
        for (size_t i = 0; i < s->n; i++)
                free(s->c[i].lines);
        free(s->c);
        *s = (struct section) {0};
}

static struct section_chain *section_find(struct section *s, const char *name, size_t n) {
        for (size_t i = 0; i < s->n; i++)
                if (s->c[i].name_len == n && memcmp(s->c[i].name, name, n) == 0)
                        return &s->c[i];
        return NULL;
}

/* Reads the section starting after its "*table" line; *p ends after COMMIT.
 * Top-level chains are few (a dozen), so a linear lookup does. */
static void section_read(const char **p, const char *end, const struct iptables_line *head, struct section *s) {
        const char *at = *p;
        struct iptables_line l;
        while (iptables_line_next(&at, end, &l) && !iptables_line_is_commit(&l)) {
                const char *name;
                size_t n;
                if (iptables_line_starts(&l, ":")) {
                        n = iptables_line_chain(&l, 1, &name);
                        if (iptables_chain_owned(name, n) || n + head->len + 2 > sizeof s->c[0].key ||
                            section_find(s, name, n))
                                continue;
                        if (s->n == s->cap) {
                                s->cap = s->cap ? s->cap * 2 : 16;
                                s->c = xrealloc(s->c, s->cap * sizeof *s->c);
                        }
                        struct section_chain *c = &s->c[s->n++];
                        *c = (struct section_chain) {.name = name, .name_len = n};
                        memcpy(c->key, head->p + 1, head->len - 1);
                        c->key[head->len - 1] = ' ';
                        memcpy(c->key + head->len, name, n);
                        c->key[head->len + n] = '\0';
                } else if (iptables_line_starts(&l, "-A ")) {
                        n = iptables_line_chain(&l, 3, &name);
                        struct section_chain *c = section_find(s, name, n);
                        if (!c)
                                continue;
                        if (c->n == c->cap) {
                                c->cap = c->cap ? c->cap * 2 : 64;
                                c->lines = xrealloc(c->lines, c->cap * sizeof *c->lines);
                        }
                        c->lines[c->n++] = l;
                }
        }
        *p = at;
}

static size_t slot_of(const struct iptables_line *l, size_t cap) {
        return (size_t) fnv64(FNV64_INIT, l->p, l->len) & (cap - 1);
}

static bool line_eq(const struct iptables_line *a, const struct iptables_line *b) {
        return a->len == b->len && memcmp(a->p, b->p, a->len) == 0;
}

/* old -> new as deletions and positioned insertions, written to out; false
 * (nothing written) when that does not fit: duplicate lines, reordered
 * lines, or too many changes for the chain's length. */
static bool write_by_rule(const struct remembered *old, const struct section_chain *c, struct buf *out) {
        size_t cap = 16, ops = 0;
        bool ok = true;
        while (cap < 2 * old->n)
                cap *= 2;
        size_t *slot = xmalloc(cap * sizeof *slot);       /* old index + 1, 0 empty */
        size_t *in_old = xmalloc((c->n + 1) * sizeof *in_old);
        bool *kept = xcalloc(old->n + 1, sizeof *kept);
        memset(slot, 0, cap * sizeof *slot);
        for (size_t i = 0; i < old->n && ok; i++) {
                size_t h = slot_of(&old->lines[i], cap);
                for (; slot[h]; h = (h + 1) & (cap - 1))
                        if (line_eq(&old->lines[slot[h] - 1], &old->lines[i]))
                                ok = false;     /* -D would take the first of two */
                slot[h] = i + 1;
        }
        size_t last = 0;
        for (size_t j = 0; j < c->n && ok; j++) {
                size_t h = slot_of(&c->lines[j], cap);
                in_old[j] = 0;
                for (; slot[h]; h = (h + 1) & (cap - 1))
                        if (line_eq(&old->lines[slot[h] - 1], &c->lines[j])) {
                                in_old[j] = slot[h];
                                break;
                        }
                if (in_old[j]) {
                        /* Kept lines in the same order, each once. */
                        ok = in_old[j] > last;
                        last = in_old[j];
                        kept[in_old[j] - 1] = true;
                } else {
                        ops++;
                }
        }
        for (size_t i = 0; i < old->n && ok; i++)
                ops += !kept[i];
        ok = ok && c->n >= DELTA_MIN_RULES && ops * 4 <= c->n;
        if (ok) {
                size_t skip = 3 + c->name_len;  /* "-A NAME" */
                for (size_t i = 0; i < old->n; i++)
                        if (!kept[i]) {
                                buf_puts(out, "-D ");
                                buf_put(out, c->name, c->name_len);
                                buf_put(out, old->lines[i].p + skip, old->lines[i].len - skip);
                                buf_putc(out, '\n');
                        }
                for (size_t j = 0; j < c->n; j++)
                        if (!in_old[j]) {
                                buf_puts(out, "-I ");
                                buf_put(out, c->name, c->name_len);
                                buf_putc(out, ' ');
                                buf_put_uint(out, j + 1);
                                buf_put(out, c->lines[j].p + skip, c->lines[j].len - skip);
                                buf_putc(out, '\n');
                        }
        }
        free(slot);
        free(in_old);
        free(kept);
        return ok;
}

static bool same_rules(const struct remembered *old, const struct section_chain *c) {
        if (old->n != c->n)
                return false;
        for (size_t i = 0; i < c->n; i++)
                if (!line_eq(&old->lines[i], &c->lines[i]))
                        return false;
        return true;
}

size_t iptables_delta_rewrite(const struct iptables_delta *d, const char *input, size_t len, struct buf *out) {
        const char *p = input, *end = input + len;
        struct buf delta = BUF_INIT;
        size_t changed = 0;
        struct iptables_line l;

        if (!d || !d->valid) {
                buf_put(out, input, len);
                return 0;
        }
        while (iptables_line_next(&p, end, &l)) {
                if (!iptables_line_starts(&l, "*")) {
                        buf_put(out, l.p, l.len);
                        buf_putc(out, '\n');
                        continue;
                }
                struct section s = {0};
                const char *body = p;
                section_read(&p, end, &l, &s);
                buf_clear(&delta);
                for (size_t i = 0; i < s.n; i++) {
                        struct section_chain *c = &s.c[i];
                        const struct remembered *old = hmap_get(&d->chains, c->key);
                        if (!old)
                                continue;
                        if (same_rules(old, c))
                                c->verdict = 1;
                        else if (write_by_rule(old, c, &delta))
                                c->verdict = 2;
                        changed += c->verdict != 0;
                }
                /* The section again, without what the verdicts replace; the
                 * changes by rule go before the first -X (a deleted chain may
                 * be the target of a rule they delete), else before COMMIT. */
                buf_put(out, l.p, l.len);
                buf_putc(out, '\n');
                bool delta_done = false;
                for (const char *q = body; q < p && iptables_line_next(&q, p, &l);) {
                        const char *name;
                        size_t n;
                        struct section_chain *c = NULL;
                        bool is_commit = iptables_line_is_commit(&l);
                        if (!delta_done && (is_commit || iptables_line_starts(&l, "-X "))) {
                                buf_put(out, delta.data, delta.len);
                                delta_done = true;
                        }
                        if (iptables_line_starts(&l, ":")) {
                                n = iptables_line_chain(&l, 1, &name);
                                c = section_find(&s, name, n);
                        } else if (iptables_line_starts(&l, "-A ")) {
                                n = iptables_line_chain(&l, 3, &name);
                                c = section_find(&s, name, n);
                        }
                        if (c && c->verdict != 0)
                                continue;
                        buf_put(out, l.p, l.len);
                        buf_putc(out, '\n');
                }
                section_done(&s);
        }
        buf_done(&delta);
        return changed;
}

static void remembered_free(struct remembered *r) {
        if (!r)
                return;
        free(r->key);
        free(r->text);
        free(r->lines);
        free(r);
}

void iptables_delta_forget(struct iptables_delta *d) {
        const char *k;
        void *v;
        for (size_t i = 0; hmap_next(&d->chains, &i, &k, &v);)
                remembered_free(v);
        hmap_done(&d->chains);
        d->chains = (struct hmap) HMAP_INIT;
        d->valid = false;
}

void iptables_delta_commit(struct iptables_delta *d, const char *input, size_t len) {
        const char *p = input, *end = input + len;
        struct iptables_line l;

        iptables_delta_forget(d);
        while (iptables_line_next(&p, end, &l)) {
                if (!iptables_line_starts(&l, "*"))
                        continue;
                struct section s = {0};
                section_read(&p, end, &l, &s);
                for (size_t i = 0; i < s.n; i++) {
                        const struct section_chain *c = &s.c[i];
                        struct remembered *r = xcalloc(1, sizeof *r);
                        struct buf text = BUF_INIT;
                        r->key = xstrdup(c->key);
                        for (size_t j = 0; j < c->n; j++) {
                                buf_put(&text, c->lines[j].p, c->lines[j].len);
                                buf_putc(&text, '\n');
                        }
                        r->n = c->n;
                        r->text = buf_steal(&text);
                        r->lines = xmalloc((c->n + 1) * sizeof *r->lines);
                        const char *q = r->text;
                        for (size_t j = 0; j < c->n; j++) {
                                r->lines[j] = (struct iptables_line) {q, c->lines[j].len};
                                q += c->lines[j].len + 1;
                        }
                        remembered_free(hmap_put(&d->chains, r->key, r));
                }
                section_done(&s);
        }
        d->valid = true;
}

struct iptables_delta *iptables_delta_new(void) {
        return xcalloc(1, sizeof(struct iptables_delta));
}

void iptables_delta_free(struct iptables_delta *d) {
        if (!d)
                return;
        iptables_delta_forget(d);
        free(d);
}
