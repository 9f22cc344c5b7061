/* SPDX-License-Identifier: Apache-2.0 */
#include "apply/iptables-known.h"

#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apply/iptables-lines.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/fnv.h"

/* What kproxy wrote into a chain and what the kernel printed for it after. */
struct entry {
        uint64_t id;            /* digest of "table\0chain" */
        uint64_t rendered;      /* digest of the rule lines written */
        uint64_t kernel;        /* digest of the kernel's rules for it; 0: unknown */
};

/* A chain of an observed iptables-save, or of the last rewrite's input. */
struct seen {
        uint64_t id;
        uint64_t digest;
        uint64_t kernel;        /* pending: the observed digest, 0 if none */
        uint32_t groups;        /* observed: runs of rule lines (1 expected) */
        bool left_out, deleted;
};

struct iptables_known {
        struct entry *e;
        size_t n;
        struct seen *obs, *pending;
        size_t n_obs, cap_obs, n_pending;
        bool obs_sorted;
        size_t unlearned;
        bool netlink;           /* kernel digests of nf_tables' rules, not of iptables-save's text */
};

static uint64_t chain_id(const char *table, size_t table_len, const char *chain, size_t chain_len) {
        uint64_t h = fnv64(FNV64_INIT, table, table_len);
        h = fnv64(h, "", 1);
        h = fnv64(h, chain, chain_len);
        return h ? h : 1;
}

/* A rule line's contribution to its chain's digest, newline included. */
static uint64_t line_digest(uint64_t h, const struct iptables_line *l) {
        return fnv64(fnv64(h, l->p, l->len), "\n", 1);
}

