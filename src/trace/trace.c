/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The trace's loop: arm (trace-arm.c), read the kernel's notifications,
 * print each marked packet's walk as it comes, stop at the packet limit,
 * the time limit, SIGINT or SIGTERM, and disarm. A packet's first event
 * is in the trace's own chain (priority -350, before any NAT): it gives
 * the connection's original addresses, by which the packets of the first
 * connection are told from others (unless all are asked for); the trace's
 * own events are not printed.
 */
#include "trace/trace.h"

#include <errno.h>
#include <jansson.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "trace/trace-arm.h"
#include "trace/trace-event.h"
#include "trace/trace-rules.h"
#include "trace/trace-xt.h"
#include "util/clock.h"
#include "util/log.h"

#define GRACE_MS 300    /* after the last packet: the rest of its walk (later hooks) */
#define MAX_IDS 64

struct tracer {
        const struct trace_opts *o;
        FILE *out;
        struct trace_rules *rules;
        uint32_t ids[MAX_IDS];          /* the packets printed */
        unsigned n_ids;
        uint32_t skipped[MAX_IDS];      /* packets of other connections (a ring) */
        unsigned n_skipped;
        struct trace_event first;       /* the first packet's original addresses */
        bool have_first;
        struct trace_event last;        /* the packet's addresses as last printed */
        uint32_t cur;                   /* the packet being printed */
        bool cur_printed;               /* the latest packet is one printed (for x_tables' events,
                                         * which carry no packet id) */
        bool done;                      /* the limit is reached: only its packets' events */
        unsigned reloads;
};

static void tuple_str(const struct trace_event *e, char *out, size_t len) {
        char s[INET_ADDR_STRLEN], d[INET_ADDR_STRLEN];
        const char *proto = e->proto == 6 ? "tcp" : e->proto == 17 ? "udp" : e->proto == 132 ? "sctp" : "ip";
        bool v6 = e->family == 6, ports = e->sport || e->dport;
        if (!e->has_tuple) {
                snprintf(out, len, "?");
                return;
        }
        inet_addr_format(&e->src, s);
        inet_addr_format(&e->dst, d);
        if (ports)
                snprintf(out, len, "%s%s%s:%u -> %s%s%s:%u %s", v6 ? "[" : "", s, v6 ? "]" : "", e->sport,
                         v6 ? "[" : "", d, v6 ? "]" : "", e->dport, proto);
        else
                snprintf(out, len, "%s -> %s %s", s, d, proto);
}

static bool same_tuple(const struct trace_event *a, const struct trace_event *b) {
        return inet_addr_equal(&a->src, &b->src) && inet_addr_equal(&a->dst, &b->dst) && a->sport == b->sport &&
               a->dport == b->dport && a->proto == b->proto;
}

static bool known(const uint32_t *v, unsigned n, uint32_t id) {
        for (unsigned i = 0; i < n && i < MAX_IDS; i++)
                if (v[i] == id)
                        return true;
        return false;
}

static const char *find_rule(struct tracer *t, const struct trace_event *e) {
        if (e->xt)
                return trace_rules_find_xt(t->rules, e->family, e->table, e->chain,
                                           e->type == NFT_TRACETYPE_POLICY ? 0 : (unsigned) e->handle);
        return trace_rules_find(t->rules, e->family, e->table, e->chain, e->handle);
}

/* The rule's text (an x_tables chain's policy: its word), or NULL. */
static const char *rule_text(struct tracer *t, const struct trace_event *e) {
        if (e->xt ? e->type == NFT_TRACETYPE_RETURN : e->type != NFT_TRACETYPE_RULE)
                return NULL;
        const char *s = find_rule(t, e);
        if (!s && t->reloads < 3) {
                /* A rule written since the trace started. */
                struct trace_rules *fresh;
                t->reloads++;
                if (trace_rules_load(&fresh) == 0) {
                        trace_rules_free(t->rules);
                        t->rules = fresh;
                        s = find_rule(t, e);
                }
        }
        return s;
}

