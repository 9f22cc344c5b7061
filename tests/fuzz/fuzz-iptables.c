/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the readers of iptables-save and iptables-restore
 * text, checked against a model of the tool (restore-model.h). The input
 * is [u16 a][u16 t][u16 b], then a, t and b bytes of text, then the rest:
 *
 *   A  the first restore input of a full sync;
 *   T  someone else's restore, between the two syncs;
 *   B  the next full sync's input;
 *   C  the rest: a file of known chains (iptables_known_load()).
 *
 * What is checked, whenever A and B have the shape kproxy renders and the
 * model says the tool would take them:
 *
 *   apply/iptables-known.c  the sync as iptsync.c runs it: observe the
 *       model's iptables-save, rewrite, restore, commit, observe, learn;
 *       T; then B rewritten leaves the model exactly as B whole would.
 *       Its file: saved, loaded and saved again is the same file; any C
 *       that loads saves and loads back the same.
 *   apply/iptables-delta.c  after A is committed, B rewritten (rules by
 *       -D/-I, unchanged chains left out) leaves the model as B would.
 *   apply/iptables-split.c  B's pieces are each a section of their own,
 *       each one a transaction the tool takes (every jump to a chain that
 *       exists), and together they leave the model as B would.
 *   apply/iptables.c's own readers of iptables-save (static, so this file
 *       includes it): chain declarations, jump rules, the cleanup input.
 *
 * Otherwise the same functions run over whatever the bytes are, for the
 * sanitizers.
 */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wunused-function"
#include "../../src/apply/iptables.c"
#pragma clang diagnostic pop

#include "apply/iptables-delta.h"
#include "restore-model.h"
#include "scratch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char dir[64];
static char file1[80], file2[80], file3[80];

static void remove_dir(void) {
        unlink(file1);
        unlink(file2);
        unlink(file3);
        rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        (void) argc, (void) argv;
        fuzz_scratch_dir("iptables", dir, sizeof dir);
        snprintf(file1, sizeof file1, "%s/known1", dir);
        snprintf(file2, sizeof file2, "%s/known2", dir);
        snprintf(file3, sizeof file3, "%s/known3", dir);
        atexit(remove_dir);
        return 0;
}

struct text {
        const char *p;
        size_t len;
};

static bool same_file(const char *a, const char *b) {
        FILE *fa = fopen(a, "re"), *fb = fopen(b, "re");
        bool same = fa && fb;
        for (int ca = 0, cb = 0; same && ca != EOF;) {
                ca = fgetc(fa);
                cb = fgetc(fb);
                same = ca == cb;
        }
        if (fa)
                fclose(fa);
        if (fb)
                fclose(fb);
        return same;
}

/* Every table of the model, or named in text, as iptables-save prints it,
 * observed by k, as iptables_scan() passes what it read. */
static void observe(struct iptables_known *k, const struct rm_state *s, const struct text *t) {
        struct buf names = BUF_INIT, saved = BUF_INIT;
        rm_tables(s, &names);
        for (const char *p = t->p, *end = t->p + t->len; p < end;) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t n = nl ? (size_t) (nl - p) : (size_t) (end - p);
                if (n > 1 && p[0] == '*') {
                        buf_put(&names, p + 1, n - 1);
                        buf_putc(&names, '\0');
                }
                p += n + 1;
        }
        for (size_t off = 0; off < names.len; off += strlen(names.data + off) + 1) {
                buf_clear(&saved);
                rm_save(s, names.data + off, &saved);
                iptables_known_observe(k, names.data + off, saved.data ? saved.data : "", saved.len);
        }
        buf_done(&names);
        buf_done(&saved);
}

/* One full sync of input through k onto s, as iptsync.c does it; returns
 * the model's verdict on the rewritten input. */
static int full_sync(struct iptables_known *k, struct rm_state *s, const struct text *input) {
        struct buf out = BUF_INIT;
        observe(k, s, input);
        size_t left = iptables_known_rewrite(k, input->p, input->len, &out);
        /* Nothing left out: out is empty, the input goes as it is. */
        assert(left > 0 || out.len == 0);
        const struct text sent = left > 0 ? (struct text) {out.data, out.len} : *input;
        int r = rm_apply(s, sent.p ? sent.p : "", sent.len);
        if (r == 0) {
                iptables_known_commit(k);
                observe(k, s, input);
                iptables_known_learn(k);
        } else {
                iptables_known_forget(k);
        }
        buf_done(&out);
        return r;
}

static void check_known(const struct rm_state *base, const struct text *a, const struct text *t,
                        const struct text *b, bool oracle) {
        struct iptables_known *k = iptables_known_new(false);
        struct rm_state *s = rm_copy(base), *want = rm_copy(base);
        int r_want = rm_apply(want, a->p, a->len), r = full_sync(k, s, a);

        /* Knowing nothing, it leaves nothing out. */
        if (oracle && r_want == 0)
                assert(r == 0 && rm_equal(s, want));
        rm_free(want);
        if (r == 0 && oracle) {
                rm_apply(s, t->p, t->len);      /* someone else's change, taken or not */
                want = rm_copy(s);
                r_want = rm_apply(want, b->p, b->len);
                r = full_sync(k, s, b);
                if (r_want == 0)
                        assert(r == 0 && rm_equal(s, want));
                rm_free(want);
        }
        /* Its file, saved and loaded: the same entries. */
        if (iptables_known_save(k, file1) == 0) {
                struct iptables_known *k2 = iptables_known_new(false);
                assert(iptables_known_load(k2, file1) >= 0);
                assert(iptables_known_save(k2, file2) == 0 && same_file(file1, file2));
                iptables_known_free(k2);
        }
        iptables_known_free(k);
        rm_free(s);
}