static int cmp_seen(const void *a, const void *b) {
        const struct seen *x = a, *y = b;
        return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_entry(const void *a, const void *b) {
        const struct entry *x = a, *y = b;
        return x->id < y->id ? -1 : x->id > y->id;
}

static struct seen *find_seen(struct seen *v, size_t n, uint64_t id) {
        struct seen key = {.id = id};
        return n ? bsearch(&key, v, n, sizeof *v, cmp_seen) : NULL;
}

static struct entry *find_entry(const struct iptables_known *k, uint64_t id) {
        struct entry key = {.id = id};
        return k->n ? bsearch(&key, k->e, k->n, sizeof *k->e, cmp_entry) : NULL;
}

static void push_obs(struct iptables_known *k, struct seen s) {
        if (k->n_obs == k->cap_obs) {
                k->cap_obs = k->cap_obs ? k->cap_obs * 2 : 1024;
                k->obs = xrealloc(k->obs, k->cap_obs * sizeof *k->obs);
        }
        k->obs[k->n_obs++] = s;
        k->obs_sorted = false;
}

void iptables_known_observe_digest(struct iptables_known *k, const char *table, const char *chain,
                                   uint64_t digest) {
        push_obs(k, (struct seen) {.id = chain_id(table, strlen(table), chain, strlen(chain)),
                                   .digest = digest ? digest : 1,
                                   .groups = 1});
}

void iptables_known_observe(struct iptables_known *k, const char *table, const char *saved, size_t len) {
        const char *p = saved, *end = saved + len;
        size_t tl = strlen(table);
        struct seen cur = {0};
        bool in_table = false, open = false;
        struct iptables_line l;

        while (iptables_line_next(&p, end, &l)) {
                const char *name;
                size_t n;
                if (l.len > 0 && l.p[0] == '*') {
                        in_table = l.len - 1 == tl && memcmp(l.p + 1, table, tl) == 0;
                        continue;
                }
                if (!in_table)
                        continue;
                if (l.len > 1 && l.p[0] == ':') {
                        n = iptables_line_chain(&l, 1, &name);
                        push_obs(k, (struct seen) {.id = chain_id(table, tl, name, n), .digest = FNV64_INIT});
                } else if (iptables_line_starts(&l, "-A ")) {
                        n = iptables_line_chain(&l, 3, &name);
                        uint64_t id = chain_id(table, tl, name, n);
                        if (!open || cur.id != id) {
                                if (open)
                                        push_obs(k, cur);
                                cur = (struct seen) {.id = id, .digest = FNV64_INIT, .groups = 1};
                                open = true;
                        }
                        cur.digest = line_digest(cur.digest, &l);
                } else if (iptables_line_is_commit(&l)) {
                        if (open)
                                push_obs(k, cur);
                        open = false;
                        in_table = false;
                }
        }
        if (open)
                push_obs(k, cur);
}

/* Sorts the observations and folds each chain's into one: its rule run's
 * digest, the empty digest without rules, 0 (never matches) if its rules
 * came in more than one run. */
static void obs_fold(struct iptables_known *k) {
        if (k->obs_sorted)
                return;
        if (k->n_obs)
                qsort(k->obs, k->n_obs, sizeof *k->obs, cmp_seen);
        size_t w = 0;
        for (size_t i = 0; i < k->n_obs;) {
                struct seen s = {.id = k->obs[i].id, .digest = FNV64_INIT};
                uint32_t groups = 0;
                for (; i < k->n_obs && k->obs[i].id == s.id; i++)
                        if (k->obs[i].groups) {
                                groups += k->obs[i].groups;
                                s.digest = k->obs[i].digest;
                        }
                if (groups > 1)
                        s.digest = 0;
                k->obs[w++] = s;
        }
        k->n_obs = w;
        k->obs_sorted = true;
}

static void drop_obs(struct iptables_known *k) {
        k->n_obs = 0;
        k->obs_sorted = false;
}

/* The declared chains of one section of a restore input, with the digests
 * of their rule lines (which need not be contiguous). */
static size_t section_chains(const char *body, const char *end, const struct iptables_line *head, struct seen **ret) {
        struct seen *v = NULL;
        size_t n = 0, cap = 0;
        const char *p = body;
        struct iptables_line l;
        while (iptables_line_next(&p, end, &l) && !iptables_line_is_commit(&l)) {
                const char *name;
                size_t nl;
                if (l.len > 1 && l.p[0] == ':') {
                        if (n == cap) {
                                cap = cap ? cap * 2 : 256;
                                v = xrealloc(v, cap * sizeof *v);
                        }
                        nl = iptables_line_chain(&l, 1, &name);
                        v[n++] = (struct seen) {.id = chain_id(head->p + 1, head->len - 1, name, nl),
                                                .digest = FNV64_INIT};
                }
        }
        if (n)
                qsort(v, n, sizeof *v, cmp_seen);
        p = body;
        while (iptables_line_next(&p, end, &l) && !iptables_line_is_commit(&l)) {
                const char *name;
                size_t nl;
                bool rule = iptables_line_starts(&l, "-A "), del = iptables_line_starts(&l, "-X ");
                if (!rule && !del)
                        continue;
                nl = iptables_line_chain(&l, 3, &name);
                struct seen *s = find_seen(v, n, chain_id(head->p + 1, head->len - 1, name, nl));
                if (!s)
                        continue;
                if (del)
                        s->deleted = true;
                else
                        s->digest = line_digest(s->digest, &l);
        }
        *ret = v;
        return n;
}

/* Marks which of a section's chains the kernel holds as rendered; returns
 * how many. */
static size_t mark_left_out(struct iptables_known *k, struct seen *v, size_t n) {
        size_t left = 0;
        for (size_t i = 0; i < n; i++) {
                const struct entry *e = find_entry(k, v[i].id);
                const struct seen *o = find_seen(k->obs, k->n_obs, v[i].id);
                v[i].kernel = o ? o->digest : 0;
                v[i].left_out = !v[i].deleted && e && e->kernel && e->rendered == v[i].digest && o &&
                                o->digest == e->kernel;
                left += v[i].left_out;
        }
        return left;
}

/* Appends input to out without the chains marked left out in pending
 * (sections in input order, each's chains sorted, as recorded). */
static void write_without(struct iptables_known *k, const char *input, size_t len, const size_t *first,
                          const size_t *count, struct buf *out) {
        const char *p = input, *end = input + len;
        struct iptables_line l;
        size_t sec = 0;

        while (iptables_line_next(&p, end, &l)) {
                buf_put(out, l.p, l.len);
                buf_putc(out, '\n');
                if (!(l.len > 0 && l.p[0] == '*'))
                        continue;
                struct iptables_line head = l;
                struct seen *v = k->pending + first[sec];
                size_t n = count[sec++];
                while (iptables_line_next(&p, end, &l)) {
                        const char *name;
                        size_t nl = 0;
                        if (l.len > 1 && l.p[0] == ':')
                                nl = iptables_line_chain(&l, 1, &name);
                        else if (iptables_line_starts(&l, "-A "))
                                nl = iptables_line_chain(&l, 3, &name);
                        if (nl) {
                                const struct seen *s = find_seen(v, n, chain_id(head.p + 1, head.len - 1, name, nl));
                                if (s && s->left_out)
                                        continue;
                        }
                        buf_put(out, l.p, l.len);
                        buf_putc(out, '\n');
                        if (iptables_line_is_commit(&l))
                                break;
                }
        }
}

/* First which chains of each section the kernel holds as rendered (and
 * what the commit will remember), then, only if there are any, the input
 * without them: a cold start's input, tens of megabytes, is not copied. */
static size_t rewrite(struct iptables_known *k, const char *input, size_t len, struct buf *out, bool more) {
        const char *p = input, *end = input + len;
        size_t left = 0, n_sec = 0, *first = NULL, *count = NULL;
        struct iptables_line l;

        if (!more)
                k->n_pending = 0;
        obs_fold(k);
        while (iptables_line_next(&p, end, &l)) {
                if (!(l.len > 0 && l.p[0] == '*'))
                        continue;
                struct seen *v = NULL;
                size_t n = section_chains(p, end, &l, &v);
                left += mark_left_out(k, v, n);
                first = xrealloc(first, (n_sec + 1) * sizeof *first);
                count = xrealloc(count, (n_sec + 1) * sizeof *count);
                k->pending = xrealloc(k->pending, (k->n_pending + n + 1) * sizeof *k->pending);
                first[n_sec] = k->n_pending;
                count[n_sec++] = n;
                /* A section without chains has no vector (v NULL). */
                if (n)
                        memcpy(k->pending + k->n_pending, v, n * sizeof *v);
                k->n_pending += n;
                free(v);
        }
        if (left > 0)
                write_without(k, input, len, first, count, out);
        free(first);
        free(count);
        return left;
}

size_t iptables_known_rewrite(struct iptables_known *k, const char *input, size_t len, struct buf *out) {
        return rewrite(k, input, len, out, false);
}

size_t iptables_known_rewrite_more(struct iptables_known *k, const char *input, size_t len, struct buf *out) {
        return rewrite(k, input, len, out, true);
}

void iptables_known_commit(struct iptables_known *k) {
        free(k->e);
        k->e = xmalloc((k->n_pending + 1) * sizeof *k->e);
        k->n = 0;
        k->unlearned = 0;
        for (size_t i = 0; i < k->n_pending; i++) {
                const struct seen *s = &k->pending[i];
                if (s->deleted)
                        continue;
                k->e[k->n++] = (struct entry) {s->id, s->digest, s->left_out ? s->kernel : 0};
                k->unlearned += !s->left_out;
        }
        qsort(k->e, k->n, sizeof *k->e, cmp_entry);
        /* A sync in parts declares some chains in more than one part (the
         * fixed ones its service chains jump to): one entry each, none for
         * a chain whose parts disagree. */
        size_t w = 0;
        for (size_t i = 0; i < k->n;) {
                size_t j = i + 1;
                bool same = true;
                for (; j < k->n && k->e[j].id == k->e[i].id; j++)
                        same = same && k->e[j].rendered == k->e[i].rendered && k->e[j].kernel == k->e[i].kernel;
                if (same)
                        k->e[w++] = k->e[i];
                i = j;
        }
        k->n = w;
        k->unlearned = 0;
        for (size_t i = 0; i < k->n; i++)
                k->unlearned += !k->e[i].kernel;
        k->n_pending = 0;
        drop_obs(k);
}

size_t iptables_known_learn(struct iptables_known *k) {
        size_t learned = 0;
        obs_fold(k);
        for (size_t i = 0; i < k->n; i++) {
                if (k->e[i].kernel)
                        continue;
                const struct seen *o = find_seen(k->obs, k->n_obs, k->e[i].id);
                if (o && o->digest) {
                        k->e[i].kernel = o->digest;
                        learned++;
                }
        }
        k->unlearned -= learned < k->unlearned ? learned : k->unlearned;
        drop_obs(k);
        return learned;
}

size_t iptables_known_unlearned(const struct iptables_known *k) {
        return k->unlearned;
}

void iptables_known_touch(struct iptables_known *k, const char *input, size_t len) {
        const char *p = input, *end = input + len;
        struct iptables_line l, head = {0};
        while (iptables_line_next(&p, end, &l)) {
                const char *name;
                size_t n = 0;
                if (l.len > 0 && l.p[0] == '*')
                        head = l;
                else if (l.len > 1 && l.p[0] == ':')
                        n = iptables_line_chain(&l, 1, &name);
                else if (iptables_line_starts(&l, "-A ") || iptables_line_starts(&l, "-D ") ||
                         iptables_line_starts(&l, "-I ") || iptables_line_starts(&l, "-X "))
                        n = iptables_line_chain(&l, 3, &name);
                if (!n || !head.p)
                        continue;
                struct entry *e = find_entry(k, chain_id(head.p + 1, head.len - 1, name, n));
                if (e && e->kernel) {
                        e->kernel = 0;
                        k->unlearned++;
                }
        }
}

void iptables_known_forget(struct iptables_known *k) {
        free(k->e);
        k->e = NULL;
        k->n = 0;
        k->n_pending = 0;
        k->unlearned = 0;
        drop_obs(k);
}

struct iptables_known *iptables_known_new(bool netlink) {
        struct iptables_known *k = xcalloc(1, sizeof *k);
        k->netlink = netlink;
        return k;
}

void iptables_known_free(struct iptables_known *k) {
        if (!k)
                return;
        free(k->e);
        free(k->obs);
        free(k->pending);
        free(k);
}

/* --- the file: "KPIPTKN1" (iptables-save text digests) or "KPIPTKN2"
 * (netlink digests), the entry count, the entries (three 64-bit words each,
 * little-endian, sorted by id), an FNV-1a of all before it --- */

bool iptables_known_file(const char *state_dir, unsigned family, char *out, size_t len) {
        return state_dir && *state_dir &&
               (size_t) snprintf(out, len, "%s/iptables-known-ipv%u", state_dir, family) < len;
}

#define FILE_MAGIC_TEXT "KPIPTKN1"
#define FILE_MAGIC_NETLINK "KPIPTKN2"
#define FILE_MAGIC(k) ((k)->netlink ? FILE_MAGIC_NETLINK : FILE_MAGIC_TEXT)
#define FILE_MAX_ENTRIES (16u << 20)    /* 400 MB: far beyond any table */

int iptables_known_save(const struct iptables_known *k, const char *path) {
        struct buf b = BUF_INIT;
        uint64_t n = 0, w;
        for (size_t i = 0; i < k->n; i++)
                n += k->e[i].kernel != 0;
        buf_put(&b, FILE_MAGIC(k), 8);
        w = htole64(n);
        buf_put(&b, (const char *) &w, 8);
        for (size_t i = 0; i < k->n; i++) {
                if (!k->e[i].kernel)
                        continue;
                uint64_t v[3] = {htole64(k->e[i].id), htole64(k->e[i].rendered), htole64(k->e[i].kernel)};
                buf_put(&b, (const char *) v, sizeof v);
        }
        w = htole64(fnv64(FNV64_INIT, b.data, b.len));
        buf_put(&b, (const char *) &w, 8);

        char tmp[4096];
        int r = 0;
        if ((size_t) snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long) getpid()) >= sizeof tmp) {
                buf_done(&b);
                return -ENAMETOOLONG;
        }
        FILE *f = fopen(tmp, "we");
        if (!f) {
                r = -errno;
        } else {
                if (fwrite(b.data, 1, b.len, f) != b.len)
                        r = -EIO;
                if (fclose(f) != 0 && r == 0)
                        r = -errno;
                if (r == 0 && rename(tmp, path) < 0)
                        r = -errno;
                if (r < 0)
                        unlink(tmp);
        }
        buf_done(&b);
        return r;
}