/* Where the event is: "ip", "ip6", or for x_tables "iptables-legacy". */
static const char *where(const struct trace_event *e) {
        if (e->xt)
                return e->family == 6 ? "ip6tables-legacy" : "iptables-legacy";
        return e->family == 6 ? "ip6" : "ip";
}

static void print_json(struct tracer *t, const struct trace_event *e, unsigned packet) {
        char tup[2 * INET_ADDR_STRLEN + 32];
        const char *text = rule_text(t, e);
        tuple_str(e, tup, sizeof tup);
        /* The kernel sends the packet's headers with its first event in
         * each hook, not with every event: null where they are not. */
        /* An x_tables event has the rule's number in its chain, no
         * handle and no verdict. */
        bool numbered = e->xt && e->type == NFT_TRACETYPE_RULE;
        json_t *j = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:s, s:o}", "packet", packet,
                              "engine", e->xt ? "x_tables" : "nf_tables", "family", e->family == 6 ? "ip6" : "ip",
                              "table", e->table, "chain", e->chain, "type",
                              e->type == NFT_TRACETYPE_RULE     ? "rule"
                              : e->type == NFT_TRACETYPE_POLICY ? "policy"
                                                                : "return",
                              "handle", e->xt ? json_null() : json_integer((json_int_t) e->handle), "ruleNumber",
                              numbered ? json_integer((json_int_t) e->handle) : json_null(), "rule",
                              text ? json_string(text) : json_null(), "verdict",
                              e->has_verdict ? trace_verdict_name(e->verdict) : "", "target", e->target, "packetNow",
                              e->has_tuple ? json_string(tup) : json_null());
        if (j) {
                json_dumpf(j, t->out, JSON_COMPACT);
                fputc('\n', t->out);
                json_decref(j);
        }
}

static void print_event(struct tracer *t, const struct trace_event *e, unsigned packet) {
        char tup[2 * INET_ADDR_STRLEN + 32];
        if (t->o->json) {
                print_json(t, e, packet);
                return;
        }
        if (e->has_tuple && !same_tuple(e, &t->last)) {
                tuple_str(e, tup, sizeof tup);
                fprintf(t->out, "    now %s\n", tup);
                t->last = *e;
        }
        const char *fam = where(e);
        if (e->type == NFT_TRACETYPE_POLICY) {
                const char *word = e->xt ? rule_text(t, e) : NULL;
                fprintf(t->out, "  %s %s %s: policy %s\n", fam, e->table, e->chain,
                        e->has_verdict ? trace_verdict_name(e->verdict) : word ? word : "?");
                return;
        }
        if (e->type == NFT_TRACETYPE_RETURN || (!e->xt && e->type == NFT_TRACETYPE_RULE && e->handle == 0)) {
                /* Past the chain's last rule: newer kernels name the
                 * chain's end as a rule without a handle. */
                fprintf(t->out, "  %s %s %s: end of chain (no rule matched)%s\n", fam, e->table, e->chain,
                        e->has_verdict && e->verdict == NFT_RETURN ? ", return" : "");
                return;
        }
        const char *text = rule_text(t, e);
        fprintf(t->out, "  %s %s %s: ", fam, e->table, e->chain);
        if (text)
                fprintf(t->out, "%s", text);
        else
                fprintf(t->out, "rule %s %llu", e->xt ? "number" : "handle", (unsigned long long) e->handle);
        if (e->has_verdict)
                fprintf(t->out, "  => %s%s%s", trace_verdict_name(e->verdict), e->target[0] ? " " : "", e->target);
        fputc('\n', t->out);
}

/* A packet's first event is the trace's own rule: decides whether the
 * packet is one to print, and prints its heading. */
