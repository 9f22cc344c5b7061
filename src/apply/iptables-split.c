/* SPDX-License-Identifier: Apache-2.0 */
#include "apply/iptables-split.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apply/iptables-lines.h"
#include "util/buf.h"
#include "util/hmap.h"

/* Deeper jump nesting than this is not kproxy's (five levels at most);
 * such chains are simply written in input order. */
#define MAX_LEVEL 64

struct chain {
        char *name;
        size_t decl;            /* line index of ":NAME ...", or SIZE_MAX */
        size_t first_rule;      /* into split.rule_of_chain, after counting */
        size_t n_rules;
        int level;              /* -1: not computed yet */
        bool deleted;           /* the section has "-X NAME" */
        bool visiting;
};

struct split {
        struct iptables_line *line;     /* the input's lines, read in place (not copied: it is
                                         * tens of megabytes in a cold start) */
        size_t n_lines;
        struct chain *chains;
        size_t n_chains, cap_chains;
        struct hmap by_name;    /* name -> index + 1 */
        size_t *rule_chain;     /* per line: chain index of an -A line, else SIZE_MAX */
        size_t *rules;          /* rule line indices grouped by chain */
};

/* The chain a line names after its two-character command (":NAME ...",
 * "-A NAME ...", "-X NAME"; skip is 1 or 3), created on first sight. */
static size_t chain_of(struct split *s, const struct iptables_line *l, size_t skip) {
        size_t n = 0;
        char name[64];
        while (skip + n < l->len && l->p[skip + n] != ' ' && l->p[skip + n] != '\t')
                n++;
        if (n == 0 || n >= sizeof name)
                return SIZE_MAX;
        memcpy(name, l->p + skip, n);
        name[n] = '\0';
        void *v = hmap_get(&s->by_name, name);
        if (v)
                return (size_t) (uintptr_t) v - 1;
        if (s->n_chains == s->cap_chains) {
                s->cap_chains = s->cap_chains ? s->cap_chains * 2 : 256;
                s->chains = realloc(s->chains, s->cap_chains * sizeof *s->chains);
                if (!s->chains)
                        abort();
        }
        struct chain *c = &s->chains[s->n_chains];
        *c = (struct chain) {.name = strdup(name), .decl = SIZE_MAX, .level = -1};
        if (!c->name)
                abort();
        hmap_put(&s->by_name, c->name, (void *) (uintptr_t) (s->n_chains + 1));
        return s->n_chains++;
}

/* The target of a rule's -j or -g, skipping quoted arguments. */
static const char *jump_target(const struct iptables_line *rule, size_t *ret_len) {
        const char *target = NULL, *p = rule->p, *end = rule->p + rule->len;
        bool next_is_target = false;
        while (p < end) {
                while (p < end && *p == ' ')
                        p++;
                if (p == end)
                        break;
                const char *tok = p;
                if (*p == '"') {
                        p = memchr(p + 1, '"', (size_t) (end - p - 1));
                        p = p ? p + 1 : end;
                } else {
                        while (p < end && *p != ' ')
                                p++;
                }
                size_t n = (size_t) (p - tok);
                if (next_is_target) {
                        target = tok;
                        *ret_len = n;
                        next_is_target = false;
                } else {
                        next_is_target = n == 2 && tok[0] == '-' && (tok[1] == 'j' || tok[1] == 'g');
                }
        }
        return target;
}

static int chain_level(struct split *s, size_t ci, int depth) {
        struct chain *c = &s->chains[ci];
        if (c->level >= 0)
                return c->level;
        if (c->visiting || depth > MAX_LEVEL)
                return 0;
        c->visiting = true;
        int level = 0;
        for (size_t k = 0; k < c->n_rules; k++) {
                size_t n = 0;
                const char *t = jump_target(&s->line[s->rules[c->first_rule + k]], &n);
                char name[64];
                if (!t || n >= sizeof name)
                        continue;
                memcpy(name, t, n);
                name[n] = '\0';
                void *v = hmap_get(&s->by_name, name);
                if (!v)
                        continue;
                size_t ti = (size_t) (uintptr_t) v - 1;
                if (s->chains[ti].decl == SIZE_MAX || s->chains[ti].deleted)
                        continue;
                int l = chain_level(s, ti, depth + 1) + 1;
                if (l > level)
                        level = l;
        }
        c = &s->chains[ci];
        c->visiting = false;
        c->level = level > MAX_LEVEL ? MAX_LEVEL : level;
        return c->level;
}

