/* SPDX-License-Identifier: Apache-2.0 */
/* Partial syncs by rule: the rewritten input, applied to the remembered
 * chains by a small model of iptables-restore's -D and -I, gives exactly
 * the new input's chains; what cannot be said that way is written whole. */
#include <stdbool.h>

#include "apply/iptables-delta.h"
#include "test.h"
#include "util/buf.h"

#define MAX_RULES 256

/* One chain as a list of rule specs (the text after "-A NAME"). */
struct chain {
        char name[32];
        char *rule[MAX_RULES];
        size_t n;
};

static void chain_clear(struct chain *c) {
        for (size_t i = 0; i < c->n; i++)
                free(c->rule[i]);
        c->n = 0;
}

/* Applies the lines about c->name in a restore input to c: ":NAME" flushes,
 * -A appends, -D deletes the first equal rule, -I N inserts at N. */
static bool apply(struct chain *c, const char *input, size_t *ret_ops) {
        char decl[40], a[40], d[40], ins[40];
        snprintf(decl, sizeof decl, ":%s ", c->name);
        snprintf(a, sizeof a, "-A %s", c->name);
        snprintf(d, sizeof d, "-D %s", c->name);
        snprintf(ins, sizeof ins, "-I %s ", c->name);
        for (const char *l = input; *l;) {
                const char *nl = strchr(l, '\n');
                char line[512];
                snprintf(line, sizeof line, "%.*s", (int) (nl - l), l);
                l = nl + 1;
                if (strncmp(line, decl, strlen(decl)) == 0) {
                        chain_clear(c);
                } else if (strncmp(line, a, strlen(a)) == 0 && (line[strlen(a)] == ' ')) {
                        c->rule[c->n++] = strdup(line + strlen(a));
                } else if (strncmp(line, d, strlen(d)) == 0 && line[strlen(d)] == ' ') {
                        size_t i = 0;
                        while (i < c->n && strcmp(c->rule[i], line + strlen(d)) != 0)
                                i++;
                        if (i == c->n)
                                return false;
                        free(c->rule[i]);
                        memmove(&c->rule[i], &c->rule[i + 1], (c->n - i - 1) * sizeof c->rule[0]);
                        c->n--;
                        (*ret_ops)++;
                } else if (strncmp(line, ins, strlen(ins)) == 0) {
                        char *end;
                        size_t pos = strtoul(line + strlen(ins), &end, 10);
                        if (pos < 1 || pos > c->n + 1)
                                return false;
                        memmove(&c->rule[pos], &c->rule[pos - 1], (c->n - pos + 1) * sizeof c->rule[0]);
                        c->rule[pos - 1] = strdup(end);
                        c->n++;
                        (*ret_ops)++;
                }
        }
        return true;
}

static bool chain_eq(const struct chain *x, const struct chain *y) {
        if (x->n != y->n)
                return false;
        for (size_t i = 0; i < x->n; i++)
                if (strcmp(x->rule[i], y->rule[i]) != 0)
                        return false;
        return true;
}

/* A nat input: KUBE-SERVICES with rules for services listed in svcs (a
 * string of letters, one service each), then the nodeports rule. */
static void input(struct buf *b, const char *svcs, const char *extra) {
        buf_clear(b);
        buf_puts(b, "*filter\n:KUBE-SERVICES - [0:0]\n:KUBE-FORWARD - [0:0]\n"
                    "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP\nCOMMIT\n*nat\n"
                    ":KUBE-SERVICES - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n");
        for (const char *s = svcs; *s; s++)
                buf_printf(b, ":KUBE-SVC-%c - [0:0]\n", *s);
        buf_puts(b, extra);
        buf_puts(b, "-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n");
        for (const char *s = svcs; *s; s++) {
                buf_printf(b, "-A KUBE-SERVICES -m comment --comment \"ns/%c:p cluster IP\" -d 10.0.0.%d/32 "
                              "-p tcp --dport 80 -j KUBE-SVC-%c\n", *s, *s, *s);
                buf_printf(b, "-A KUBE-SVC-%c -j KUBE-SEP-%c\n", *s, *s);
        }
        buf_puts(b, "-X KUBE-SVC-GONE\n");
        buf_puts(b, "-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\nCOMMIT\n");
}

/* old -> new through the delta: the nat KUBE-SERVICES the kernel would
 * end with must be the new input's; returns the -D/-I count. */
