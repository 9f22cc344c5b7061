/* SPDX-License-Identifier: Apache-2.0 */
/*
 * restore-model.h's model: small and slow on purpose (linear lookups,
 * whole copies per transaction), so that it is obviously right; the
 * harness's inputs are a few kilobytes.
 */
#include "restore-model.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

struct rm_chain {
        char *name;
        char **rules;           /* the text after "-A NAME", leading space included */
        size_t n, cap;
};

struct rm_table {
        char *name;
        struct rm_chain *chains;
        size_t n, cap;
};

struct rm_state {
        struct rm_table *tables;
        size_t n, cap;
        char **names;           /* rm_chain_name()'s */
        size_t n_names, cap_names;
};

static void *grow(void *v, size_t *cap, size_t n, size_t size) {
        if (n < *cap)
                return v;
        *cap = *cap ? *cap * 2 : 8;
        v = realloc(v, *cap * size);
        if (!v)
                abort();
        return v;
}

static char *dupn(const char *s, size_t n) {
        char *d = malloc(n + 1);
        if (!d)
                abort();
        memcpy(d, s, n);
        d[n] = '\0';
        return d;
}

struct rm_state *rm_new(void) {
        struct rm_state *s = calloc(1, sizeof *s);
        if (!s)
                abort();
        return s;
}

static void chain_done(struct rm_chain *c) {
        for (size_t i = 0; i < c->n; i++)
                free(c->rules[i]);
        free(c->rules);
        free(c->name);
}

static void tables_done(struct rm_state *s) {
        for (size_t t = 0; t < s->n; t++) {
                for (size_t c = 0; c < s->tables[t].n; c++)
                        chain_done(&s->tables[t].chains[c]);
                free(s->tables[t].chains);
                free(s->tables[t].name);
        }
        free(s->tables);
        s->tables = NULL;
        s->n = s->cap = 0;
}

void rm_free(struct rm_state *s) {
        if (!s)
                return;
        tables_done(s);
        for (size_t i = 0; i < s->n_names; i++)
                free(s->names[i]);
        free(s->names);
        free(s);
}

static void copy_table(struct rm_table *to, const struct rm_table *from) {
        *to = (struct rm_table) {.name = strdup(from->name), .n = from->n, .cap = from->n};
        to->chains = calloc(from->n + 1, sizeof *to->chains);
        if (!to->name || !to->chains)
                abort();
        for (size_t c = 0; c < from->n; c++) {
                const struct rm_chain *fc = &from->chains[c];
                struct rm_chain *tc = &to->chains[c];
                *tc = (struct rm_chain) {.name = strdup(fc->name), .n = fc->n, .cap = fc->n};
                tc->rules = calloc(fc->n + 1, sizeof *tc->rules);
                if (!tc->name || !tc->rules)
                        abort();
                for (size_t r = 0; r < fc->n; r++)
                        if (!(tc->rules[r] = strdup(fc->rules[r])))
                                abort();
        }
}

struct rm_state *rm_copy(const struct rm_state *s) {
        struct rm_state *d = rm_new();
        d->tables = calloc(s->n + 1, sizeof *d->tables);
        if (!d->tables)
                abort();
        d->n = d->cap = s->n;
        for (size_t t = 0; t < s->n; t++)
                copy_table(&d->tables[t], &s->tables[t]);
        for (size_t i = 0; i < s->n_names; i++)
                rm_chain_name(d, s->names[i], strlen(s->names[i]));
        return d;
}

static struct rm_table *find_table(const struct rm_state *s, const char *name, size_t n) {
        for (size_t t = 0; t < s->n; t++)
                if (strlen(s->tables[t].name) == n && memcmp(s->tables[t].name, name, n) == 0)
                        return &s->tables[t];
        return NULL;
}

static struct rm_chain *find_chain(const struct rm_table *t, const char *name, size_t n) {
        for (size_t c = 0; c < t->n; c++)
                if (strlen(t->chains[c].name) == n && memcmp(t->chains[c].name, name, n) == 0)
                        return &t->chains[c];
        return NULL;
}

bool rm_equal(const struct rm_state *a, const struct rm_state *b) {
        for (int pass = 0; pass < 2; pass++) {
                const struct rm_state *x = pass ? b : a, *y = pass ? a : b;
                for (size_t t = 0; t < x->n; t++) {
                        const struct rm_table *tx = &x->tables[t];
                        const struct rm_table *ty = find_table(y, tx->name, strlen(tx->name));
                        if (!ty) {
                                if (tx->n)
                                        return false;
                                continue;
                        }
                        if (tx->n != ty->n)
                                return false;
                        for (size_t c = 0; c < tx->n; c++) {
                                const struct rm_chain *cx = &tx->chains[c];
                                const struct rm_chain *cy = find_chain(ty, cx->name, strlen(cx->name));
                                if (!cy || cx->n != cy->n)
                                        return false;
                                for (size_t r = 0; r < cx->n; r++)
                                        if (strcmp(cx->rules[r], cy->rules[r]) != 0)
                                                return false;
                        }
                }
        }
        return true;
}

