/* SPDX-License-Identifier: Apache-2.0 */
/* nftprobe: cheap, polled questions to the kernel's nf_tables, for the
 * programming benchmark (bench/programming.py).
 *
 * `nft list table` at 50k services takes seconds; these are single-object
 * netlink requests whose cost does not grow with the table:
 *   - NFT_MSG_GETCHAIN for one chain by name (a hash lookup in the kernel);
 *   - NFT_MSG_GETSETELEM (not a dump) for one element of a map, by key;
 *   - NFT_MSG_GETRULE dump with NFTA_RULE_TABLE and NFTA_RULE_CHAIN set,
 *     which the kernel answers with the rules of that one chain only, to see
 *     which chains it jumps or goes to.
 * Only `count` dumps a whole set, and costs accordingly.
 *
 * usage: nftprobe [options] COND... [then COND...]...
 *   -n NETNS    enter network namespace NETNS (/run/netns/NETNS) first
 *   -f FAMILY   ip (default) or ip6
 *   -T TABLE    table, default kube-proxy (iptables-nft mode: nat)
 *   -t MS       give up after MS milliseconds (default 60000), exit 1
 *   -i US       sleep between polls, microseconds (default 1000)
 *   -r          print "polling" once the first poll found the first group false
 * Conditions (a group holds when all of its conditions hold at one poll; the
 * groups are waited for in turn, and each prints one line when it holds):
 *   chain C            chain C exists            !chain C   it does not
 *   elem M KEY [C]     element KEY is in map M (and its verdict goes to chain C)
 *                      KEY is IP,PROTO,PORT (ipv4_addr . inet_proto . inet_service)
 *   !elem M KEY        it is not
 *   jump C T           a rule of chain C jumps or goes to chain T   !jump C T  none does
 *   jumps C P K        the rules of chain C jump/go to exactly K distinct chains whose
 *                      names start with P (e.g. endpoint-, KUBE-SEP-)
 *   count S K          set or map S has at least K elements (dumps the set); with
 *                      tables T1,T2,... (see "in"), of all of them together
 *   in T[,T...]        the conditions after it are about table T (default: -T's);
 *                      a list only for count (kproxy's --nftables-shards)
 * One-shot queries (print and exit):
 *   show-chain C       the chains that C's rules jump or go to, one a line
 *   show-elem M KEY    the element's verdict
 *   show-count S       the number of elements of S
 * Output per group: "ok group=G mono=<CLOCK_MONOTONIC seconds> elapsed_ms=<since
 * start> polls=<N>"; on timeout "timeout group=G elapsed_ms=... polls=..." and
 * exit status 1; on a usage or netlink error, exit status 2.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <netinet/in.h>
#include <netdb.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RXBUF (1 << 16)

enum kind { C_CHAIN, C_ELEM, C_JUMP, C_JUMPS, C_COUNT, C_THEN };

struct cond {
        enum kind kind;
        bool neg;
        const char *a, *b;    /* chain / map; target chain */
        uint8_t key[16];      /* elem: ip . proto . port, each padded to 4 bytes */
        int keylen;
        long k;               /* jumps: K, count: K */
        const char *prefix;   /* jumps: count only targets starting with it */
        const char *table;    /* "in": one table, or for count a comma-separated list */
};

static struct mnl_socket *nl;
static unsigned portid, seq;
static const char *table = "kube-proxy";
static uint8_t family = NFPROTO_IPV4;
static char rxbuf[RXBUF];

static double mono(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) {
        fprintf(stderr, "nftprobe: %s: %s\n", what, strerror(errno));
        exit(2);
}

static struct nlmsghdr *start_msg(char *buf, uint16_t type, uint16_t flags) {
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | type;
        nlh->nlmsg_flags = NLM_F_REQUEST | flags;
        nlh->nlmsg_seq = ++seq;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
        g->nfgen_family = family;
        g->version = NFNETLINK_V0;
        g->res_id = htons(0);
        return nlh;
}

/* Sends nlh and runs cb over the answer. Returns 1 when it arrived, 0 on
 * ENOENT (no such table, chain, set or element), -1 when a dump was
 * interrupted by a concurrent change (ask again). */