static void check_delta(const struct rm_state *base, const struct text *a, const struct text *b, bool oracle) {
        struct iptables_delta *d = iptables_delta_new();
        struct rm_state *s = rm_copy(base), *want;
        struct buf out = BUF_INIT;

        assert(iptables_delta_rewrite(d, b->p, b->len, &out) == 0);    /* nothing remembered */
        assert(out.len == b->len && (b->len == 0 || memcmp(out.data, b->p, b->len) == 0));
        iptables_delta_commit(d, a->p, a->len);
        buf_clear(&out);
        iptables_delta_rewrite(d, b->p, b->len, &out);
        if (oracle && rm_apply(s, a->p, a->len) == 0) {
                want = rm_copy(s);
                if (rm_apply(want, b->p, b->len) == 0)
                        assert(rm_apply(s, out.data ? out.data : "", out.len) == 0 && rm_equal(s, want));
                rm_free(want);
        }
        buf_done(&out);
        iptables_delta_forget(d);
        buf_clear(&out);
        assert(iptables_delta_rewrite(d, b->p, b->len, &out) == 0);
        buf_done(&out);
        iptables_delta_free(d);
        rm_free(s);
}

struct pieces {
        struct rm_state *s;
        bool oracle, ok;
};

static int on_piece(const char *piece, size_t len, void *userdata) {
        struct pieces *p = userdata;
        assert(len >= 9 && piece[0] == '*' && memcmp(piece + len - 8, "\nCOMMIT\n", 8) == 0);
        if (p->oracle && p->ok)
                p->ok = rm_apply(p->s, piece, len) == 0;
        return 0;
}

static void check_split(const struct rm_state *base, const struct text *a, const struct text *b, size_t max_lines,
                        bool oracle) {
        struct pieces p = {rm_copy(base), oracle, true};
        struct rm_state *want;

        if (oracle && rm_apply(p.s, a->p, a->len) != 0)
                p.oracle = false;
        want = rm_copy(p.s);
        bool whole = rm_apply(want, b->p, b->len) == 0;
        int r = iptables_split(b->p, b->len, max_lines, on_piece, &p);
        if (p.oracle && whole) {
                assert(r == 0 && p.ok);
                assert(rm_equal(p.s, want));
        }
        rm_free(want);
        rm_free(p.s);
}

/* apply/iptables.c's readers of what iptables-save printed. */
static void check_saved_readers(const struct text *t) {
        static const char *const tables[] = {"nat", "filter", "mangle"};
        struct buf saved = BUF_INIT, in = BUF_INIT;
        char chain[64];

        buf_put(&saved, t->p, t->len);
        if (!saved.data)
                buf_puts(&saved, "");
        for (const char *p = saved.data; next_chain(&p, chain);)
                assert(strlen(chain) < sizeof chain);
        for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
                jumps_in(tables[i], NULL, &saved);
                jumps_in(tables[i], "PREROUTING", &saved);
                size_t before = in.len, n = cleanup_table(tables[i], &saved, i == 0, &in);
                assert((n == 0) == (in.len == before));
        }
        /* The cleanup's input is restore text the tool takes in pieces. */
        if (in.len)
                assert(iptables_split(in.data, in.len, 10, on_piece, &(struct pieces) {NULL, false, true}) == 0);
        buf_done(&saved);
        buf_done(&in);
}

static void check_file(const uint8_t *c, size_t len) {
        FILE *f = fopen(file3, "we");
        if (!f || fwrite(c, 1, len, f) != len || fclose(f) != 0)
                abort();
        struct iptables_known *k = iptables_known_new(false);
        int n = iptables_known_load(k, file3);
        if (n >= 0) {
                assert(iptables_known_save(k, file1) == 0);
                struct iptables_known *k2 = iptables_known_new(false);
                assert(iptables_known_load(k2, file1) == n);
                assert(iptables_known_save(k2, file2) == 0 && same_file(file1, file2));
                iptables_known_free(k2);
        } else {
                assert(n == -EBADMSG || n == -ESTALE);
        }
        iptables_known_free(k);
}

static bool has_nul(const struct text *t) {
        return t->len && memchr(t->p, '\0', t->len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct text part[3];
        uint16_t len[3];

        if (size < 6)
                return 0;
        memcpy(len, data, 6);
        data += 6;
        size -= 6;
        for (int i = 0; i < 3; i++) {
                size_t n = len[i] < size ? len[i] : size;
                part[i] = (struct text) {(const char *) data, n};
                data += n;
                size -= n;
        }
        const struct text *a = &part[0], *t = &part[1], *b = &part[2];
        bool oracle = !has_nul(a) && !has_nul(t) && !has_nul(b) && rm_rendered_shape(a->p, a->len) &&
                      rm_rendered_shape(b->p, b->len);
        struct rm_state *base = rm_new();
        for (int i = 0; i < 3; i++)
                rm_chain_names_of(base, part[i].p, part[i].len);

        check_known(base, a, t, b, oracle);
        check_delta(base, a, b, oracle);
        check_split(base, a, b, 1 + (len[0] >> 12), oracle);
        check_saved_readers(a);
        check_file(data, size);

        /* The line reader, over anything. */
        struct iptables_line l;
        for (const char *p = b->p, *end = b->p + b->len; iptables_line_next(&p, end, &l);) {
                const char *name;
                assert(l.p >= b->p && l.p + l.len <= end && !memchr(l.p, '\n', l.len));
                if (iptables_line_starts(&l, "-A ")) {
                        size_t n = iptables_line_chain(&l, 3, &name);
                        assert(name == l.p + 3 && n <= l.len - 3);
                        iptables_chain_owned(name, n);
                }
        }
        rm_free(base);
        return 0;
}