void rm_chain_name(struct rm_state *s, const char *name, size_t len) {
        for (size_t i = 0; i < s->n_names; i++)
                if (strlen(s->names[i]) == len && memcmp(s->names[i], name, len) == 0)
                        return;
        s->names = grow(s->names, &s->cap_names, s->n_names, sizeof *s->names);
        s->names[s->n_names++] = dupn(name, len);
}

/* The line [p, p + n) as the next of text; false at the end. */
static bool next_line(const char **at, const char *end, const char **p, size_t *n) {
        if (*at >= end)
                return false;
        const char *nl = memchr(*at, '\n', (size_t) (end - *at));
        *p = *at;
        *n = nl ? (size_t) (nl - *at) : (size_t) (end - *at);
        *at = nl ? nl + 1 : end;
        return true;
}

/* The word at p (up to a space or the end of the line). */
static size_t word(const char *p, const char *end) {
        size_t n = 0;
        while (p + n < end && p[n] != ' ')
                n++;
        return n;
}

void rm_chain_names_of(struct rm_state *s, const char *text, size_t len) {
        const char *at = text, *end = text + len, *p;
        size_t n;
        while (next_line(&at, end, &p, &n))
                if (n > 1 && p[0] == ':')
                        rm_chain_name(s, p + 1, word(p + 1, p + n));
}

static bool is_chain_name(const struct rm_state *s, const char *name, size_t n) {
        for (size_t i = 0; i < s->n_names; i++)
                if (strlen(s->names[i]) == n && memcmp(s->names[i], name, n) == 0)
                        return true;
        return false;
}

/* Whether each -j/-g target of a rule (words; quoted ones whole) that
 * names a chain names one of t, or (deleting) whether none is that one. */
static bool targets_ok(const struct rm_state *s, const struct rm_table *t, const char *rule,
                       const char *deleting, size_t deleting_len) {
        bool next_is_target = false;
        for (const char *p = rule; *p;) {
                while (*p == ' ')
                        p++;
                if (!*p)
                        break;
                const char *tok = p;
                if (*p == '"') {
                        const char *q = strchr(p + 1, '"');
                        p = q ? q + 1 : p + strlen(p);
                } else {
                        p += strcspn(p, " ");
                }
                size_t n = (size_t) (p - tok);
                if (next_is_target) {
                        if (deleting && n == deleting_len && memcmp(tok, deleting, n) == 0)
                                return false;
                        if (!deleting && is_chain_name(s, tok, n) && !find_chain(t, tok, n))
                                return false;
                }
                next_is_target = n == 2 && tok[0] == '-' && (tok[1] == 'j' || tok[1] == 'g');
        }
        return true;
}

static bool table_refs_ok(const struct rm_state *s, const struct rm_table *t, const char *deleting, size_t len) {
        for (size_t c = 0; c < t->n; c++)
                for (size_t r = 0; r < t->chains[c].n; r++)
                        if (!targets_ok(s, t, t->chains[c].rules[r], deleting, len))
                                return false;
        return true;
}

static void insert_rule(struct rm_chain *c, size_t at, const char *rule, size_t n) {
        c->rules = grow(c->rules, &c->cap, c->n, sizeof *c->rules);
        memmove(c->rules + at + 1, c->rules + at, (c->n - at) * sizeof *c->rules);
        c->rules[at] = dupn(rule, n);
        c->n++;
}

/* How many -j/-g words a rule has (quoted words skipped whole): the tool
 * refuses a rule with more than one ("multiple -j flags not allowed"). */
static size_t count_targets(const char *p, size_t n) {
        const char *end = p + n;
        size_t count = 0;
        while (p < end) {
                while (p < end && *p == ' ')
                        p++;
                if (p == end)
                        break;
                const char *tok = p;
                if (*p == '"') {
                        const char *q = memchr(p + 1, '"', (size_t) (end - p - 1));
                        p = q ? q + 1 : end;
                } else {
                        while (p < end && *p != ' ')
                                p++;
                }
                if (p - tok == 2 && tok[0] == '-' && (tok[1] == 'j' || tok[1] == 'g'))
                        count++;
        }
        return count;
}

