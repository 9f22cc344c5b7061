/* SPDX-License-Identifier: Apache-2.0 */
#include "apply/iptables-split.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apply/iptables-lines.h"
#include "util/buf.h"
#include "util/fnv.h"
#include "util/alloc.h"

/* Deeper jump nesting than this is not kproxy's (five levels at most);
 * such chains are simply written in input order. */
#define MAX_LEVEL 64
#define NONE UINT32_MAX

/* A cold start's input is 33 MB, 445k lines and 120k chains at 10k
 * services x 10 endpoints: the bookkeeping below is kept to 4 bytes per
 * line and 28 per chain, names read in place, so that it costs a third
 * of the input rather than as much again. */
struct chain {
        const char *name;       /* in the input, name_len bytes */
        uint32_t decl;          /* line index of ":NAME ...", or NONE */
        uint32_t first_rule;    /* into split.rules, after counting */
        uint32_t n_rules;
        uint8_t name_len;
        int8_t level;           /* -1: not computed yet */
        bool deleted;           /* the section has "-X NAME" */
        bool visiting;
};

struct split {
        const char *input;
        uint32_t *line;         /* where each line starts; line[n_lines] is one past the end */
        size_t n_lines;
        struct chain *chains;
        size_t n_chains, cap_chains;
        uint32_t *slots;        /* open addressing by name: chain index + 1, 0 free */
        size_t n_slots;         /* a power of two, over twice n_chains */
        uint32_t *rule_chain;   /* per line: chain index of an -A line, else NONE */
        uint32_t *rules;        /* rule line indices grouped by chain */
};

/* Line i, without its newline. */
static struct iptables_line line_at(const struct split *s, size_t i) {
        size_t len = s->line[i + 1] - s->line[i];
        const char *p = s->input + s->line[i];
        if (len > 0 && p[len - 1] == '\n')
                len--;
        return (struct iptables_line) {p, len};
}

static uint32_t *slot_of(struct split *s, const char *name, size_t n) {
        size_t mask = s->n_slots - 1;
        for (size_t i = (size_t) fnv64(FNV64_INIT, name, n) & mask;; i = (i + 1) & mask) {
                uint32_t v = s->slots[i];
                if (!v || (s->chains[v - 1].name_len == n && memcmp(s->chains[v - 1].name, name, n) == 0))
                        return &s->slots[i];
        }
}

static void grow_slots(struct split *s) {
        uint32_t *old = s->slots;
        size_t n_old = s->n_slots;
        s->n_slots = n_old ? n_old * 2 : 1024;
        s->slots = xcalloc(s->n_slots, sizeof *s->slots);
        for (size_t i = 0; i < n_old; i++)
                if (old[i])
                        *slot_of(s, s->chains[old[i] - 1].name, s->chains[old[i] - 1].name_len) = old[i];
        free(old);
}

/* The chain named by the n bytes at name, or NONE. */
static uint32_t chain_find(struct split *s, const char *name, size_t n) {
        if (!s->n_slots)
                return NONE;
        uint32_t v = *slot_of(s, name, n);
        return v ? v - 1 : NONE;
}

/* The chain a line names after its two-character command (":NAME ...",
 * "-A NAME ...", "-X NAME"; skip is 1 or 3), created on first sight; NONE
 * for a name kproxy would never write (empty, 64 bytes or more). */
static uint32_t chain_of(struct split *s, const struct iptables_line *l, size_t skip) {
        size_t n = 0;
        while (skip + n < l->len && l->p[skip + n] != ' ' && l->p[skip + n] != '\t')
                n++;
        if (n == 0 || n >= 64)
                return NONE;
        const char *name = l->p + skip;
        uint32_t ci = chain_find(s, name, n);
        if (ci != NONE)
                return ci;
        if (s->n_chains == s->cap_chains) {
                s->cap_chains = s->cap_chains ? s->cap_chains + s->cap_chains / 2 : 256;
                s->chains = xrealloc(s->chains, s->cap_chains * sizeof *s->chains);
        }
        if (2 * (s->n_chains + 1) > s->n_slots)
                grow_slots(s);
        s->chains[s->n_chains] = (struct chain) {.name = name, .name_len = (uint8_t) n, .decl = NONE,
                                                 .level = -1};
        *slot_of(s, name, n) = (uint32_t) (s->n_chains + 1);
        return (uint32_t) s->n_chains++;
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
                struct iptables_line rule = line_at(s, s->rules[c->first_rule + k]);
                const char *t = jump_target(&rule, &n);
                uint32_t ti = t && n < 64 ? chain_find(s, t, n) : NONE;
                if (ti == NONE || s->chains[ti].decl == NONE || s->chains[ti].deleted)
                        continue;
                int l = chain_level(s, ti, depth + 1) + 1;
                if (l > level)
                        level = l;
        }
        c = &s->chains[ci];
        c->visiting = false;
        c->level = (int8_t) (level > MAX_LEVEL ? MAX_LEVEL : level);
        return c->level;
}

static void split_reset(struct split *s) {
        s->n_chains = 0;
        if (s->slots)
                memset(s->slots, 0, s->n_slots * sizeof *s->slots);
}