static int transact(struct nlmsghdr *nlh, mnl_cb_t cb, void *data) {
        unsigned s = nlh->nlmsg_seq;
        bool intr = false;
        if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                die("sendto");
        for (;;) {
                ssize_t n = mnl_socket_recvfrom(nl, rxbuf, sizeof rxbuf);
                if (n < 0) {
                        if (errno == ENOBUFS)
                                return -1;
                        die("recvfrom");
                }
                int left = (int) n;
                for (struct nlmsghdr *h = (struct nlmsghdr *) rxbuf; mnl_nlmsg_ok(h, left);
                     h = mnl_nlmsg_next(h, &left))
                        if (h->nlmsg_flags & NLM_F_DUMP_INTR)
                                intr = true;
                int r = mnl_cb_run(rxbuf, (size_t) n, s, portid, cb, data);
                if (r == MNL_CB_ERROR) {
                        if (errno == ENOENT)
                                return 0;
                        if (errno == EINTR || errno == EBUSY)
                                return -1;
                        die("netlink request");
                }
                if (r == MNL_CB_STOP)
                        return intr ? -1 : 1;
        }
}

/* --- attribute walking --- */

struct attrs {
        const struct nlattr *tb[16];
};

static int put_attr(const struct nlattr *a, void *data) {
        struct attrs *t = data;
        unsigned type = mnl_attr_get_type(a);
        if (type < 16)
                t->tb[type] = a;
        return MNL_CB_OK;
}

static void parse_nested(const struct nlattr *nest, struct attrs *t) {
        memset(t, 0, sizeof *t);
        mnl_attr_parse_nested(nest, put_attr, t);
}

/* A verdict nest (NFTA_DATA_VERDICT's parent, nft_data_attributes): the
 * goto/jump target, or NULL; *code gets the verdict code. */
static const char *verdict_of(const struct nlattr *data, int32_t *code) {
        struct attrs d, v;
        parse_nested(data, &d);
        if (!d.tb[NFTA_DATA_VERDICT])
                return NULL;
        parse_nested(d.tb[NFTA_DATA_VERDICT], &v);
        if (v.tb[NFTA_VERDICT_CODE])
                *code = (int32_t) ntohl(mnl_attr_get_u32(v.tb[NFTA_VERDICT_CODE]));
        return v.tb[NFTA_VERDICT_CHAIN] ? mnl_attr_get_str(v.tb[NFTA_VERDICT_CHAIN]) : NULL;
}

/* --- chain --- */

static int ignore_cb(const struct nlmsghdr *h, void *data) {
        (void) h;
        (void) data;
        return MNL_CB_OK;
}

static int chain_exists(const char *name) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct nlmsghdr *nlh = start_msg(buf, NFT_MSG_GETCHAIN, NLM_F_ACK);
        mnl_attr_put_strz(nlh, NFTA_CHAIN_TABLE, table);
        mnl_attr_put_strz(nlh, NFTA_CHAIN_NAME, name);
        return transact(nlh, ignore_cb, NULL);
}

/* --- one chain's rules: the chains they jump or go to --- */

struct targets {
        char **v;
        size_t n, cap;
};

static void add_target(struct targets *t, const char *name) {
        for (size_t i = 0; i < t->n; i++)
                if (!strcmp(t->v[i], name))
                        return;
        if (t->n == t->cap) {
                t->cap = t->cap ? 2 * t->cap : 16;
                t->v = realloc(t->v, t->cap * sizeof *t->v);
                if (!t->v)
                        die("realloc");
        }
        t->v[t->n++] = strdup(name);
}

static void free_targets(struct targets *t) {
        for (size_t i = 0; i < t->n; i++)
                free(t->v[i]);
        free(t->v);
        memset(t, 0, sizeof *t);
}

static int rule_cb(const struct nlmsghdr *h, void *data) {
        struct attrs r, e, x;
        memset(&r, 0, sizeof r);
        mnl_attr_parse(h, sizeof(struct nfgenmsg), put_attr, &r);
        if (!r.tb[NFTA_RULE_EXPRESSIONS])
                return MNL_CB_OK;
        const struct nlattr *el;
        mnl_attr_for_each_nested(el, r.tb[NFTA_RULE_EXPRESSIONS]) {
                parse_nested(el, &e);
                if (!e.tb[NFTA_EXPR_NAME] || !e.tb[NFTA_EXPR_DATA] ||
                    strcmp(mnl_attr_get_str(e.tb[NFTA_EXPR_NAME]), "immediate"))
                        continue;
                parse_nested(e.tb[NFTA_EXPR_DATA], &x);
                if (!x.tb[NFTA_IMMEDIATE_DREG] || !x.tb[NFTA_IMMEDIATE_DATA] ||
                    ntohl(mnl_attr_get_u32(x.tb[NFTA_IMMEDIATE_DREG])) != NFT_REG_VERDICT)
                        continue;
                int32_t code = 0;
                const char *t = verdict_of(x.tb[NFTA_IMMEDIATE_DATA], &code);
                if (t && (code == NFT_JUMP || code == NFT_GOTO))
                        add_target(data, t);
        }
        return MNL_CB_OK;
}

