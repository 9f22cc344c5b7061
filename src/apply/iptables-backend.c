/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of looking without touching: deciding which backend to write
 * must cost nothing on a node with a large nf_tables table and must leave
 * no trace. So nf_tables is only ever asked for named chains (a lookup the
 * kernel answers from a hash, where iptables-nft-save of a table walks all
 * of it), and a legacy table is read only once the kernel lists it
 * (iptables-legacy, like the kernel's getsockopt behind it, makes any
 * table it is asked about).
 */
#include "apply/iptables-backend.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "apply/exec.h"
#include "apply/iptables-chains.h"
#include "apply/iptables-lines.h"
#include "apply/nftables.h"
#include "util/buf.h"
#include "util/cleanup.h"

static const char *const backend_table[_IPTABLES_BACKEND_MAX] = {
        [IPTABLES_BACKEND_AUTO] = "auto",
        [IPTABLES_BACKEND_NFT] = "nft",
        [IPTABLES_BACKEND_LEGACY] = "legacy",
};

const char *iptables_backend_to_string(enum iptables_backend b) {
        if (b < 0 || b >= _IPTABLES_BACKEND_MAX)
                return NULL;
        return backend_table[b];
}

enum iptables_backend iptables_backend_from_string(const char *s) {
        for (int i = 0; s && i < _IPTABLES_BACKEND_MAX; i++)
                if (strcmp(s, backend_table[i]) == 0)
                        return (enum iptables_backend) i;
        return _IPTABLES_BACKEND_INVALID;
}

/* [plain, nft, legacy][IPv4, IPv6][tool] */
static const char *const tool_names[3][2][_IPTABLES_TOOL_MAX] = {
        {{"iptables", "iptables-save", "iptables-restore"}, {"ip6tables", "ip6tables-save", "ip6tables-restore"}},
        {{"iptables-nft", "iptables-nft-save", "iptables-nft-restore"},
         {"ip6tables-nft", "ip6tables-nft-save", "ip6tables-nft-restore"}},
        {{"iptables-legacy", "iptables-legacy-save", "iptables-legacy-restore"},
         {"ip6tables-legacy", "ip6tables-legacy-save", "ip6tables-legacy-restore"}},
};

const char *iptables_tool_name(const struct iptables_tools *t, uint8_t family, enum iptables_tool tool) {
        assert(t->backend == IPTABLES_BACKEND_NFT || t->backend == IPTABLES_BACKEND_LEGACY);
        assert(tool >= 0 && tool < _IPTABLES_TOOL_MAX);
        size_t kind = t->plain ? 0 : t->backend == IPTABLES_BACKEND_NFT ? 1 : 2;
        return tool_names[kind][family == 6][tool];
}

/* IPv4's three: IPv6's come in the same package, and the daemon programs
 * IPv6 only when ip6tables-save works. */
static bool installed(const struct iptables_tools *t) {
        for (int i = 0; i < _IPTABLES_TOOL_MAX; i++)
                if (!exec_installed(iptables_tool_name(t, 4, (enum iptables_tool) i)))
                        return false;
        return true;
}

int iptables_tools_version(const struct iptables_tools *t, char *out, size_t len) {
        const char *argv[] = {iptables_tool_name(t, 4, IPTABLES_TOOL_CMD), "--version", NULL};
        struct buf b = BUF_INIT;
        int r = exec_run(argv, NULL, 0, &b, NULL);
        if (r == 0 && len > 0)
                snprintf(out, len, "%.*s", (int) strcspn(b.data ? b.data : "", "\n"), b.data ? b.data : "");
        buf_done(&b);
        return r < 0 ? r : r > 0 ? -EIO : 0;
}

int iptables_tools_find(enum iptables_backend b, struct iptables_tools *ret) {
        struct iptables_tools t = {.backend = b};
        char version[128];

        assert(b == IPTABLES_BACKEND_NFT || b == IPTABLES_BACKEND_LEGACY);
        if (installed(&t)) {
                *ret = t;
                return 0;
        }
        /* iptables 1.8 says which backend it is, "iptables v1.8.9
         * (nf_tables)" or "(legacy)"; before 1.8 there was only legacy. */
        t.plain = true;
        if (!installed(&t) || iptables_tools_version(&t, version, sizeof version) < 0)
                return -ENOENT;
        if ((strstr(version, "(nf_tables)") != NULL) != (b == IPTABLES_BACKEND_NFT))
                return -ENOENT;
        *ret = t;
        return 0;
}

bool iptables_legacy_table_exists(uint8_t family, const char *table) {
        FILE *f = fopen(family == 6 ? "/proc/net/ip6_tables_names" : "/proc/net/ip_tables_names", "re");
        char line[64];
        bool found = false;

        if (!f)
                return false;   /* no ip_tables module: no legacy tables */
        while (!found && fgets(line, sizeof line, f)) {
                line[strcspn(line, "\n")] = '\0';
                found = strcmp(line, table) == 0;
        }
        fclose(f);
        return found;
}