static void new_packet(struct tracer *t, const struct trace_event *e) {
        char tup[2 * INET_ADDR_STRLEN + 32], ifname[IF_NAMESIZE] = "";
        t->cur_printed = false;
        if (t->done || (t->have_first && !t->o->all_connections && !same_tuple(e, &t->first))) {
                t->skipped[t->n_skipped++ % MAX_IDS] = e->id;
                return;
        }
        t->cur_printed = true;
        if (!t->have_first) {
                t->first = *e;
                t->have_first = true;
        }
        t->ids[t->n_ids % MAX_IDS] = e->id;
        t->n_ids++;
        t->cur = e->id;
        t->last = *e;
        tuple_str(e, tup, sizeof tup);
        if (e->iif)
                if_indextoname(e->iif, ifname);
        if (!t->o->json)
                fprintf(t->out, "packet %u: %s, %s%s\n", t->n_ids, tup,
                        strcmp(e->chain, "output") == 0 ? "sent by this node" : "in by ",
                        strcmp(e->chain, "output") == 0 ? "" : ifname[0] ? ifname : "?");
        if (t->n_ids >= t->o->max_packets)
                t->done = true;
}

/* The kernel's trace id comes from the packet buffer's address, which a
 * later packet may reuse: the trace's own rule starts every packet, so an
 * id seen there again is a new packet, and the old one's events are over. */
static void forget(uint32_t *v, unsigned n, uint32_t id) {
        for (unsigned i = 0; i < n && i < MAX_IDS; i++)
                if (v[i] == id)
                        v[i] = 0;
}

static void on_event(struct tracer *t, const struct trace_event *e) {
        if (strcmp(e->table, TRACE_TABLE) == 0) {
                /* Its rule starts a packet; the chain's end and policy follow. */
                if (e->type != NFT_TRACETYPE_RULE || e->handle == 0)
                        return;
                forget(t->ids, t->n_ids, e->id);
                forget(t->skipped, t->n_skipped, e->id);
                new_packet(t, e);
                return;
        }
        if (!known(t->ids, t->n_ids, e->id))
                return;
        unsigned packet = 0;
        for (unsigned i = 0; i < t->n_ids && i < MAX_IDS; i++)
                if (t->ids[i] == e->id)
                        packet = i + 1;
        print_event(t, e, packet);
        fflush(t->out);
}

/* Whether an x_tables event (no packet id) is the printed packet's: the
 * latest packet marked is, and NAT has changed at most one end of it. */
static bool xt_ours(const struct tracer *t, const struct trace_event *e) {
        const struct trace_event *l = &t->last;
        if (!t->cur_printed || !e->has_tuple)
                return t->cur_printed;
        return e->proto == l->proto && ((inet_addr_equal(&e->src, &l->src) && e->sport == l->sport) ||
                                         (inet_addr_equal(&e->dst, &l->dst) && e->dport == l->dport));
}

static void on_xt_event(struct tracer *t, const struct trace_event *e) {
        if (!xt_ours(t, e))
                return;
        unsigned packet = 0;
        for (unsigned i = 0; i < t->n_ids && i < MAX_IDS; i++)
                if (t->ids[i] == t->cur)
                        packet = i + 1;
        print_event(t, e, packet);
        fflush(t->out);
}

static int read_events(struct tracer *t, struct mnl_socket *nl) {
        char buf[MNL_SOCKET_BUFFER_SIZE * 4];
        ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
        if (n < 0)
                return errno == ENOBUFS ? 0 : -errno;   /* events lost to a full queue: go on */
        int left = (int) n;
        for (const struct nlmsghdr *h = (const struct nlmsghdr *) buf; mnl_nlmsg_ok(h, left);
             h = mnl_nlmsg_next(h, &left)) {
                struct trace_event e;
                if (trace_event_parse(h, &e) == 0)
                        on_event(t, &e);
                else if (trace_xt_parse(h, &e) == 0)
                        on_xt_event(t, &e);
        }
        return 0;
}