/* One line of a section onto table t: 0, -1 (the tool would fail), -2. */
static int apply_line(struct rm_state *s, struct rm_table *t, const char *p, size_t n) {
        const char *end = p + n;
        if (n > 1 && p[0] == ':') {
                size_t w = word(p + 1, end);
                if (w == 0 || p + 1 + w == end)
                        return -2;      /* no policy */
                struct rm_chain *c = find_chain(t, p + 1, w);
                if (c) {
                        for (size_t r = 0; r < c->n; r++)
                                free(c->rules[r]);
                        c->n = 0;
                        return 0;
                }
                t->chains = grow(t->chains, &t->cap, t->n, sizeof *t->chains);
                t->chains[t->n++] = (struct rm_chain) {.name = dupn(p + 1, w)};
                return 0;
        }
        if (n < 4 || p[0] != '-' || p[2] != ' ' || !strchr("AIDX", p[1]))
                return -2;
        const char *name = p + 3;
        size_t w = word(name, end);
        const char *rest = name + w;
        size_t rest_n = (size_t) (end - rest);
        if (w == 0)
                return -2;
        struct rm_chain *c = find_chain(t, name, w);
        if (p[1] != 'X' && count_targets(rest, rest_n) > 1)
                return -1;
        switch (p[1]) {
        case 'A':
                if (!c)
                        return -1;
                insert_rule(c, c->n, rest, rest_n);
                return 0;
        case 'I': {
                size_t pos = 0, k = 1;
                if (rest_n < 2 || rest[0] != ' ')
                        return -2;
                while (k < rest_n && rest[k] >= '0' && rest[k] <= '9' && pos < 1000000)
                        pos = pos * 10 + (size_t) (rest[k++] - '0');
                if (k == 1)
                        return -2;
                if (!c || pos < 1 || pos > c->n + 1)
                        return -1;
                insert_rule(c, pos - 1, rest + k, rest_n - k);
                return 0;
        }
        case 'D':
                if (!c)
                        return -1;
                for (size_t r = 0; r < c->n; r++)
                        if (strlen(c->rules[r]) == rest_n && memcmp(c->rules[r], rest, rest_n) == 0) {
                                free(c->rules[r]);
                                memmove(c->rules + r, c->rules + r + 1, (c->n - r - 1) * sizeof *c->rules);
                                c->n--;
                                return 0;
                        }
                return -1;
        default: /* X */
                if (rest_n != 0)
                        return -2;
                if (!c || c->n != 0 || !table_refs_ok(s, t, name, w))
                        return -1;
                chain_done(c);
                *c = t->chains[--t->n];
                return 0;
        }
}

/* The next -j/-g target of a rule from *at on (NULL: none left). */
static const char *next_target(const char **at, size_t *ret_n) {
        bool next_is_target = false;
        for (const char *p = *at; *p;) {
                while (*p == ' ')
                        p++;
                if (!*p)
                        break;
                const char *tok = p;
                if (*p == '"') {
                        const char *q = strchr(p + 1, '"');
                        p = q ? q + 1 : p + strlen(p);
                } else {
                        p += strcspn(p, " ");
                }
                size_t n = (size_t) (p - tok);
                if (next_is_target) {
                        *at = p;
                        *ret_n = n;
                        return tok;
                }
                next_is_target = n == 2 && tok[0] == '-' && (tok[1] == 'j' || tok[1] == 'g');
        }
        return NULL;
}

/* Whether chain c of t reaches itself through jumps (color: 0 unseen,
 * 1 on the path, 2 done). */
static bool loops_from(const struct rm_table *t, size_t c, unsigned char *color) {
        color[c] = 1;
        for (size_t r = 0; r < t->chains[c].n; r++) {
                const char *at = t->chains[c].rules[r], *tok;
                size_t n;
                while ((tok = next_target(&at, &n))) {
                        const struct rm_chain *d = find_chain(t, tok, n);
                        size_t di = d ? (size_t) (d - t->chains) : 0;
                        if (d && (color[di] == 1 || (color[di] == 0 && loops_from(t, di, color))))
                                return true;
                }
        }
        color[c] = 2;
        return false;
}

/* The kernel refuses a table whose jumps loop (ELOOP), whole. */
static bool table_has_loop(const struct rm_table *t) {
        unsigned char *color = calloc(t->n + 1, 1);
        bool loop = false;
        if (!color)
                abort();
        for (size_t c = 0; c < t->n && !loop; c++)
                loop = color[c] == 0 && loops_from(t, c, color);
        free(color);
        return loop;
}