static size_t check_step(struct iptables_delta *d, const char *old_svcs, const char *new_svcs, bool want_by_rule) {
        struct buf old = BUF_INIT, new = BUF_INIT, out = BUF_INIT;
        struct chain kernel = {.name = "KUBE-SERVICES"}, want = {.name = "KUBE-SERVICES"};
        size_t ops = 0, ignored = 0;
        input(&old, old_svcs, "");
        input(&new, new_svcs, "");
        /* The nat section only: the filter table has its own KUBE-SERVICES. */
        CHECK(apply(&kernel, strstr(old.data, "*nat"), &ignored));
        CHECK(apply(&want, strstr(new.data, "*nat"), &ignored));
        iptables_delta_commit(d, old.data, old.len);
        size_t n = iptables_delta_rewrite(d, new.data, new.len, &out);
        CHECK(n >= 2);          /* filter KUBE-FORWARD, nat KUBE-MARK-MASQ unchanged at least */
        CHECK(strstr(out.data, ":KUBE-MARK-MASQ") == NULL);
        CHECK(strstr(out.data, ":KUBE-FORWARD") == NULL);
        CHECK(strstr(out.data, "-A KUBE-FORWARD") == NULL);
        CHECK(apply(&kernel, strstr(out.data, "*nat"), &ops));
        CHECK(chain_eq(&kernel, &want));
        bool by_rule = strstr(out.data, ":KUBE-SERVICES - [0:0]\n:KUBE-MARK") == NULL &&
                       strstr(strstr(out.data, "*nat"), ":KUBE-SERVICES") == NULL;
        CHECK(by_rule == want_by_rule);
        if (by_rule) {
                /* Changes by rule come before the -X (a deleted chain may be
                 * the target of a deleted rule). */
                const char *x = strstr(out.data, "-X KUBE-SVC-GONE");
                const char *dl = strstr(out.data, "-D KUBE-SERVICES"), *il = strstr(out.data, "-I KUBE-SERVICES");
                CHECK(x && (!dl || dl < x) && (!il || il < x));
        }
        /* Service chains pass through untouched. */
        CHECK(strstr(out.data, ":KUBE-SVC-") != NULL || !*new_svcs);
        chain_clear(&kernel);
        chain_clear(&want);
        buf_done(&old);
        buf_done(&new);
        buf_done(&out);
        return ops;
}

static void test_by_rule(void) {
        struct iptables_delta *d = iptables_delta_new();
        const char *base = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        CHECK(check_step(d, base, base, true) == 0);
        /* One service gone, one new (sorted in), one replaced. */
        CHECK(check_step(d, base, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxz", true) == 1);
        CHECK(check_step(d, base, "0ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", true) == 1);
        CHECK(check_step(d, base, "ABCDEFGHIJKLMNOPQRST3VWXYZabcdefghijklmnopqrstuvwxyz5", true) == 3);
        /* Many changes: whole. */
        CHECK(check_step(d, base, "0123456789ABCDEFGHIJKLMNOPabcdefghijklmnopqrstuvwxyz", false) == 0);
        /* Reordered: whole. */
        CHECK(check_step(d, base, "BACDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", false) == 0);
        /* Short chains: whole. */
        CHECK(check_step(d, "ABCDEF", "ABCDE", false) == 0);
        /* Forgotten: the input as it is. */
        struct buf in = BUF_INIT, out = BUF_INIT;
        input(&in, base, "");
        iptables_delta_forget(d);
        CHECK(iptables_delta_rewrite(d, in.data, in.len, &out) == 0);
        CHECK_STREQ(out.data, in.data);
        buf_done(&in);
        buf_done(&out);
        iptables_delta_free(d);
}

static void test_duplicates_whole(void) {
        struct iptables_delta *d = iptables_delta_new();
        struct buf old = BUF_INIT, new = BUF_INIT, out = BUF_INIT;
        const char *base = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        /* The same rule twice: -D could not say which. */
        input(&old, base, "-A KUBE-SERVICES -j RETURN\n-A KUBE-SERVICES -j RETURN\n");
        input(&new, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxy", "-A KUBE-SERVICES -j RETURN\n");
        iptables_delta_commit(d, old.data, old.len);
        iptables_delta_rewrite(d, new.data, new.len, &out);
        CHECK(strstr(strstr(out.data, "*nat"), ":KUBE-SERVICES - [0:0]") != NULL);
        CHECK(strstr(out.data, "\n-D ") == NULL);
        buf_done(&old);
        buf_done(&new);
        buf_done(&out);
        iptables_delta_free(d);
}

int main(void) {
        TEST_RUN(test_by_rule);
        TEST_RUN(test_duplicates_whole);
        TEST_DONE();
}