static int signals(sigset_t *old) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &set, old) < 0)
                return -errno;
        int fd = signalfd(-1, &set, SFD_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int trace_run(const struct trace_filter *f, const struct trace_opts *o, FILE *out, void (*ready)(void *ctx),
              void *ctx) {
        struct tracer t = {.o = o, .out = out};
        struct trace_xt xt = {0};
        struct mnl_socket *nl = NULL;
        sigset_t old;
        int sfd, r, d;

        sfd = signals(&old);
        if (sfd < 0)
                return log_error_errno(sfd, "Failed to set up signal handling");
        r = trace_socket_open(&nl);
        if (r < 0) {
                log_error_errno(r, "Failed to open a netlink socket to nf_tables");
                goto out;
        }
        r = trace_rules_load(&t.rules);
        if (r < 0)
                goto out;
        r = trace_xt_arm(nl, f->family, &xt);
        if (r == -EBUSY) {
                log_error("Group 0 of nfnetlink_log is another program's (ulogd?): the legacy tables' trace "
                          "reports go there");
                goto out;
        }
        if (r < 0) {
                log_error_errno(r, "Failed to take the legacy tables' trace reports (nfnetlink_log)");
                goto out;
        }
        r = trace_arm(nl, f);
        if (r == -EEXIST) {
                log_error("Table %s %s exists: another trace runs in this network namespace (or remove it with "
                          "kproxy --cleanup)", f->family == 6 ? "ip6" : "ip", TRACE_TABLE);
                goto out;
        }
        if (r < 0) {
                log_error_errno(r, "Failed to arm the trace");
                goto out;
        }
        if (ready)
                ready(ctx);
        uint64_t deadline = clock_mono_ms() + o->timeout_ms;
        for (;;) {
                uint64_t now = clock_mono_ms();
                if (t.done && deadline > now + GRACE_MS)
                        deadline = now + GRACE_MS;
                if (now >= deadline)
                        break;
                struct pollfd p[2] = {{mnl_socket_get_fd(nl), POLLIN, 0}, {sfd, POLLIN, 0}};
                int k = poll(p, 2, (int) (deadline - now));
                if (k < 0 && errno != EINTR) {
                        r = log_error_errno(-errno, "poll failed");
                        break;
                }
                if (k > 0 && p[1].revents) {
                        /* SIGINT, SIGTERM, SIGHUP: stop, disarm. Taken off
                         * the queue, or it would end the process when the
                         * old mask is back. */
                        struct signalfd_siginfo si;
                        if (read(sfd, &si, sizeof si) < 0)
                                log_v(1, "signalfd: %m");
                        break;
                }
                if (k > 0 && p[0].revents) {
                        r = read_events(&t, nl);
                        if (r < 0) {
                                log_error_errno(r, "Failed to read the trace");
                                break;
                        }
                }
        }
        d = trace_disarm(nl, f->family);
        if (d < 0 && d != -ENOENT)
                log_warning_errno(d, "Failed to delete table %s (the kernel deletes it as kproxy exits)", TRACE_TABLE);
        if (r >= 0)
                r = (int) t.n_ids;
out:
        if (nl) {
                d = trace_xt_disarm(nl, &xt);
                if (d < 0)
                        log_warning_errno(d, "Failed to put back the network namespace's packet logger "
                                             "(kproxy --cleanup does)");
        }
        trace_rules_free(t.rules);
        if (nl)
                mnl_socket_close(nl);
        close(sfd);
        sigprocmask(SIG_SETMASK, &old, NULL);
        return r;
}

int trace_cleanup(void) {
        struct mnl_socket *nl;
        int n = 0, r = trace_socket_open(&nl);
        if (r < 0)
                return r;
        for (uint8_t fam = 4; fam <= 6; fam += 2) {
                r = trace_disarm(nl, fam);
                if (r == 0)
                        n++;
                else if (r != -ENOENT) {
                        mnl_socket_close(nl);
                        return r;
                }
                r = trace_xt_cleanup(fam);
                if (r < 0)
                        log_warning_errno(r, "Could not put back the IPv%u packet logger a kproxy trace left", fam);
                else if (r > 0)
                        log_info("Put back the IPv%u packet logger, left as nfnetlink_log by a kproxy trace", fam);
        }
        mnl_socket_close(nl);
        return n;
}
