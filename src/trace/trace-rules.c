/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `nft -a list ruleset` gives every rule of every table with its handle
 * ("... # handle 12"), in chain order; iptables-nft-save gives the
 * iptables rules of the tables iptables-nft manages, in the same order
 * ("-A CHAIN ..."). A rule is found by (family, table, chain, handle); in
 * an iptables-nft table, the handle's place in its chain picks the
 * iptables-save line. Both tools run with an argv array, no shell.
 */
#include "trace/trace-rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply/exec.h"
#include "apply/iptables-backend.h"
#include "util/buf.h"
#include "util/hmap.h"

struct rule {
        char *key;              /* "4 nat KUBE-SERVICES 12" */
        char *text;
};

struct trace_rules {
        struct hmap by_key;     /* struct rule */
};

static int add(struct trace_rules *r, const char *key, const char *text, size_t len) {
        struct rule *x = calloc(1, sizeof *x);
        if (!x || !(x->key = strdup(key)) || !(x->text = strndup(text, len))) {
                if (x)
                        free(x->key);
                free(x);
                return -ENOMEM;
        }
        struct rule *old = hmap_put(&r->by_key, x->key, x);
        if (old) {
                free(old->key);
                free(old->text);
                free(old);
        }
        return 0;
}

/* The "-A CHAIN ..." lines of table in iptables-save's output, for the
 * chain: the i-th, or NULL. */
static const char *save_rule(const char *save, const char *table, const char *chain, size_t i, size_t *ret_len) {
        size_t cl = strlen(chain), k = 0;
        bool in = false;
        for (const char *p = save; p && *p;) {
                size_t n = strcspn(p, "\n");
                if (p[0] == '*')
                        in = n - 1 == strlen(table) && strncmp(p + 1, table, n - 1) == 0;
                else if (in && n > 3 + cl && strncmp(p, "-A ", 3) == 0 && strncmp(p + 3, chain, cl) == 0 &&
                         p[3 + cl] == ' ' && k++ == i) {
                        *ret_len = n;
                        return p;
                }
                p += n + (p[n] == '\n');
        }
        return NULL;
}

/* nft says which tables iptables-nft manages, on stderr. */
static bool iptables_table(const char *warnings, const char *fam, const char *table) {
        char warn[160];
        snprintf(warn, sizeof warn, "table %s %s is managed by iptables-nft", fam, table);
        return warnings && strstr(warnings, warn) != NULL;
}

/* nft quotes names with characters outside [a-zA-Z0-9_.] ("service-…/tcp/p"). */
static void unquote(char *s) {
        size_t n = strlen(s);
        if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
                memmove(s, s + 1, n - 2);
                s[n - 2] = '\0';
        }
}

/* The rules from nft's listing, line by line: "table F T {", "chain C {",
 * rules ending in "# handle N" until the chain's "}"; sets', maps' and
 * other objects' lines are outside any chain. */
static int parse_listing(struct trace_rules *r, const char *list, const char *warnings, const char *save4,
                         const char *save6) {
        char fam[16] = "", table[64] = "", chain[256] = "";
        bool in_chain = false, ipt = false;
        size_t index = 0;

        for (const char *p = list; *p;) {
                size_t n = strcspn(p, "\n");
                const char *s = p, *end = p + n;
                while (s < end && (*s == ' ' || *s == '\t'))
                        s++;
                const char *h = NULL;
                for (const char *q = s; q + 9 <= end; q++)
                        if (strncmp(q, "# handle ", 9) == 0)
                                h = q;
                if (strncmp(s, "table ", 6) == 0) {
                        if (sscanf(s, "table %15s %63s", fam, table) != 2)
                                fam[0] = table[0] = '\0';
                        unquote(table);
                        ipt = iptables_table(warnings, fam, table);
                        in_chain = false;
                } else if (strncmp(s, "chain ", 6) == 0) {
                        if (sscanf(s, "chain %255s", chain) != 1)
                                chain[0] = '\0';
                        unquote(chain);
                        in_chain = true;
                        index = 0;
                } else if (in_chain && end - s == 1 && *s == '}') {
                        in_chain = false;
                } else if (in_chain && h && (strcmp(fam, "ip") == 0 || strcmp(fam, "ip6") == 0)) {
                        char key[400];
                        unsigned long long handle = strtoull(h + 9, NULL, 10);
                        bool v6 = strcmp(fam, "ip6") == 0;
                        const char *text = s;
                        size_t len = (size_t) (h - s), sl;
                        if (ipt) {
                                const char *line = save_rule(v6 ? save6 : save4, table, chain, index, &sl);
                                if (line) {
                                        text = line;
                                        len = sl;
                                }
                        }
                        while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t'))
                                len--;
                        snprintf(key, sizeof key, "%c %s %s %llu", v6 ? '6' : '4', table, chain, handle);
                        if (add(r, key, text, len) < 0)
                                return -ENOMEM;
                        index++;
                }
                p = end + (*end == '\n');
        }
        return 0;
}

/* iptables-legacy-save's lines of one family: "*table", ":CHAIN POLICY
 * [..]" and "-A CHAIN ...", a chain's rules together and in order; the
 * kernel numbers them from 1. A chain's policy is kept as its rule 0. */
