/* SPDX-License-Identifier: Apache-2.0 */
/* Splitting a restore input into pieces: every line kept once, a chain in
 * no earlier piece than the chains it jumps to, deletions last, sections
 * the splitter does not understand passed whole, malformed input refused. */
#include <errno.h>
#include <stdbool.h>

#include "apply/iptables-split.h"
#include "test.h"
#include "util/buf.h"

#define MAX_PIECES 64

struct pieces {
        char *text[MAX_PIECES];
        size_t n;
        int fail_at;            /* return -EIO for this piece (1-based), 0: never */
};

static int collect(const char *piece, size_t len, void *userdata) {
        struct pieces *p = userdata;
        CHECK(len == strlen(piece));
        if (p->n == MAX_PIECES)
                return -E2BIG;
        p->text[p->n] = strdup(piece);
        p->n++;
        return p->fail_at == (int) p->n ? -EIO : 0;
}

static void pieces_free(struct pieces *p) {
        for (size_t i = 0; i < p->n; i++)
                free(p->text[i]);
        p->n = 0;
}

/* The 1-based piece holding line l (exactly), 0 if none. */
static size_t piece_of(const struct pieces *p, const char *l) {
        size_t found = 0;
        for (size_t i = 0; i < p->n; i++) {
                for (const char *q = p->text[i]; (q = strstr(q, l)); q++)
                        if ((q == p->text[i] || q[-1] == '\n') && q[strlen(l)] == '\n') {
                                CHECK(found == 0);      /* once only */
                                found = i + 1;
                        }
        }
        return found;
}

static const char nat[] =
        "*nat\n"
        ":KUBE-SERVICES - [0:0]\n"
        ":KUBE-MARK-MASQ - [0:0]\n"
        ":KUBE-SVC-A - [0:0]\n"
        ":KUBE-SEP-A1 - [0:0]\n"
        ":KUBE-SEP-A2 - [0:0]\n"
        ":KUBE-EXT-A - [0:0]\n"
        ":KUBE-SEP-OLD - [0:0]\n"
        "-A KUBE-SERVICES -m comment --comment \"x -j KUBE-SEP-OLD\" -d 10.0.0.1/32 -j KUBE-SVC-A\n"
        "-A KUBE-SERVICES -d 10.0.0.2/32 -j KUBE-EXT-A\n"
        "-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n"
        "-A KUBE-SVC-A -m statistic --mode random --probability 0.5 -j KUBE-SEP-A1\n"
        "-A KUBE-SVC-A -j KUBE-SEP-A2\n"
        "-A KUBE-SEP-A1 -s 10.1.0.1/32 -j KUBE-MARK-MASQ\n"
        "-A KUBE-SEP-A1 -p tcp -j DNAT --to-destination 10.1.0.1:80\n"
        "-A KUBE-SEP-A2 -p tcp -j DNAT --to-destination 10.1.0.2:80\n"
        "-A KUBE-EXT-A -j KUBE-MARK-MASQ\n"
        "-A KUBE-EXT-A -j KUBE-SVC-A\n"
        "-A KUBE-POSTROUTING -j RETURN\n"
        "-X KUBE-SEP-OLD\n"
        "COMMIT\n";

static void test_order_and_lines(void) {
        for (size_t max = 1; max <= 40; max++) {
                struct pieces p = {0};
                CHECK(iptables_split(nat, sizeof nat - 1, max, collect, &p) == 0);
                CHECK(p.n >= 2);
                /* Every line once; each piece a whole section. */
                for (const char *l = nat; *l;) {
                        const char *nl = strchr(l, '\n');
                        char line[256];
                        snprintf(line, sizeof line, "%.*s", (int) (nl - l), l);
                        if (strcmp(line, "*nat") != 0 && strcmp(line, "COMMIT") != 0)
                                CHECK(piece_of(&p, line) != 0);
                        l = nl + 1;
                }
                for (size_t i = 0; i < p.n; i++) {
                        CHECK(strncmp(p.text[i], "*nat\n", 5) == 0);
                        size_t n = strlen(p.text[i]);
                        CHECK(n >= 7 && strcmp(p.text[i] + n - 7, "COMMIT\n") == 0);
                }
                /* Each chain's rules in the piece of its declaration, in order. */
                size_t svc = piece_of(&p, ":KUBE-SVC-A - [0:0]");
                size_t sep1 = piece_of(&p, ":KUBE-SEP-A1 - [0:0]"), sep2 = piece_of(&p, ":KUBE-SEP-A2 - [0:0]");
                size_t ext = piece_of(&p, ":KUBE-EXT-A - [0:0]"), top = piece_of(&p, ":KUBE-SERVICES - [0:0]");
                size_t mm = piece_of(&p, ":KUBE-MARK-MASQ - [0:0]");
                CHECK(piece_of(&p, "-A KUBE-SVC-A -j KUBE-SEP-A2") == svc);
                const char *t = p.text[svc - 1];
                CHECK(strstr(t, "--probability 0.5 -j KUBE-SEP-A1") < strstr(t, "-A KUBE-SVC-A -j KUBE-SEP-A2"));
                /* Targets first. */
                CHECK(mm <= sep1 && sep1 <= svc && sep2 <= svc && svc <= ext && ext <= top);
                /* The deleted chain, its -X and the undeclared chain's rule: last. */
                CHECK(piece_of(&p, ":KUBE-SEP-OLD - [0:0]") == p.n);
                CHECK(piece_of(&p, "-X KUBE-SEP-OLD") == p.n);
                CHECK(piece_of(&p, "-A KUBE-POSTROUTING -j RETURN") == p.n);
                CHECK(top < p.n);
                if (max == 1)
                        CHECK(p.n == 7);        /* six chains that stay, one each, then the last */
                if (max >= 40)
                        CHECK(p.n == 2);
                pieces_free(&p);
        }
}

