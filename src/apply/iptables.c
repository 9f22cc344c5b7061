/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle: every change to the kernel's iptables goes through here, as an
 * argv array (never a shell string) of fixed words and names kproxy made.
 * The wait flags are upstream's (-w 5 -W 100000: wait for the xtables lock
 * up to 5 s, polling every 100 ms) so kproxy and kubelet share the lock.
 */
#include "apply/iptables.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply/exec.h"
#include "apply/iptables-backend.h"
#include "apply/iptables-chains.h"
#include "apply/iptables-known.h"
#include "apply/iptables-lines.h"
#include "apply/iptables-split.h"
#include "apply/nftables.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/hmap.h"
#include "util/log.h"

struct jump {
        const char *table, *builtin, *target;
        const char *const *args;        /* matches before -j, as iptables-save prints them */
};

static const char *const a_ext[] = {"-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment",
                                    "kubernetes externally-visible service portals", NULL};
static const char *const a_hc[] = {"-m", "comment", "--comment", "kubernetes health check service ports", NULL};
static const char *const a_svc_new[] = {"-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment",
                                        "kubernetes service portals", NULL};
static const char *const a_fwd[] = {"-m", "comment", "--comment", "kubernetes forwarding rules", NULL};
static const char *const a_lbfw[] = {"-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment",
                                     "kubernetes load balancer firewall", NULL};
static const char *const a_svc[] = {"-m", "comment", "--comment", "kubernetes service portals", NULL};
static const char *const a_post[] = {"-m", "comment", "--comment", "kubernetes postrouting rules", NULL};
static const char *const a_none[] = {NULL};

/* Reference §2, in upstream's order; each is inserted at position 1, so a
 * fresh table ends up with them in reverse. */
static const struct jump jumps[] = {
        {"filter", "INPUT", "KUBE-EXTERNAL-SERVICES", a_ext},
        {"filter", "FORWARD", "KUBE-EXTERNAL-SERVICES", a_ext},
        {"filter", "INPUT", "KUBE-NODEPORTS", a_hc},
        {"filter", "FORWARD", "KUBE-SERVICES", a_svc_new},
        {"filter", "OUTPUT", "KUBE-SERVICES", a_svc_new},
        {"filter", "FORWARD", "KUBE-FORWARD", a_fwd},
        {"filter", "INPUT", "KUBE-PROXY-FIREWALL", a_lbfw},
        {"filter", "OUTPUT", "KUBE-PROXY-FIREWALL", a_lbfw},
        {"filter", "FORWARD", "KUBE-PROXY-FIREWALL", a_lbfw},
        {"nat", "OUTPUT", "KUBE-SERVICES", a_svc},
        {"nat", "PREROUTING", "KUBE-SERVICES", a_svc},
        {"nat", "POSTROUTING", "KUBE-POSTROUTING", a_post},
        {"filter", "INPUT", "KUBE-FIREWALL", a_none},
        {"filter", "OUTPUT", "KUBE-FIREWALL", a_none},
};

/* "-A BUILTIN args -j TARGET" as iptables-save prints it. */
static void jump_text(const struct jump *j, struct buf *b) {
        buf_printf(b, "-A %s", j->builtin);
        for (const char *const *a = j->args; *a; a++)
                buf_arg(b, *a);
        buf_printf(b, " -j %s", j->target);
}

static bool has_owned_prefix(const char *chain) {
        return iptables_chain_owned(chain, strlen(chain));
}

static int save(const struct iptables_tools *t, uint8_t family, const char *table, struct buf *out) {
        const char *argv[] = {iptables_tool_name(t, family, IPTABLES_TOOL_SAVE), "-t", table, NULL};
        struct buf err = BUF_INIT;
        int r = exec_run(argv, NULL, 0, out, &err);
        if (r != 0) {
                log_error("%s -t %s failed (%d): %s", argv[0], table, r, err.data ? err.data : "");
                r = r < 0 ? r : -EIO;
        }
        buf_done(&err);
        return r;
}