int iptables_known_load(struct iptables_known *k, const char *path) {
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        struct buf b = BUF_INIT;
        char chunk[65536];
        size_t got;
        int r = 0;
        while (r == 0 && (got = fread(chunk, 1, sizeof chunk, f)) > 0) {
                buf_put(&b, chunk, got);
                if (b.len > 24 + (size_t) FILE_MAX_ENTRIES * 24)
                        r = -EBADMSG;
        }
        if (r == 0 && ferror(f))
                r = -EIO;
        fclose(f);
        uint64_t n = 0, sum = 0;
        if (r == 0 && b.len >= 8 && memcmp(b.data, FILE_MAGIC(k), 8) != 0 &&
            memcmp(b.data, k->netlink ? FILE_MAGIC_TEXT : FILE_MAGIC_NETLINK, 8) == 0)
                r = -ESTALE;    /* the other kind's digests: none would match */
        else if (r == 0 && (b.len < 24 || memcmp(b.data, FILE_MAGIC(k), 8) != 0))
                r = -EBADMSG;
        if (r == 0) {
                memcpy(&n, b.data + 8, 8);
                n = le64toh(n);
                memcpy(&sum, b.data + b.len - 8, 8);
                if (n > FILE_MAX_ENTRIES || b.len != 24 + n * 24 ||
                    le64toh(sum) != fnv64(FNV64_INIT, b.data, b.len - 8))
                        r = -EBADMSG;
        }
        struct entry *e = NULL;
        if (r == 0) {
                e = xmalloc((n + 1) * sizeof *e);
                for (size_t i = 0; i < n && r == 0; i++) {
                        uint64_t v[3];
                        memcpy(v, b.data + 16 + i * 24, sizeof v);
                        e[i] = (struct entry) {le64toh(v[0]), le64toh(v[1]), le64toh(v[2])};
                        /* Sorted and unique, with a known print: as saved. */
                        if (!e[i].kernel || (i > 0 && e[i - 1].id >= e[i].id))
                                r = -EBADMSG;
                }
        }
        buf_done(&b);
        if (r < 0) {
                free(e);
                return r;
        }
        free(k->e);
        k->e = e;
        k->n = (size_t) n;
        k->unlearned = 0;
        return (int) n;
}