static int chain_targets(const char *chain, struct targets *t) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        for (;;) {
                struct nlmsghdr *nlh = start_msg(buf, NFT_MSG_GETRULE, NLM_F_DUMP);
                mnl_attr_put_strz(nlh, NFTA_RULE_TABLE, table);
                mnl_attr_put_strz(nlh, NFTA_RULE_CHAIN, chain);
                free_targets(t);
                int r = transact(nlh, rule_cb, t);
                if (r >= 0)
                        return r;
        }
}

/* --- one map element --- */

static int parse_key(const char *s, struct cond *c) {
        char ip[64], proto[16];
        unsigned port;
        const char *p1 = strchr(s, ','), *p2 = p1 ? strchr(p1 + 1, ',') : NULL;
        if (!p1 || !p2 || (size_t)(p1 - s) >= sizeof ip || (size_t)(p2 - p1 - 1) >= sizeof proto)
                return -1;
        memcpy(ip, s, p1 - s);
        ip[p1 - s] = 0;
        memcpy(proto, p1 + 1, p2 - p1 - 1);
        proto[p2 - p1 - 1] = 0;
        port = (unsigned) atoi(p2 + 1);
        memset(c->key, 0, sizeof c->key);
        int alen = family == NFPROTO_IPV6 ? 16 : 4;
        if (inet_pton(family == NFPROTO_IPV6 ? AF_INET6 : AF_INET, ip, c->key) != 1)
                return -1;
        uint8_t pr = !strcmp(proto, "tcp") ? IPPROTO_TCP : !strcmp(proto, "udp") ? IPPROTO_UDP
                   : !strcmp(proto, "sctp") ? IPPROTO_SCTP : 0;
        if (!pr || port > 65535 || alen + 8 > (int) sizeof c->key)
                return -1;
        c->key[alen] = pr;
        uint16_t np = htons((uint16_t) port);
        memcpy(c->key + alen + 4, &np, 2);
        c->keylen = alen + 8;
        return 0;
}

struct elem_answer {
        char target[256];
        int32_t code;
        bool found;
};

static int elem_cb(const struct nlmsghdr *h, void *data) {
        struct elem_answer *a = data;
        struct attrs l, e;
        memset(&l, 0, sizeof l);
        mnl_attr_parse(h, sizeof(struct nfgenmsg), put_attr, &l);
        if (!l.tb[NFTA_SET_ELEM_LIST_ELEMENTS])
                return MNL_CB_OK;
        const struct nlattr *el;
        mnl_attr_for_each_nested(el, l.tb[NFTA_SET_ELEM_LIST_ELEMENTS]) {
                parse_nested(el, &e);
                a->found = true;
                if (e.tb[NFTA_SET_ELEM_DATA]) {
                        const char *t = verdict_of(e.tb[NFTA_SET_ELEM_DATA], &a->code);
                        snprintf(a->target, sizeof a->target, "%s", t ? t : "");
                }
        }
        return MNL_CB_OK;
}

static int get_elem(const struct cond *c, struct elem_answer *a) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        memset(a, 0, sizeof *a);
        struct nlmsghdr *nlh = start_msg(buf, NFT_MSG_GETSETELEM, NLM_F_ACK);
        mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, table);
        mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, c->a);
        struct nlattr *list = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_LIST_ELEMENTS);
        struct nlattr *one = mnl_attr_nest_start(nlh, NFTA_LIST_ELEM);
        struct nlattr *key = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_KEY);
        mnl_attr_put(nlh, NFTA_DATA_VALUE, (size_t) c->keylen, c->key);
        mnl_attr_nest_end(nlh, key);
        mnl_attr_nest_end(nlh, one);
        mnl_attr_nest_end(nlh, list);
        int r;
        while ((r = transact(nlh, elem_cb, a)) < 0)
                nlh->nlmsg_seq = ++seq;
        return r && a->found;
}