/* Whether a line "-A ..." of the saved table text exists. */
static bool saved_has_line(const struct buf *saved, const char *line) {
        size_t n = strlen(line);
        for (const char *p = saved->data; p && (p = strstr(p, line)); p += n)
                if ((p == saved->data || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
                        return true;
        return false;
}

/* Iterates over the chains an iptables-save table declares (":NAME ..."
 * lines): copies the next name into chain and advances *p. */
static bool next_chain(const char **p, char chain[64]) {
        while (*p && **p) {
                const char *line = *p, *nl = strchr(line, '\n');
                size_t len = nl ? (size_t) (nl - line) : strlen(line);
                *p = line + len + (nl ? 1 : 0);
                if (len < 2 || line[0] != ':')
                        continue;
                size_t end = strcspn(line + 1, " \n");
                if (end >= 64)
                        continue;       /* longer than any iptables chain name */
                memcpy(chain, line + 1, end);
                chain[end] = '\0';
                return true;
        }
        return false;
}

/* Whether every jump rule of the table is in its built-in chain, from the
 * text the chain's listing (or the table's iptables-save) printed. */
static bool jumps_in(const char *table, const char *builtin, const struct buf *saved) {
        struct buf line = BUF_INIT;
        bool ok = true;
        for (size_t i = 0; i < ELEMENTSOF(jumps) && ok; i++) {
                if (strcmp(jumps[i].table, table) != 0 || (builtin && strcmp(jumps[i].builtin, builtin) != 0))
                        continue;
                buf_clear(&line);
                jump_text(&jumps[i], &line);
                ok = saved_has_line(saved, line.data);
        }
        buf_done(&line);
        return ok;
}

/* Appends a name, NUL-terminated, to store. */
static void put_name(struct buf *store, const char *name, size_t len) {
        buf_put(store, name, len);
        buf_putc(store, '\0');
}

/* The names put in store as a map over them; returns store's data, which
 * the map's keys point into (free() it after the map; NULL if empty). */
static char *map_names(struct buf *store, struct hmap *out) {
        for (size_t off = 0; off < store->len; off += strlen(store->data + off) + 1)
                hmap_put(out, store->data + off, NULL);
        return store->data ? buf_steal(store) : NULL;
}

/* Reads the digests of the named chains of a table that exist into known,
 * and moves them into found (name -> struct nftables_chain_digest); fn
 * (may be NULL) gets the chains their rules jump or go to. A dump the
 * table's changes interrupted is tried again. */
static int read_digests(struct nftables *nl, uint8_t family, const char *table, const char *const *names, size_t n,
                        nftables_target_fn fn, void *userdata, struct hmap *found, struct iptables_known *known) {
        struct hmap got = HMAP_INIT;
        int r = -EINTR;
        for (int attempt = 0; attempt < 3 && r == -EINTR; attempt++) {
                nftables_names_done(&got);
                r = nftables_rule_digests_walk(nl, family, table, names, n, &got, fn, userdata);
        }
        const char *k;
        void *v;
        for (size_t i = 0; r == 0 && hmap_next(&got, &i, &k, &v);) {
                if (known)
                        iptables_known_observe_digest(known, table, k,
                                                      ((const struct nftables_chain_digest *) v)->digest);
                free(hmap_put(found, ((struct nftables_chain_digest *) v)->name, v));
        }
        if (r == 0)
                hmap_done(&got);        /* its values now belong to found */
        else
                nftables_names_done(&got);
        if (r < 0)
                return log_error_errno(r, "Failed to read the IPv%u %s chains over nf_tables netlink", family,
                                       table);
        return 0;
}

/* The chains of the jump graph not asked about yet: a set of names
 * (owned), and the next round's. */
struct walk {
        struct hmap seen;
        const char **next;
        size_t n_next, cap_next;
};

static void walk_add(const char *chain, void *userdata) {
        struct walk *w = userdata;
        if (hmap_get(&w->seen, chain))
                return;
        char *name = strdup(chain);
        if (!name)
                abort();
        hmap_put(&w->seen, name, name);
        if (w->n_next == w->cap_next) {
                w->cap_next = w->cap_next ? 2 * w->cap_next : 64;
                w->next = realloc(w->next, w->cap_next * sizeof *w->next);
                if (!w->next)
                        abort();
        }
        w->next[w->n_next++] = name;
}

/* In nat, the built-in chains, and what other node agents keep there that
 * no rule jumps to (kubelet's canary). */
static const char *const nat_builtin[] = {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING", "KUBE-KUBELET-CANARY"};

/* The netlink side of iptables_scan(). */
static int scan_nft(const struct iptables_tools *t, struct nftables *nl, uint8_t family, struct hmap *existing,
                    char **ret_names, bool *ret_jumps_ok, struct iptables_known *known) {
        struct hmap found = HMAP_INIT, listed = HMAP_INIT;
        struct walk w = {.seen = HMAP_INIT};
        struct buf store = BUF_INIT;
        const char **level = NULL, *k;
        const char *const *fixed;
        size_t n_fixed;
        uint32_t use = 0;
        int r = 0;

        /* nat: the jump graph from the built-in and fixed chains, a round
         * of rule dumps per depth: every chain anything jumps to. */
        for (size_t i = 0; i < ELEMENTSOF(nat_builtin); i++)
                walk_add(nat_builtin[i], &w);
        fixed = iptables_fixed_chains("nat", &n_fixed);
        for (size_t i = 0; i < n_fixed; i++)
                walk_add(fixed[i], &w);
        while (r == 0 && w.n_next > 0) {
                size_t n = w.n_next;
                free(level);
                level = w.next;
                w.next = NULL;
                w.n_next = w.cap_next = 0;
                r = read_digests(nl, family, "nat", level, n, walk_add, &w, &found, known);
        }
        if (r < 0)
                goto out;
        /* A chain nothing jumps to, left by a failed sync or made by someone
         * else, shows as one more chain in the table than were found: then
         * list them all (a dump the kernel walks from the first chain for
         * every message: seconds at 20k services). */
        r = nftables_table_use(nl, family, "nat", &use);
        if (r == -ENOENT)
                r = 0;
        if (r < 0)
                goto out;
        if (use != found.len) {
                log_v(2, "IPv%u nat holds %u chains, %u reached by jumps: listing them", family, use,
                      (unsigned) found.len);
                r = nftables_list(nl, family, "nat", &listed, NULL);
                if (r == -ENOENT)
                        r = 0;
                if (r < 0)
                        goto out;
                size_t n = 0;
                free(level);
                level = malloc((listed.len + 1) * sizeof *level);
                if (!level) {
                        r = -ENOMEM;
                        goto out;
                }
                for (size_t i = 0; hmap_next(&listed, &i, &k, NULL);)
                        if (has_owned_prefix(k) && !hmap_get(&found, k))
                                level[n++] = k;
                r = read_digests(nl, family, "nat", level, n, NULL, NULL, &found, known);
                if (r < 0)
                        goto out;
        }
        for (size_t i = 0; hmap_next(&found, &i, &k, NULL);)
                if (has_owned_prefix(k))
                        put_name(&store, k, strlen(k));
        *ret_names = map_names(&store, existing);
        fixed = iptables_fixed_chains("filter", &n_fixed);
        r = read_digests(nl, family, "filter", fixed, n_fixed, NULL, NULL, &found, known);
        if (r < 0)
                goto out;

        /* The jump rules: each built-in chain listed alone (iptables-save
         * lists every table's chains: seconds at 20k services). */
        *ret_jumps_ok = true;
        for (size_t i = 0; i < ELEMENTSOF(jumps) && *ret_jumps_ok; i++) {
                bool listed_before = false;
                for (size_t j = 0; j < i && !listed_before; j++)
                        listed_before = strcmp(jumps[j].table, jumps[i].table) == 0 &&
                                        strcmp(jumps[j].builtin, jumps[i].builtin) == 0;
                if (listed_before)
                        continue;
                struct buf listing = BUF_INIT;
                const char *argv[] = {iptables_tool_name(t, family, IPTABLES_TOOL_CMD), "-t", jumps[i].table, "-S",
                                      jumps[i].builtin, NULL};
                *ret_jumps_ok = exec_run(argv, NULL, 0, &listing, NULL) == 0 &&
                                jumps_in(jumps[i].table, jumps[i].builtin, &listing);
                buf_done(&listing);
        }
out:
        free(level);
        free(w.next);
        buf_done(&store);
        nftables_names_done(&w.seen);
        nftables_names_done(&found);
        nftables_names_done(&listed);
        return r;
}

int iptables_scan(const struct iptables_tools *t, struct nftables *nl, uint8_t family, struct hmap *existing,
                  char **ret_names, bool *ret_jumps_ok, struct iptables_known *known) {
        struct buf nat = BUF_INIT, filter = BUF_INIT, store = BUF_INIT;
        char chain[64];
        int r;

        *ret_names = NULL;
        /* Netlink sees iptables-nft's tables only: legacy ones are read
         * with the tools whatever the caller has open. */
        if (nl && t->backend == IPTABLES_BACKEND_NFT)
                return scan_nft(t, nl, family, existing, ret_names, ret_jumps_ok, known);
        r = save(t, family, "nat", &nat);
        if (r == 0)
                r = save(t, family, "filter", &filter);
        if (r < 0)
                goto out;
        if (known) {
                iptables_known_observe(known, "nat", nat.data, nat.len);
                iptables_known_observe(known, "filter", filter.data, filter.len);
        }
        for (const char *p = nat.data; next_chain(&p, chain);)
                if (has_owned_prefix(chain))
                        put_name(&store, chain, strlen(chain));
        *ret_names = map_names(&store, existing);
        *ret_jumps_ok = jumps_in("nat", NULL, &nat) && jumps_in("filter", NULL, &filter);
out:
        buf_done(&nat);
        buf_done(&filter);
        buf_done(&store);
        return r;
}

/* The chains a restore input declares in table, read into known. */
static int observe_declared(struct nftables *nl, uint8_t family, const char *table, const char *input, size_t len,
                            struct iptables_known *known) {
        const char *end = input + len, *name;
        struct buf store = BUF_INIT;
        struct hmap found = HMAP_INIT;
        struct iptables_line l;
        size_t tl = strlen(table), n = 0;
        bool in = false;

        for (const char *p = input; iptables_line_next(&p, end, &l);) {
                if (l.len > 0 && l.p[0] == '*') {
                        in = l.len - 1 == tl && memcmp(l.p + 1, table, tl) == 0;
                } else if (in && l.len > 1 && l.p[0] == ':') {
                        size_t name_len = iptables_line_chain(&l, 1, &name);
                        put_name(&store, name, name_len);
                        n++;
                }
        }
        const char **names = malloc((n + 1) * sizeof *names);
        int r = -ENOMEM;
        if (names) {
                size_t off = 0;
                for (size_t i = 0; i < n; off += strlen(store.data + off) + 1)
                        names[i++] = store.data + off;
                r = read_digests(nl, family, table, names, n, NULL, NULL, &found, known);
        }
        nftables_names_done(&found);
        free(names);
        buf_done(&store);
        return r;
}

int iptables_observe(const struct iptables_tools *t, struct nftables *nl, uint8_t family, const char *input,
                     size_t len, struct iptables_known *known) {
        static const char *const tables[] = {"nat", "filter"};
        struct buf saved = BUF_INIT;
        int r = 0;
        if (t->backend != IPTABLES_BACKEND_NFT)
                nl = NULL;
        for (size_t i = 0; i < ELEMENTSOF(tables) && r == 0; i++) {
                if (nl) {
                        r = observe_declared(nl, family, tables[i], input, len, known);
                        continue;
                }
                buf_clear(&saved);
                r = save(t, family, tables[i], &saved);
                if (r == 0)
                        iptables_known_observe(known, tables[i], saved.data, saved.len);
        }
        buf_done(&saved);
        return r;
}

void iptables_names_free(struct hmap *existing, char *names) {
        hmap_done(existing);
        free(names);
}

/* iptables -w 5 -W 100000 -t TABLE OP CHAIN [1] [args -j TARGET]. */
static int run_iptables(const struct iptables_tools *t, uint8_t family, const char *table, const char *op,
                        const char *chain, bool pos1, const struct jump *j, struct buf *err) {
        const char *argv[32];
        size_t n = 0;
        argv[n++] = iptables_tool_name(t, family, IPTABLES_TOOL_CMD);
        argv[n++] = "-w";
        argv[n++] = "5";
        argv[n++] = "-W";
        argv[n++] = "100000";
        argv[n++] = "-t";
        argv[n++] = table;
        argv[n++] = op;
        argv[n++] = chain;
        if (pos1)
                argv[n++] = "1";
        if (j) {
                for (const char *const *a = j->args; *a && n < 28; a++)
                        argv[n++] = *a;
                argv[n++] = "-j";
                argv[n++] = j->target;
        }
        argv[n] = NULL;
        return exec_run(argv, NULL, 0, NULL, err);
}

int iptables_ensure_jumps(const struct iptables_tools *t, uint8_t family) {
        struct buf saved_nat = BUF_INIT, saved_filter = BUF_INIT, line = BUF_INIT, err = BUF_INIT;
        int r = save(t, family, "nat", &saved_nat);
        if (r == 0)
                r = save(t, family, "filter", &saved_filter);

        for (size_t i = 0; r == 0 && i < ELEMENTSOF(jumps); i++) {
                const struct jump *j = &jumps[i];
                const struct buf *saved = strcmp(j->table, "nat") == 0 ? &saved_nat : &saved_filter;
                char decl[64];

                snprintf(decl, sizeof decl, ":%s ", j->target);
                if (!strstr(saved->data ? saved->data : "", decl)) {
                        buf_clear(&err);
                        /* "Chain already exists" is fine: another writer raced us. */
                        run_iptables(t, family, j->table, "-N", j->target, false, NULL, &err);
                }
                buf_clear(&line);
                jump_text(j, &line);
                if (saved_has_line(saved, line.data))
                        continue;
                buf_clear(&err);
                int q = run_iptables(t, family, j->table, "-I", j->builtin, true, j, &err);
                if (q != 0) {
                        log_error("Failed to insert the jump %s in table %s: %s", line.data, j->table,
                                  err.data ? err.data : "");
                        r = q < 0 ? q : -EIO;
                }
        }
        buf_done(&saved_nat);
        buf_done(&saved_filter);
        buf_done(&line);
        buf_done(&err);
        return r;
}

/* Logs the lines around the one the tool complains about ("line N failed"). */
static void log_restore_failure(const char *tool_name, const char *input, size_t len, const char *err) {
        const char *l = err ? strstr(err, "line ") : NULL;
        long bad = l ? strtol(l + 5, NULL, 10) : 0;
        log_error("%s failed: %s", tool_name, err && *err ? err : "(no message)");
        if (bad <= 0)
                return;
        long n = 1;
        for (const char *p = input; p < input + len && n <= bad + 2;) {
                const char *nl = memchr(p, '\n', (size_t) (input + len - p));
                size_t ll = nl ? (size_t) (nl - p) : (size_t) (input + len - p);
                if (n >= bad - 2)
                        log_error("%c%5ld: %.*s", n == bad ? '>' : ' ', n, (int) (ll > 400 ? 400 : ll), p);
                p += ll + 1;
                n++;
        }
}

struct restore {
        const struct iptables_tools *tools;
        uint8_t family;
};

static int restore_run(const struct restore *o, const char *input, size_t len) {
        const char *argv[] = {iptables_tool_name(o->tools, o->family, IPTABLES_TOOL_RESTORE), "-w", "5", "-W",
                              "100000", "--noflush", "--counters", NULL};
        struct buf err = BUF_INIT;
        int r = exec_run(argv, input, len, NULL, &err);
        if (r != 0) {
                log_restore_failure(argv[0], input, len, err.data);
                r = r < 0 ? r : -EIO;
        }
        buf_done(&err);
        return r;
}

static int restore_piece(const char *piece, size_t len, void *userdata) {
        return restore_run(userdata, piece, len);
}

int iptables_restore_split(const struct iptables_tools *t, uint8_t family, const char *input, size_t len,
                           size_t max_lines) {
        struct restore o = {t, family};
        size_t lines = 0;
        for (const char *p = input; p && (p = memchr(p, '\n', (size_t) (input + len - p))); p++)
                lines++;
        if (lines <= 2 * max_lines)
                return restore_run(&o, input, len);
        int r = iptables_split(input, len, max_lines, restore_piece, &o);
        if (r == -EINVAL) {
                log_error("Refusing to restore IPv%u rules: the input is not iptables-restore text", family);
                return -EIO;
        }
        return r;
}

int iptables_restore(const struct iptables_tools *t, uint8_t family, const char *input, size_t len, bool loaded) {
        /* Into empty tables the tool's userspace is quadratic in a piece's
         * lines, and each commit adds a little: 1000-line pieces loaded 1k
         * services x 10 endpoints in 0.64 s, 3000-line ones in 0.80 s, and
         * both 20k in 28.5 s (measured). */
        size_t lines = 0, max_lines = IPTABLES_RESTORE_PIECE_LINES;
        if (loaded) {
                max_lines = IPTABLES_RESTORE_LOADED_LINES;
                /* Each piece costs the tool's userspace about a * L^2 for L
                 * lines, and the kernel a walk of every chain reachable from
                 * the built-in ones, about b * T for a table of T lines (it
                 * validates the whole jump graph on each commit: 0.7 s at 20k
                 * services x 10 endpoints). Over T / L pieces the total is
                 * least at L = sqrt(b * T / a); measured, that is about
                 * 13 sqrt(T): 101 s instead of 180 s at that size. An empty
                 * table costs the kernel nothing to validate until the
                 * top-level chains, written last, make it reachable. */
                for (const char *p = input; p && (p = memchr(p, '\n', (size_t) (input + len - p))); p++)
                        lines++;
                size_t l = (size_t) (13.0 * sqrt((double) lines));
                if (l > max_lines)
                        max_lines = l;
        }
        return iptables_restore_split(t, family, input, len, max_lines);
}

static const char *const canary_tables[] = {"mangle", "nat", "filter"};

int iptables_canary_ensure(const struct iptables_tools *t, uint8_t family) {
        struct buf err = BUF_INIT;
        int r = 0;
        for (size_t i = 0; i < ELEMENTSOF(canary_tables); i++) {
                buf_clear(&err);
                if (run_iptables(t, family, canary_tables[i], "-S", "KUBE-PROXY-CANARY", false, NULL, NULL) == 0)
                        continue;
                int q = run_iptables(t, family, canary_tables[i], "-N", "KUBE-PROXY-CANARY", false, NULL, &err);
                if (q != 0) {
                        log_error("Failed to create KUBE-PROXY-CANARY in %s: %s", canary_tables[i],
                                  err.data ? err.data : "");
                        r = q < 0 ? q : -EIO;
                }
        }
        buf_done(&err);
        return r;
}

bool iptables_canary_present(const struct iptables_tools *t, uint8_t family) {
        /* Upstream watches the mangle canary: nothing else uses that table,
         * so it disappears only when someone flushes everything. */
        return run_iptables(t, family, "mangle", "-S", "KUBE-PROXY-CANARY", false, NULL, NULL) == 0;
}

/* Flushes and deletes the listed chains of one table that exist; returns
 * how many. */
static size_t cleanup_table(const char *table, const struct buf *saved, bool owned, struct buf *in) {
        struct buf decl = BUF_INIT, del = BUF_INIT;
        size_t n = 0, n_fixed;
        const char *const *fixed = iptables_fixed_chains(table, &n_fixed);
        char chain[64];
        for (const char *p = saved->data; next_chain(&p, chain);) {
                bool ours = owned && has_owned_prefix(chain);
                for (size_t i = 0; i < n_fixed && !ours; i++)
                        ours = strcmp(chain, fixed[i]) == 0;
                if (ours) {
                        buf_printf(&decl, ":%s - [0:0]\n", chain);
                        buf_printf(&del, "-X %s\n", chain);
                        n++;
                }
        }
        if (decl.len > 0) {
                buf_printf(in, "*%s\n", table);
                buf_put(in, decl.data, decl.len);
                buf_put(in, del.data, del.len);
                buf_puts(in, "COMMIT\n");
        }
        buf_done(&decl);
        buf_done(&del);
        return n;
}

/* The table as the tools save it, or nothing when it is a legacy table
 * that does not exist (asking for it would create it). */
static int cleanup_save(const struct iptables_tools *t, uint8_t family, const char *table, struct buf *out) {
        if (t->backend == IPTABLES_BACKEND_LEGACY && !iptables_legacy_table_exists(family, table))
                return 0;
        return save(t, family, table, out);
}

int iptables_cleanup(const struct iptables_tools *t, uint8_t family) {
        struct buf nat = BUF_INIT, filter = BUF_INIT, mangle = BUF_INIT, line = BUF_INIT, in = BUF_INIT;
        size_t n = 0;
        int r = cleanup_save(t, family, "nat", &nat);
        if (r == 0)
                r = cleanup_save(t, family, "filter", &filter);
        if (r == 0)
                r = cleanup_save(t, family, "mangle", &mangle);
        if (r < 0)
                goto out;

        /* Jumps first, so the chains are unreferenced. KUBE-FIREWALL and its
         * jumps stay: kubelet made them first, as upstream's cleanup knows. */
        for (size_t i = 0; i < ELEMENTSOF(jumps); i++) {
                const struct jump *j = &jumps[i];
                if (strcmp(j->target, "KUBE-FIREWALL") == 0)
                        continue;
                buf_clear(&line);
                jump_text(j, &line);
                if (!saved_has_line(strcmp(j->table, "nat") == 0 ? &nat : &filter, line.data))
                        continue;
                if (run_iptables(t, family, j->table, "-D", j->builtin, false, j, NULL) != 0)
                        log_warning("Failed to delete %s from table %s, ignoring", line.data, j->table);
        }
        n += cleanup_table("nat", &nat, true, &in);
        n += cleanup_table("filter", &filter, false, &in);
        n += cleanup_table("mangle", &mangle, false, &in);
        if (in.len > 0)
                r = iptables_restore(t, family, in.data, in.len, false);
        if (r == 0)
                r = n > INT_MAX ? INT_MAX : (int) n;
out:
        buf_done(&nat);
        buf_done(&filter);
        buf_done(&mangle);
        buf_done(&line);
        buf_done(&in);
        return r;
}

int iptables_cleanup_backend(enum iptables_backend b, uint8_t family) {
        const char *name = b == IPTABLES_BACKEND_NFT ? "iptables-nft" : "iptables-legacy";
        struct iptables_tools t;
        int r = iptables_backend_has_proxy(b, family);

        if (r == 0)
                return 0;
        if (iptables_tools_find(b, &t) < 0) {
                if (r < 0)
                        return 0;       /* nothing we could read, and nothing to act with */
                log_error("IPv%u tables of %s hold kube-proxy's chains, but %s is not installed to remove them",
                          family, name, name);
                return -ENOENT;
        }
        int q = iptables_cleanup(&t, family);
        if (q > 0)
                log_info("Removed %d IPv%u chains of kproxy or kube-proxy from %s", q, family, name);
        if (q < 0 && r < 0) {
                /* A backend that netlink could not ask (no nf_tables in
                 * this kernel) is one the tools cannot read either. */
                log_warning_errno(q, "Failed to read the IPv%u tables of %s, ignoring", family, name);
                return 0;
        }
        return q;
}