/* --- looking for chains --- */

static const char *const tables[] = {"mangle", "nat", "filter"};

/* What one decision has asked so far: the netlink socket, and the legacy
 * tables read (each at most once, also when that failed). */
struct look {
        struct nftables *nl;
        int nl_error;
        bool legacy_looked;
        int legacy_error;               /* no legacy tools to read with */
        struct iptables_tools legacy;
        bool read[2][ELEMENTSOF(tables)];
        int read_error[2][ELEMENTSOF(tables)];
        struct buf saved[2][ELEMENTSOF(tables)];
};

static void look_done(struct look *l) {
        nftables_close(l->nl);
        for (size_t f = 0; f < 2; f++)
                for (size_t t = 0; t < ELEMENTSOF(tables); t++)
                        buf_done(&l->saved[f][t]);
}

static size_t table_index(const char *table) {
        for (size_t i = 0; i < ELEMENTSOF(tables); i++)
                if (strcmp(table, tables[i]) == 0)
                        return i;
        assert(!"not an iptables table kproxy knows");
        return 0;
}

/* The legacy table as iptables-legacy-save prints it, read once; an empty
 * text when the table does not exist. Returns 0 or -errno. */
static int legacy_table(struct look *l, uint8_t family, const char *table, const struct buf **ret) {
        size_t t = table_index(table), f = family == 6;
        struct buf *saved = &l->saved[f][t];

        if (!l->read[f][t] && iptables_legacy_table_exists(family, table)) {
                if (!l->legacy_looked) {
                        l->legacy_looked = true;
                        l->legacy_error = iptables_tools_find(IPTABLES_BACKEND_LEGACY, &l->legacy);
                }
                int r = l->legacy_error;
                if (r == 0) {
                        const char *argv[] = {iptables_tool_name(&l->legacy, family, IPTABLES_TOOL_SAVE), "-t",
                                              table, NULL};
                        r = exec_run(argv, NULL, 0, saved, NULL);
                        r = r < 0 ? r : r > 0 ? -EIO : 0;
                }
                l->read_error[f][t] = r;
        }
        l->read[f][t] = true;
        if (l->read_error[f][t] < 0)
                return l->read_error[f][t];
        *ret = saved;
        return 0;
}

/* Whether the saved text declares the chain (":NAME POLICY [p:b]"). */
static bool declares(const struct buf *saved, const char *chain) {
        size_t n = strlen(chain);
        for (const char *p = saved->data; p && (p = strstr(p, chain)); p += n)
                if (p > saved->data && p[-1] == ':' && (p - 1 == saved->data || p[-2] == '\n') && p[n] == ' ')
                        return true;
        return false;
}

/* Whether backend b's table of the family has the chain: 1, 0, -errno. */
static int look_chain(struct look *l, enum iptables_backend b, uint8_t family, const char *table,
                      const char *chain) {
        if (b == IPTABLES_BACKEND_NFT) {
                if (!l->nl && l->nl_error == 0)
                        l->nl_error = nftables_open(&l->nl);
                if (l->nl_error < 0)
                        return l->nl_error;
                return nftables_chain_present(l->nl, family, table, chain);
        }
        const struct buf *saved;
        int r = legacy_table(l, family, table, &saved);
        return r < 0 ? r : declares(saved, chain);
}

/* Whether a legacy table of the family holds a chain of iptables mode's
 * owned prefixes (KUBE-SVC-, KUBE-SEP-, ...): 1, 0, -errno. */
static int legacy_owned(struct look *l, uint8_t family, const char *table) {
        const struct buf *saved;
        int r = legacy_table(l, family, table, &saved);
        if (r < 0)
                return r;
        for (const char *p = saved->data; p && *p; p += strcspn(p, "\n"), p += *p == '\n')
                if (p[0] == ':' && iptables_chain_owned(p + 1, strcspn(p + 1, " \n")))
                        return 1;
        return 0;
}

struct mark {
        const char *table, *chain;
};

/* What iptables-wrapper looks for: the chain kubelet makes in mangle so
 * that others can tell its backend, and its canary, which it keeps in
 * mangle (and nat and filter) to notice a flush; every kubelet since 1.17
 * makes one of them, in each family. */
static const struct mark kubelet_marks[] = {
        {"mangle", "KUBE-IPTABLES-HINT"},
        {"mangle", "KUBE-KUBELET-CANARY"},
};

/* kubelet's other chains: its canary's copies, KUBE-FIREWALL (IPv4), and
 * KUBE-MARK-DROP, which kubelets made until IPTablesOwnershipCleanup
 * (1.28). iptables mode's fixed chains come after them. */