/* --- whole-set count --- */

static int count_cb(const struct nlmsghdr *h, void *data) {
        struct attrs l;
        memset(&l, 0, sizeof l);
        mnl_attr_parse(h, sizeof(struct nfgenmsg), put_attr, &l);
        if (!l.tb[NFTA_SET_ELEM_LIST_ELEMENTS])
                return MNL_CB_OK;
        const struct nlattr *el;
        mnl_attr_for_each_nested(el, l.tb[NFTA_SET_ELEM_LIST_ELEMENTS])
                ++*(long *) data;
        return MNL_CB_OK;
}

static long count_elems(const char *set) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        for (;;) {
                long n = 0;
                struct nlmsghdr *nlh = start_msg(buf, NFT_MSG_GETSETELEM, NLM_F_DUMP);
                mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, table);
                mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, set);
                int r = transact(nlh, count_cb, &n);
                if (r == 0)
                        return -1;
                if (r > 0)
                        return n;
        }
}

/* --- conditions --- */

static long count_in_tables(const char *set, const char *tables) {
        char list[1024];
        long sum = 0;
        snprintf(list, sizeof list, "%s", tables);
        for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                table = t;
                long n = count_elems(set);
                if (n < 0)
                        return -1;
                sum += n;
        }
        return sum;
}

static bool holds(const struct cond *c) {
        bool v = false;
        const char *saved = table;
        table = c->table ? c->table : table;
        switch (c->kind) {
        case C_CHAIN:
                v = chain_exists(c->a) > 0;
                break;
        case C_ELEM: {
                struct elem_answer a;
                v = get_elem(c, &a) && (!c->b || !strcmp(a.target, c->b));
                break;
        }
        case C_JUMP:
        case C_JUMPS: {
                struct targets t = {0};
                chain_targets(c->a, &t);
                if (c->kind == C_JUMPS) {
                        long n = 0;
                        for (size_t i = 0; i < t.n; i++)
                                n += !strncmp(t.v[i], c->prefix, strlen(c->prefix));
                        v = n == c->k;
                } else
                        for (size_t i = 0; i < t.n && !v; i++)
                                v = !strcmp(t.v[i], c->b);
                free_targets(&t);
                break;
        }
        case C_COUNT:
                v = (strchr(table, ',') ? count_in_tables(c->a, table) : count_elems(c->a)) >= c->k;
                break;
        case C_THEN:
                break;
        }
        table = saved;
        return c->neg ? !v : v;
}

static void usage(void) {
        fprintf(stderr, "usage: nftprobe [-n NETNS] [-f ip|ip6] [-T TABLE] [-t MS] [-i US] [-r] COND... "
                        "[then COND...]...\n       nftprobe [opts] show-chain C | show-elem M KEY | "
                        "show-count S\n(see the comment at the top of bench/nftprobe.c)\n");
        exit(2);
}