int rm_apply(struct rm_state *s, const char *text, size_t len) {
        const char *at = text, *end = text + len, *p;
        struct rm_state *work = NULL;
        struct rm_table *t = NULL;
        size_t n;
        int r = 0;

        while (r == 0 && next_line(&at, end, &p, &n)) {
                if (n == 0 || p[0] == '#')
                        continue;
                if (!work) {
                        if (p[0] != '*' || n < 2 || word(p + 1, p + n) != n - 1)
                                return -2;
                        work = rm_copy(s);
                        t = find_table(work, p + 1, n - 1);
                        if (!t) {
                                work->tables = grow(work->tables, &work->cap, work->n, sizeof *work->tables);
                                t = &work->tables[work->n++];
                                *t = (struct rm_table) {.name = dupn(p + 1, n - 1)};
                        }
                } else if (n == 6 && memcmp(p, "COMMIT", 6) == 0) {
                        if (!table_refs_ok(work, t, NULL, 0) || table_has_loop(t)) {
                                r = -1;
                                break;
                        }
                        /* The transaction holds: it becomes the state. */
                        tables_done(s);
                        s->tables = work->tables;
                        s->n = work->n;
                        s->cap = work->cap;
                        work->tables = NULL;
                        work->n = work->cap = 0;
                        rm_free(work);
                        work = NULL;
                } else if (p[0] == '*') {
                        r = -2;
                } else {
                        r = apply_line(work, t, p, n);
                }
        }
        if (work) {
                rm_free(work);
                if (r == 0)
                        r = -2;         /* no COMMIT */
        }
        return r;
}

bool rm_rendered_shape(const char *text, size_t len) {
        const char *at = text, *end = text + len, *p;
        struct buf tables = BUF_INIT, decl = BUF_INIT, ruled = BUF_INIT;
        bool ok = true, in = false;
        int phase = 0;          /* 0 declarations, 1 rules, 2 deletions */
        size_t n;

        while (ok && next_line(&at, end, &p, &n)) {
                if (!in) {
                        ok = n >= 2 && p[0] == '*' && word(p + 1, p + n) == n - 1;
                        if (!ok)
                                break;
                        /* Each table once: names kept as " name " in tables. */
                        char key[256];
                        if (n + 2 > sizeof key)
                                ok = false;
                        else {
                                snprintf(key, sizeof key, " %.*s ", (int) (n - 1), p + 1);
                                ok = !tables.data || !strstr(tables.data, key);
                                buf_puts(&tables, key);
                        }
                        in = true;
                        phase = 0;
                        buf_clear(&decl);
                        buf_clear(&ruled);
                        continue;
                }
                if (n == 6 && memcmp(p, "COMMIT", 6) == 0) {
                        in = false;
                        continue;
                }
                char key[256];
                size_t w = n > 1 ? word(p + (p[0] == ':' ? 1 : 3), p + n) : 0;
                const char *name = p + (p[0] == ':' ? 1 : 3);
                if (n < 4 || w == 0 || w + 3 > sizeof key) {
                        ok = false;
                        break;
                }
                snprintf(key, sizeof key, " %.*s ", (int) w, name);
                bool declared = decl.data && strstr(decl.data, key);
                if (p[0] == ':') {
                        ok = phase == 0 && !declared && name + w < p + n;
                        buf_puts(&decl, key);
                } else if (memcmp(p, "-A ", 3) == 0) {
                        ok = phase <= 1 && declared && n > 3 + w + 2 && name[w + 1] == '-';
                        phase = 1;
                        buf_puts(&ruled, key);
                } else if (memcmp(p, "-X ", 3) == 0) {
                        ok = declared && name + w == p + n && !(ruled.data && strstr(ruled.data, key));
                        phase = 2;
                } else {
                        ok = false;
                }
        }
        buf_done(&tables);
        buf_done(&decl);
        buf_done(&ruled);
        return ok && !in;
}

void rm_save(const struct rm_state *s, const char *table, struct buf *out) {
        const struct rm_table *t = find_table(s, table, strlen(table));
        if (!t)
                return;
        buf_printf(out, "*%s\n", table);
        for (size_t c = 0; c < t->n; c++)
                buf_printf(out, ":%s - [0:0]\n", t->chains[c].name);
        for (size_t c = 0; c < t->n; c++)
                for (size_t r = 0; r < t->chains[c].n; r++)
                        buf_printf(out, "-A %s%s\n", t->chains[c].name, t->chains[c].rules[r]);
        buf_puts(out, "COMMIT\n");
}

void rm_tables(const struct rm_state *s, struct buf *out) {
        for (size_t t = 0; t < s->n; t++) {
                buf_puts(out, s->tables[t].name);
                buf_putc(out, '\0');
        }
}