static void put_line(struct buf *b, const struct split *s, size_t i) {
        struct iptables_line l = line_at(s, i);
        buf_put(b, l.p, l.len);
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
                struct iptables_line l = line_at(s, i);
                uint32_t ci;
                s->rule_chain[i] = NONE;
                if (l.len == 0 || line_is(&l, '#'))
                        continue;
                if (line_is(&l, ':')) {
                        ci = chain_of(s, &l, 1);
                        if (ci == NONE || s->chains[ci].decl != NONE)
                                return false;
                        s->chains[ci].decl = (uint32_t) i;
                } else if (iptables_line_starts(&l, "-A ")) {
                        ci = chain_of(s, &l, 3);
                        if (ci == NONE)
                                return false;
                        s->rule_chain[i] = ci;
                        s->chains[ci].n_rules++;
                } else if (iptables_line_starts(&l, "-X ")) {
                        ci = chain_of(s, &l, 3);
                        if (ci == NONE)
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
        uint32_t at = 0;
        for (size_t c = 0; c < s->n_chains; c++) {
                s->chains[c].first_rule = at;
                at += s->chains[c].n_rules;
                s->chains[c].n_rules = 0;
        }
        for (size_t i = head + 1; i < end; i++)
                if (s->rule_chain[i] != NONE) {
                        struct chain *c = &s->chains[s->rule_chain[i]];
                        s->rules[c->first_rule + c->n_rules++] = (uint32_t) i;
                }
}

/* Declared chains that stay, by level, then input order (counting sort).
 * Returns the order (to free) and its length; *ret_last says whether a
 * last piece is needed (rules to undeclared chains, deletions). */
static size_t *order_chains(struct split *s, size_t *ret_n, bool *ret_last) {
        size_t count[MAX_LEVEL + 2] = {0}, n_order = 0;
        *ret_last = false;
        for (size_t c = 0; c < s->n_chains; c++) {
                if (s->chains[c].decl == NONE || s->chains[c].deleted) {
                        *ret_last = true;
                        continue;
                }
                count[chain_level(s, c, 0) + 1]++;
                n_order++;
        }
        for (size_t l = 1; l < MAX_LEVEL + 2; l++)
                count[l] += count[l - 1];
        size_t *order = xmalloc((n_order + 1) * sizeof *order);
        for (size_t c = 0; c < s->n_chains; c++)
                if (s->chains[c].decl != NONE && !s->chains[c].deleted)
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
                put_line(&piece, s, head);
                for (size_t j = from; j < k; j++)
                        put_line(&piece, s, s->chains[order[j]].decl);
                for (size_t j = from; j < k; j++) {
                        const struct chain *c = &s->chains[order[j]];
                        for (size_t q = 0; q < c->n_rules; q++)
                                put_line(&piece, s, s->rules[c->first_rule + q]);
                }
                put_line(&piece, s, end);
                r = fn(piece.data, piece.len, userdata);
        }
        buf_done(&piece);
        return r;
}

/* Last: rules appended to chains the input does not declare, and the
 * chains it deletes, each kind in input order. */
static int emit_last_piece(struct split *s, size_t head, size_t end, iptables_split_fn fn, void *userdata) {
        struct buf piece = BUF_INIT;

        put_line(&piece, s, head);
        for (size_t i = head + 1; i < end; i++) {
                struct iptables_line l = line_at(s, i);
                if (line_is(&l, ':') && s->chains[chain_of(s, &l, 1)].deleted)
                        put_line(&piece, s, i);
        }
        for (size_t i = head + 1; i < end; i++)
                if (s->rule_chain[i] != NONE) {
                        const struct chain *c = &s->chains[s->rule_chain[i]];
                        if (c->decl == NONE || c->deleted)
                                put_line(&piece, s, i);
                }
        for (size_t i = head + 1; i < end; i++) {
                struct iptables_line l = line_at(s, i);
                if (iptables_line_starts(&l, "-X "))
                        put_line(&piece, s, i);
        }
        put_line(&piece, s, end);
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
                        put_line(&piece, s, i);
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
        struct split s = {.input = input};
        int r = 0;

        if (len >= NONE)
                return -E2BIG;
        for (size_t i = 0; i < len; i++)
                if (input[i] == '\n')
                        s.n_lines++;
        s.line = xmalloc((s.n_lines + 2) * sizeof *s.line);
        s.rule_chain = xmalloc((s.n_lines + 1) * sizeof *s.rule_chain);
        s.rules = xmalloc((s.n_lines + 1) * sizeof *s.rules);
        s.n_lines = 0;
        for (size_t at = 0; at < len;) {
                const char *nl = memchr(input + at, '\n', len - at);
                s.line[s.n_lines++] = (uint32_t) at;
                at = nl ? (size_t) (nl - input) + 1 : len;
        }
        s.line[s.n_lines] = (uint32_t) len;

        /* Check the whole shape before passing anything on. */
        for (size_t i = 0, head = SIZE_MAX; i < s.n_lines; i++) {
                struct iptables_line li = line_at(&s, i);
                if (head == SIZE_MAX) {
                        if (line_is(&li, '*'))
                                head = i;
                        else if (li.len > 0 && !line_is(&li, '#'))
                                r = -EINVAL;
                } else if (iptables_line_is_commit(&li)) {
                        head = SIZE_MAX;
                } else if (line_is(&li, '*')) {
                        r = -EINVAL;
                }
                if (r < 0 || (i + 1 == s.n_lines && head != SIZE_MAX)) {
                        r = -EINVAL;
                        goto out;
                }
        }
        for (size_t i = 0, head = SIZE_MAX; i < s.n_lines && r >= 0; i++) {
                struct iptables_line li = line_at(&s, i);
                if (head == SIZE_MAX && line_is(&li, '*'))
                        head = i;
                else if (head != SIZE_MAX && iptables_line_is_commit(&li)) {
                        r = split_section(&s, head, i, max_lines ? max_lines : 1, fn, userdata);
                        head = SIZE_MAX;
                }
        }
out:
        free(s.chains);
        free(s.slots);
        free(s.line);
        free(s.rule_chain);
        free(s.rules);
        return r;
}