static void enter_netns(const char *name) {
        char path[512];
        snprintf(path, sizeof path, "/run/netns/%s", name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                die(path);
        if (setns(fd, CLONE_NEWNET) < 0)
                die("setns");
        close(fd);
}

int main(int argc, char **argv) {
        double t_start = mono();
        long timeout_ms = 60000, interval_us = 1000;
        bool ready = false;
        const char *netns = NULL;
        int o;
        while ((o = getopt(argc, argv, "+n:f:T:t:i:r")) != -1) {
                switch (o) {
                case 'n': netns = optarg; break;
                case 'f':
                        if (!strcmp(optarg, "ip")) family = NFPROTO_IPV4;
                        else if (!strcmp(optarg, "ip6")) family = NFPROTO_IPV6;
                        else usage();
                        break;
                case 'T': table = optarg; break;
                case 't': timeout_ms = atol(optarg); break;
                case 'i': interval_us = atol(optarg); break;
                case 'r': ready = true; break;
                default: usage();
                }
        }
        if (optind >= argc)
                usage();
        if (netns)
                enter_netns(netns);
        nl = mnl_socket_open(NETLINK_NETFILTER);
        if (!nl)
                die("mnl_socket_open");
        int rcv = 4 << 20;
        setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
        if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
                die("mnl_socket_bind");
        portid = mnl_socket_get_portid(nl);

        int nargs = argc - optind;
        char **a = argv + optind;
        /* One-shot queries. */
        if (!strcmp(a[0], "show-chain") && nargs == 2) {
                struct targets t = {0};
                if (chain_targets(a[1], &t) == 0)
                        return 1;
                for (size_t i = 0; i < t.n; i++)
                        printf("%s\n", t.v[i]);
                return 0;
        }
        if (!strcmp(a[0], "show-elem") && nargs == 3) {
                struct cond c = {.kind = C_ELEM, .a = a[1]};
                struct elem_answer ans;
                if (parse_key(a[2], &c))
                        usage();
                if (!get_elem(&c, &ans)) {
                        printf("absent\n");
                        return 1;
                }
                const char *v = ans.code == NFT_GOTO ? "goto" : ans.code == NFT_JUMP ? "jump"
                              : ans.code == NF_DROP ? "drop" : ans.code == NF_ACCEPT ? "accept" : "verdict";
                printf("%s%s%s\n", v, ans.target[0] ? " " : "", ans.target);
                return 0;
        }
        if (!strcmp(a[0], "show-count") && nargs == 2) {
                long n = count_elems(a[1]);
                if (n < 0)
                        return 1;
                printf("%ld\n", n);
                return 0;
        }

        struct cond *conds = calloc((size_t) nargs + 1, sizeof *conds);
        int nc = 0;
        const char *in = NULL;
        for (int i = 0; i < nargs;) {
                if (!strcmp(a[i], "in") && i + 1 < nargs) {
                        in = a[i + 1];
                        i += 2;
                        continue;
                }
                struct cond *c = &conds[nc++];
                c->table = in;
                const char *w = a[i++];
                c->neg = w[0] == '!';
                if (c->neg)
                        w++;
                int left = nargs - i;
                if (!strcmp(w, "then") && !c->neg) {
                        c->kind = C_THEN;
                } else if (!strcmp(w, "chain") && left >= 1) {
                        c->kind = C_CHAIN;
                        c->a = a[i++];
                } else if (!strcmp(w, "elem") && left >= 2) {
                        c->kind = C_ELEM;
                        c->a = a[i++];
                        if (parse_key(a[i++], c))
                                usage();
                        /* An optional target chain: the next word if it is not a keyword. */
                        if (!c->neg && i < nargs && strchr(a[i], '-'))
                                c->b = a[i++];
                } else if (!strcmp(w, "jump") && left >= 2) {
                        c->kind = C_JUMP;
                        c->a = a[i++];
                        c->b = a[i++];
                } else if (!strcmp(w, "jumps") && left >= 3 && !c->neg) {
                        c->kind = C_JUMPS;
                        c->a = a[i++];
                        c->prefix = a[i++];
                        c->k = atol(a[i++]);
                } else if (!strcmp(w, "count") && left >= 2 && !c->neg) {
                        c->kind = C_COUNT;
                        c->a = a[i++];
                        c->k = atol(a[i++]);
                } else {
                        fprintf(stderr, "nftprobe: bad condition at '%s'\n", a[i - 1]);
                        usage();
                }
        }
        conds[nc].kind = C_THEN;   /* sentinel: the end of the last group */

        double deadline = t_start + timeout_ms / 1e3;
        long polls = 0;
        int group = 0;
        bool said_ready = false;
        struct timespec nap = {.tv_sec = interval_us / 1000000, .tv_nsec = (interval_us % 1000000) * 1000};
        for (int g0 = 0; g0 < nc;) {
                int g1 = g0;
                while (conds[g1].kind != C_THEN)
                        g1++;
                for (;;) {
                        polls++;
                        bool all = true;
                        for (int i = g0; i < g1 && all; i++)
                                all = holds(&conds[i]);
                        double t = mono();
                        if (all) {
                                printf("ok group=%d mono=%.6f elapsed_ms=%.3f polls=%ld\n", group, t,
                                       (t - t_start) * 1e3, polls);
                                fflush(stdout);
                                break;
                        }
                        if (ready && !said_ready) {
                                printf("polling\n");
                                fflush(stdout);
                                said_ready = true;
                        }
                        if (t > deadline) {
                                printf("timeout group=%d elapsed_ms=%.3f polls=%ld\n", group, (t - t_start) * 1e3,
                                       polls);
                                return 1;
                        }
                        if (interval_us > 0)
                                nanosleep(&nap, NULL);
                }
                group++;
                g0 = g1 + 1;
        }
        return 0;
}