static const struct mark other_marks[] = {
        {"nat", "KUBE-KUBELET-CANARY"},
        {"filter", "KUBE-KUBELET-CANARY"},
        {"nat", "KUBE-MARK-DROP"},
        {"filter", "KUBE-FIREWALL"},
};

#define MAX_MARKS 32

/* The marks of a round: 0, kubelet's; 1, everything else Kubernetes'
 * (with iptables mode's fixed chains, which differ per table); 2,
 * iptables mode's alone. */
static size_t round_marks(int round, struct mark out[MAX_MARKS]) {
        size_t n = 0;
        if (round == 0) {
                for (size_t i = 0; i < ELEMENTSOF(kubelet_marks); i++)
                        out[n++] = kubelet_marks[i];
                return n;
        }
        if (round == 1)
                for (size_t i = 0; i < ELEMENTSOF(other_marks); i++)
                        out[n++] = other_marks[i];
        for (size_t t = 0; t < ELEMENTSOF(tables); t++) {
                size_t k;
                const char *const *fixed = iptables_fixed_chains(tables[t], &k);
                for (size_t i = 0; i < k && n < MAX_MARKS; i++)
                        out[n++] = (struct mark) {tables[t], fixed[i]};
        }
        return n;
}

/* Looks for the marks in backend b's tables of both families. Returns 1
 * with the mark and family found, 0 when there is none, or -errno when
 * something could not be looked at and nothing was found. */
static int look_marks(struct look *l, enum iptables_backend b, const struct mark *marks, size_t n,
                      const struct mark **ret_mark, uint8_t *ret_family) {
        int err = 0;
        for (uint8_t family = 4; family <= 6; family += 2)
                for (size_t i = 0; i < n; i++) {
                        int r = look_chain(l, b, family, marks[i].table, marks[i].chain);
                        if (r > 0) {
                                *ret_mark = &marks[i];
                                *ret_family = family;
                                return 1;
                        }
                        if (r < 0 && err == 0)
                                err = r;
                }
        return err;
}

static const char *backend_name(enum iptables_backend b) {
        return b == IPTABLES_BACKEND_NFT ? "iptables-nft" : "iptables-legacy";
}

void iptables_backend_detect(enum iptables_backend *ret, char *why, size_t len) {
        static const enum iptables_backend order[] = {IPTABLES_BACKEND_NFT, IPTABLES_BACKEND_LEGACY};
        struct look l = {0};
        struct mark marks[MAX_MARKS];
        int errors[ELEMENTSOF(order)] = {0};

        for (int round = 0; round < 2; round++) {
                size_t n = round_marks(round, marks);
                for (size_t i = 0; i < ELEMENTSOF(order); i++) {
                        const struct mark *m;
                        uint8_t family;
                        int r = look_marks(&l, order[i], marks, n, &m, &family);
                        if (r < 0 && errors[i] == 0)
                                errors[i] = r;
                        if (r <= 0)
                                continue;
                        *ret = order[i];
                        snprintf(why, len, "%s%s chain is in %s's IPv%u %s table%s", round == 0 ? "kubelet's " : "the ",
                                 m->chain, backend_name(order[i]), family, m->table,
                                 round == 0 ? "" : " (and no kubelet hint or canary in mangle in either backend)");
                        look_done(&l);
                        return;
                }
        }
        *ret = IPTABLES_BACKEND_NFT;
        int n = snprintf(why, len, "neither backend holds a Kubernetes chain: nf_tables, the default");
        for (size_t i = 0; i < ELEMENTSOF(order) && n >= 0 && (size_t) n < len; i++)
                if (errors[i] == -ENOENT && order[i] == IPTABLES_BACKEND_LEGACY)
                        n += snprintf(why + n, len - (size_t) n,
                                      " (legacy tables exist, but iptables-legacy is not installed to read them)");
                else if (errors[i] < 0)
                        n += snprintf(why + n, len - (size_t) n, " (%s could not be looked at: %s)",
                                      backend_name(order[i]), strerror(-errors[i]));
        look_done(&l);
}

int iptables_backend_has_proxy(enum iptables_backend b, uint8_t family) {
        struct look l = {0};
        struct mark marks[MAX_MARKS];
        size_t n = round_marks(2, marks);
        int err = 0, r = 0;

        for (size_t i = 0; i < n && r <= 0; i++) {
                r = look_chain(&l, b, family, marks[i].table, marks[i].chain);
                if (r < 0 && err == 0)
                        err = r;
        }
        if (r <= 0 && b == IPTABLES_BACKEND_LEGACY)
                r = legacy_owned(&l, family, "nat");
        look_done(&l);
        return r > 0 ? 1 : err < 0 ? err : r;
}