static void split_reset(struct split *s) {
        for (size_t i = 0; i < s->n_chains; i++)
                free(s->chains[i].name);
        s->n_chains = 0;
        hmap_done(&s->by_name);
        s->by_name = (struct hmap) HMAP_INIT;
}

static void put_line(struct buf *b, const struct iptables_line *l) {
        buf_put(b, l->p, l->len);
        buf_putc(b, '\n');
}

static bool line_is(const struct iptables_line *l, char c) {
        return l->len > 0 && l->p[0] == c;
}

/* Indexes the chains of the section (head, end): declarations, rules,
 * deletions. False when the section must be restored whole (a line this
 * does not understand, a chain declared twice, too many chains). */
static bool index_section(struct split *s, size_t head, size_t end) {
        for (size_t i = head + 1; i < end; i++) {
                const struct iptables_line *l = &s->line[i];
                size_t ci;
                s->rule_chain[i] = SIZE_MAX;
                if (l->len == 0 || line_is(l, '#'))
                        continue;
                if (line_is(l, ':')) {
                        ci = chain_of(s, l, 1);
                        if (ci == SIZE_MAX || s->chains[ci].decl != SIZE_MAX)
                                return false;
                        s->chains[ci].decl = i;
                } else if (iptables_line_starts(l, "-A ")) {
                        ci = chain_of(s, l, 3);
                        if (ci == SIZE_MAX)
                                return false;
                        s->rule_chain[i] = ci;
                        s->chains[ci].n_rules++;
                } else if (iptables_line_starts(l, "-X ")) {
                        ci = chain_of(s, l, 3);
                        if (ci == SIZE_MAX)
                                return false;
                        s->chains[ci].deleted = true;
                } else {
                        return false;
                }
        }
        return true;
}

/* Rules grouped by chain, each group in input order. */
static void group_rules(struct split *s, size_t head, size_t end) {
        size_t at = 0;
        for (size_t c = 0; c < s->n_chains; c++) {
                s->chains[c].first_rule = at;
                at += s->chains[c].n_rules;
                s->chains[c].n_rules = 0;
        }
        for (size_t i = head + 1; i < end; i++)
                if (s->rule_chain[i] != SIZE_MAX) {
                        struct chain *c = &s->chains[s->rule_chain[i]];
                        s->rules[c->first_rule + c->n_rules++] = i;
                }
}

/* Declared chains that stay, by level, then input order (counting sort).
 * Returns the order (to free) and its length; *ret_last says whether a
 * last piece is needed (rules to undeclared chains, deletions). */
static size_t *order_chains(struct split *s, size_t *ret_n, bool *ret_last) {
        size_t count[MAX_LEVEL + 2] = {0}, n_order = 0;
        *ret_last = false;
        for (size_t c = 0; c < s->n_chains; c++) {
                if (s->chains[c].decl == SIZE_MAX || s->chains[c].deleted) {
                        *ret_last = true;
                        continue;
                }
                count[chain_level(s, c, 0) + 1]++;
                n_order++;
        }
        for (size_t l = 1; l < MAX_LEVEL + 2; l++)
                count[l] += count[l - 1];
        size_t *order = malloc((n_order + 1) * sizeof *order);
        if (!order)
                abort();
        for (size_t c = 0; c < s->n_chains; c++)
                if (s->chains[c].decl != SIZE_MAX && !s->chains[c].deleted)
                        order[count[s->chains[c].level]++] = c;
        *ret_n = n_order;
        return order;
}

/* The declared chains in pieces of about max_lines, each whole chains
 * after the chains they jump to. */
static int emit_pieces(struct split *s, size_t head, size_t end, const size_t *order, size_t n_order,
                       size_t max_lines, iptables_split_fn fn, void *userdata) {
        struct buf piece = BUF_INIT;
        int r = 0;

        for (size_t k = 0; k < n_order && r >= 0;) {
                size_t from = k, lines = 0;
                while (k < n_order && (lines == 0 || lines < max_lines)) {
                        lines += 1 + s->chains[order[k]].n_rules;
                        k++;
                }
                buf_clear(&piece);
                put_line(&piece, &s->line[head]);
                for (size_t j = from; j < k; j++)
                        put_line(&piece, &s->line[s->chains[order[j]].decl]);
                for (size_t j = from; j < k; j++) {
                        const struct chain *c = &s->chains[order[j]];
                        for (size_t q = 0; q < c->n_rules; q++)
                                put_line(&piece, &s->line[s->rules[c->first_rule + q]]);
                }
                put_line(&piece, &s->line[end]);
                r = fn(piece.data, piece.len, userdata);
        }
        buf_done(&piece);
        return r;
}