static void test_sections_and_whole(void) {
        struct buf in = BUF_INIT;
        struct pieces p = {0};
        buf_puts(&in, "# Generated by kproxy\n*filter\n:KUBE-FIREWALL - [0:0]\n"
                      "-I INPUT -j KUBE-FIREWALL\n-A KUBE-FIREWALL -j DROP\nCOMMIT\n");
        buf_puts(&in, nat);
        CHECK(iptables_split(in.data, in.len, 1, collect, &p) == 0);
        CHECK(p.n == 8);
        /* The filter section has an -I: passed as it is, first. */
        CHECK_STREQ(p.text[0], "*filter\n:KUBE-FIREWALL - [0:0]\n-I INPUT -j KUBE-FIREWALL\n"
                               "-A KUBE-FIREWALL -j DROP\nCOMMIT\n");
        CHECK(strncmp(p.text[1], "*nat\n", 5) == 0);
        pieces_free(&p);

        /* A failing piece stops the split with its error. */
        p.fail_at = 3;
        CHECK(iptables_split(in.data, in.len, 1, collect, &p) == -EIO);
        CHECK(p.n == 3);
        pieces_free(&p);
        buf_done(&in);

        /* A chain declared twice: the section goes whole. */
        static const char twice[] = "*nat\n:A - [0:0]\n:B - [0:0]\n:A - [0:0]\n-A A -j B\nCOMMIT\n";
        CHECK(iptables_split(twice, sizeof twice - 1, 1, collect, &p) == 0);
        CHECK(p.n == 1);
        CHECK_STREQ(p.text[0], twice);
        pieces_free(&p);

        /* Jump loops do not hang the level computation. */
        static const char loop[] = "*nat\n:A - [0:0]\n:B - [0:0]\n-A A -j B\n-A B -j A\nCOMMIT\n";
        CHECK(iptables_split(loop, sizeof loop - 1, 1, collect, &p) == 0);
        CHECK(p.n == 2);
        pieces_free(&p);
}

static void test_refused(void) {
        static const char *const bad[] = {
                "-A X -j ACCEPT\n",                     /* outside a section */
                "*nat\n:A - [0:0]\n",                   /* no COMMIT */
                "*nat\n*filter\nCOMMIT\n",              /* section in a section */
                "*nat\nCOMMIT\n*filter\n-A B -j C",     /* last one unterminated */
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                struct pieces p = {0};
                CHECK(iptables_split(bad[i], strlen(bad[i]), 10, collect, &p) == -EINVAL);
                CHECK(p.n == 0);
        }
        struct pieces p = {0};
        CHECK(iptables_split("", 0, 10, collect, &p) == 0);
        CHECK(p.n == 0);
        /* A name too long for a chain: the section goes whole (the tool will say why). */
        static const char longname[] =
                "*nat\n:KUBE-THIS-NAME-IS-MUCH-LONGER-THAN-ANY-CHAIN-NAME-CAN-EVER-BE-IN-IPTABLES - [0:0]\nCOMMIT\n";
        CHECK(iptables_split(longname, sizeof longname - 1, 10, collect, &p) == 0);
        CHECK(p.n == 1);
        pieces_free(&p);
}

int main(void) {
        TEST_RUN(test_order_and_lines);
        TEST_RUN(test_sections_and_whole);
        TEST_RUN(test_refused);
        TEST_DONE();
}