static int parse_legacy(struct trace_rules *r, char v, const char *save) {
        char table[64] = "", chain[256] = "", key[400];
        size_t i = 0;
        int k = 0;
        for (const char *p = save; *p && k == 0;) {
                size_t n = strcspn(p, "\n");
                if (p[0] == '*' && n < sizeof table) {
                        snprintf(table, sizeof table, "%.*s", (int) n - 1, p + 1);
                        chain[0] = '\0';
                } else if (p[0] == ':') {
                        size_t cl = strcspn(p + 1, " \n");
                        if (cl + 2 < n && cl < sizeof chain) {
                                snprintf(key, sizeof key, "x%c %s %.*s 0", v, table, (int) cl, p + 1);
                                k = add(r, key, p + 2 + cl, strcspn(p + 2 + cl, " \n"));
                        }
                } else if (n > 3 && strncmp(p, "-A ", 3) == 0) {
                        size_t cl = strcspn(p + 3, " \n");
                        if (cl < sizeof chain) {
                                if (strlen(chain) != cl || strncmp(chain, p + 3, cl) != 0) {
                                        snprintf(chain, sizeof chain, "%.*s", (int) cl, p + 3);
                                        i = 0;
                                }
                                snprintf(key, sizeof key, "x%c %s %s %zu", v, table, chain, ++i);
                                k = add(r, key, p, n);
                        }
                }
                p += n + (p[n] == '\n');
        }
        return k;
}

/* The legacy tables' rules, where the family has any. */
static int load_legacy(struct trace_rules *r) {
        struct iptables_tools tools;
        if (iptables_tools_find(IPTABLES_BACKEND_LEGACY, &tools) < 0)
                return 0;
        for (uint8_t fam = 4; fam <= 6; fam += 2) {
                static const char *const tables[] = {"raw", "mangle", "nat", "filter", "security"};
                bool any = false;
                for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
                        any = any || iptables_legacy_table_exists(fam, tables[t]);
                if (!any)
                        continue;
                const char *argv[] = {iptables_tool_name(&tools, fam, IPTABLES_TOOL_SAVE), NULL};
                struct buf out = BUF_INIT;
                int k = 0;
                if (exec_run(argv, NULL, 0, &out, NULL) == 0 && out.data) {
                        buf_putc(&out, '\0');
                        k = parse_legacy(r, fam == 6 ? '6' : '4', out.data);
                }
                buf_done(&out);
                if (k < 0)
                        return k;
        }
        return 0;
}

int trace_rules_load(struct trace_rules **ret) {
        static const char *const nft[] = {"nft", "-a", "list", "ruleset", NULL};
        static const char *const save4[] = {"iptables-nft-save", NULL};
        static const char *const save6[] = {"ip6tables-nft-save", NULL};
        struct buf list = BUF_INIT, warn = BUF_INIT, s4 = BUF_INIT, s6 = BUF_INIT;
        struct trace_rules *r = calloc(1, sizeof *r);
        int k = 0;

        if (!r)
                return -ENOMEM;
        r->by_key = (struct hmap) HMAP_INIT;
        if (exec_run(nft, NULL, 0, &list, &warn) == 0 && list.data) {
                if (exec_installed("iptables-nft-save"))
                        exec_run(save4, NULL, 0, &s4, NULL);
                if (exec_installed("ip6tables-nft-save"))
                        exec_run(save6, NULL, 0, &s6, NULL);
                buf_putc(&list, '\0');
                buf_putc(&warn, '\0');
                buf_putc(&s4, '\0');
                buf_putc(&s6, '\0');
                k = parse_listing(r, list.data, warn.data, s4.data, s6.data);
        }
        if (k == 0)
                k = load_legacy(r);
        buf_done(&list);
        buf_done(&warn);
        buf_done(&s4);
        buf_done(&s6);
        if (k < 0) {
                trace_rules_free(r);
                return k;
        }
        *ret = r;
        return 0;
}

struct trace_rules *trace_rules_free(struct trace_rules *r) {
        size_t it = 0;
        const char *key;
        void *v;
        if (!r)
                return NULL;
        while (hmap_next(&r->by_key, &it, &key, &v)) {
                struct rule *x = v;
                free(x->key);
                free(x->text);
                free(x);
        }
        hmap_done(&r->by_key);
        free(r);
        return NULL;
}

const char *trace_rules_find(const struct trace_rules *r, uint8_t family, const char *table, const char *chain,
                             uint64_t handle) {
        char key[400];
        snprintf(key, sizeof key, "%c %s %s %llu", family == 6 ? '6' : '4', table, chain,
                 (unsigned long long) handle);
        const struct rule *x = r ? hmap_get(&r->by_key, key) : NULL;
        return x ? x->text : NULL;
}

const char *trace_rules_find_xt(const struct trace_rules *r, uint8_t family, const char *table, const char *chain,
                                unsigned number) {
        char key[400];
        snprintf(key, sizeof key, "x%c %s %s %u", family == 6 ? '6' : '4', table, chain, number);
        const struct rule *x = r ? hmap_get(&r->by_key, key) : NULL;
        return x ? x->text : NULL;
}