/* Last: rules appended to chains the input does not declare, and the
 * chains it deletes, each kind in input order. */
static int emit_last_piece(struct split *s, size_t head, size_t end, iptables_split_fn fn, void *userdata) {
        struct buf piece = BUF_INIT;

        put_line(&piece, &s->line[head]);
        for (size_t i = head + 1; i < end; i++)
                if (line_is(&s->line[i], ':')) {
                        const struct chain *c = &s->chains[chain_of(s, &s->line[i], 1)];
                        if (c->deleted)
                                put_line(&piece, &s->line[i]);
                }
        for (size_t i = head + 1; i < end; i++)
                if (s->rule_chain[i] != SIZE_MAX) {
                        const struct chain *c = &s->chains[s->rule_chain[i]];
                        if (c->decl == SIZE_MAX || c->deleted)
                                put_line(&piece, &s->line[i]);
                }
        for (size_t i = head + 1; i < end; i++)
                if (iptables_line_starts(&s->line[i], "-X "))
                        put_line(&piece, &s->line[i]);
        put_line(&piece, &s->line[end]);
        int r = fn(piece.data, piece.len, userdata);
        buf_done(&piece);
        return r;
}

/* One table section, lines (head, end): head is "*table", end "COMMIT". */
static int split_section(struct split *s, size_t head, size_t end, size_t max_lines, iptables_split_fn fn,
                         void *userdata) {
        split_reset(s);
        if (!index_section(s, head, end)) {
                struct buf piece = BUF_INIT;
                for (size_t i = head; i <= end; i++)
                        put_line(&piece, &s->line[i]);
                int r = fn(piece.data, piece.len, userdata);
                buf_done(&piece);
                return r;
        }
        group_rules(s, head, end);
        size_t n_order;
        bool last_piece;
        size_t *order = order_chains(s, &n_order, &last_piece);
        int r = emit_pieces(s, head, end, order, n_order, max_lines, fn, userdata);
        free(order);
        if (r < 0 || !last_piece)
                return r;
        return emit_last_piece(s, head, end, fn, userdata);
}

int iptables_split(const char *input, size_t len, size_t max_lines, iptables_split_fn fn, void *userdata) {
        struct split s = {.by_name = HMAP_INIT};
        const char *p = input, *end = input + len;
        struct iptables_line l;
        int r = 0;

        for (size_t i = 0; i < len; i++)
                if (input[i] == '\n')
                        s.n_lines++;
        s.line = malloc((s.n_lines + 1) * sizeof *s.line);
        s.rule_chain = malloc((s.n_lines + 1) * sizeof *s.rule_chain);
        s.rules = malloc((s.n_lines + 1) * sizeof *s.rules);
        if (!s.line || !s.rule_chain || !s.rules)
                abort();
        s.n_lines = 0;
        while (iptables_line_next(&p, end, &l))
                s.line[s.n_lines++] = l;

        /* Check the whole shape before passing anything on. */
        for (size_t i = 0, head = SIZE_MAX; i < s.n_lines; i++) {
                const struct iptables_line *li = &s.line[i];
                if (head == SIZE_MAX) {
                        if (line_is(li, '*'))
                                head = i;
                        else if (li->len > 0 && !line_is(li, '#'))
                                r = -EINVAL;
                } else if (iptables_line_is_commit(li)) {
                        head = SIZE_MAX;
                } else if (line_is(li, '*')) {
                        r = -EINVAL;
                }
                if (r < 0 || (i + 1 == s.n_lines && head != SIZE_MAX)) {
                        r = -EINVAL;
                        goto out;
                }
        }
        for (size_t i = 0, head = SIZE_MAX; i < s.n_lines && r >= 0; i++) {
                if (head == SIZE_MAX && line_is(&s.line[i], '*'))
                        head = i;
                else if (head != SIZE_MAX && iptables_line_is_commit(&s.line[i])) {
                        r = split_section(&s, head, i, max_lines ? max_lines : 1, fn, userdata);
                        head = SIZE_MAX;
                }
        }
out:
        split_reset(&s);
        free(s.chains);
        free(s.line);
        free(s.rule_chain);
        free(s.rules);
        return r;
}
