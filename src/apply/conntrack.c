/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of stale-entry cleanup: decide from what the kernel holds, not
 * from what changed. Every UDP entry of the family is compared with the
 * desired state (frontend -> serving backends); an entry whose original
 * destination is a frontend and whose reply source is not one of that
 * frontend's backends is deleted. That one rule covers an endpoint that went
 * away (reply source = old pod), a service that had no endpoint when the
 * flow started (no DNAT, so reply source = the frontend itself) and a target
 * port that changed, and it is idempotent, so a failed sync is repaired by
 * the next one. A live flow to a serving backend is never touched.
 *
 * The desired state becomes two sorted arrays of fixed-size binary keys,
 * "frontend" and "frontend + backend", so each dumped entry costs two binary
 * searches: O((frontends + backends) log + entries log), not quadratic, and
 * no per-entry string formatting or allocation.
 *
 * Entries are collected during the dump and deleted after it: deleting from
 * inside the dump callback would interleave requests with a running dump on
 * the same socket.
 */
#include "apply/conntrack.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "util/cleanup.h"
#include "util/log.h"

/* Test hooks: the pure matcher, exported only so tests/unit/apply/test-conntrack.c
 * can check it on plain structs without a kernel. Not in conntrack.h because
 * nothing else in kproxy needs them; the test repeats these prototypes. */
struct conntrack_index;
int conntrack_index_new(uint8_t family, const struct ct_frontend *frontends, size_t n,
                        struct conntrack_index **ret);
struct conntrack_index *conntrack_index_free(struct conntrack_index *x);
bool conntrack_index_is_stale(const struct conntrack_index *x, const struct inet_addr *orig_dst,
                              uint16_t orig_dport, const struct inet_addr *reply_src, uint16_t reply_sport);
bool conntrack_index_has_addr(const struct conntrack_index *x, const struct inet_addr *a);

/* Key layout, byte-wise so memcmp orders it and padding cannot leak in:
 * kind, 16 address bytes, port (big endian); a pair key appends the
 * backend's address and port. NodePort keys carry a zero address. */
enum {
        KEY_IP = 0,
        KEY_NODE_PORT = 1,
        KEY_ADDR = 2,                   /* conntrack_flush_unnatted(): an address, any port */
};
#define FE_KEY_LEN (1 + 16 + 2)
#define PAIR_KEY_LEN (FE_KEY_LEN + 16 + 2)

struct fe_key {
        uint8_t b[FE_KEY_LEN];
};

struct pair_key {
        uint8_t b[PAIR_KEY_LEN];
};

struct conntrack_index {
        uint8_t family;
        struct fe_key *frontends;       /* sorted, unique */
        size_t n_frontends;
        bool has_node_ports;            /* skip the second search when there are none */
        struct pair_key *pairs;         /* sorted, unique */
        size_t n_pairs;
};

static void put_addr_port(uint8_t *p, const struct inet_addr *a, uint16_t port) {
        if (a)
                memcpy(p, a->bytes, 16);
        else
                memset(p, 0, 16);
        p[16] = (uint8_t) (port >> 8);
        p[17] = (uint8_t) port;
}

static void fe_key_make(struct fe_key *k, int kind, const struct inet_addr *a, uint16_t port) {
        k->b[0] = (uint8_t) kind;
        /* A NodePort matches on any address: its key never has one; an
         * address key, on any port. */
        put_addr_port(k->b + 1, kind == KEY_NODE_PORT ? NULL : a, kind == KEY_ADDR ? 0 : port);
}

static void pair_key_make(struct pair_key *k, const struct fe_key *fe, const struct inet_addr *a, uint16_t port) {
        memcpy(k->b, fe->b, FE_KEY_LEN);
        put_addr_port(k->b + FE_KEY_LEN, a, port);
}

static int cmp_fe_key(const void *a, const void *b) {
        return memcmp(a, b, FE_KEY_LEN);
}

static int cmp_pair_key(const void *a, const void *b) {
        return memcmp(a, b, PAIR_KEY_LEN);
}

/* Sorts and drops duplicates in place; returns the new length. Duplicates
 * are legitimate: two frontends with the same IP:port (a shared external IP)
 * merge their backends, so the union is valid, never the last writer's set. */
static size_t sort_unique(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
        uint8_t *v = base;
        size_t out = 0;

        if (n == 0)
                return 0;
        qsort(v, n, size, cmp);
        for (size_t i = 1; i < n; i++) {
                if (cmp(v + out * size, v + i * size) == 0)
                        continue;
                out++;
                if (out != i)
                        memcpy(v + out * size, v + i * size, size);
        }
        return out + 1;
}

struct conntrack_index *conntrack_index_free(struct conntrack_index *x) {
        if (!x)
                return NULL;
        free(x->frontends);
        free(x->pairs);
        free(x);
        return NULL;
}

DEFINE_CLEANUP(struct conntrack_index, conntrack_index_free)

/* Builds the lookup for one family (4 or 6). Frontends and backends of the
 * other family cannot match an entry of this one and are left out; a
 * frontend left without backends then rejects every entry, as its
 * contract says. The index copies what it needs and borrows nothing.
 * Returns 0, -EINVAL for a bad family, or -ENOMEM. */
int conntrack_index_new(uint8_t family, const struct ct_frontend *frontends, size_t n,
                        struct conntrack_index **ret) {
        _cleanup_(conntrack_index_freep) struct conntrack_index *x = NULL;
        size_t n_backends = 0;

        if (family != 4 && family != 6)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                n_backends += frontends[i].n_backends;

        x = calloc(1, sizeof *x);
        if (!x)
                return -ENOMEM;
        x->family = family;
        /* +1: calloc(0) may return NULL, which would read as out of memory. */
        x->frontends = calloc(n + 1, sizeof *x->frontends);
        x->pairs = calloc(n_backends + 1, sizeof *x->pairs);
        if (!x->frontends || !x->pairs)
                return -ENOMEM;

        for (size_t i = 0; i < n; i++) {
                const struct ct_frontend *f = &frontends[i];
                struct fe_key *k = &x->frontends[x->n_frontends];

                if (!f->node_port && f->ip.family != family)
                        continue;
                fe_key_make(k, f->node_port ? KEY_NODE_PORT : f->any_port ? KEY_ADDR : KEY_IP, &f->ip, f->port);
                x->n_frontends++;
                x->has_node_ports |= !!f->node_port;
                for (size_t j = 0; j < f->n_backends; j++) {
                        const struct ct_backend *be = &f->backends[j];
                        if (be->ip.family != family)
                                continue;
                        pair_key_make(&x->pairs[x->n_pairs++], k, &be->ip, be->port);
                }
        }
        x->n_frontends = sort_unique(x->frontends, x->n_frontends, sizeof *x->frontends, cmp_fe_key);
        x->n_pairs = sort_unique(x->pairs, x->n_pairs, sizeof *x->pairs, cmp_pair_key);

        *ret = TAKE_PTR(x);
        return 0;
}

/* True if the entry (orig dst -> reply src, ports in host order) goes to a
 * frontend of the index but not to one of its backends. An IP:port frontend
 * takes precedence over a NodePort with the same port, as in the data path
 * (KUBE-SERVICES matches service IPs before it jumps to KUBE-NODEPORTS), so
 * a flow to a cluster IP whose port happens to equal some node port is
 * judged by its own service only. A NodePort matches any destination
 * address, like upstream's --orig-port-dst filter: an un-NAT-ed flow that
 * merely goes to that port elsewhere (node to a remote server) is judged,
 * and deleted, too. */
bool conntrack_index_is_stale(const struct conntrack_index *x, const struct inet_addr *orig_dst,
                              uint16_t orig_dport, const struct inet_addr *reply_src, uint16_t reply_sport) {
        struct fe_key fe;
        struct pair_key pair;

        if (orig_dst->family != x->family)
                return false;
        fe_key_make(&fe, KEY_IP, orig_dst, orig_dport);
        if (!bsearch(&fe, x->frontends, x->n_frontends, sizeof fe, cmp_fe_key)) {
                if (!x->has_node_ports)
                        return false;
                fe_key_make(&fe, KEY_NODE_PORT, NULL, orig_dport);
                if (!bsearch(&fe, x->frontends, x->n_frontends, sizeof fe, cmp_fe_key))
                        return false;
        }
        if (reply_src->family != x->family)
                return true;
        pair_key_make(&pair, &fe, reply_src, reply_sport);
        return !bsearch(&pair, x->pairs, x->n_pairs, sizeof pair, cmp_pair_key);
}

/* True if a is one of the index's address-only frontends. */
bool conntrack_index_has_addr(const struct conntrack_index *x, const struct inet_addr *a) {
        struct fe_key fe;

        if (a->family != x->family)
                return false;
        fe_key_make(&fe, KEY_ADDR, a, 0);
        return bsearch(&fe, x->frontends, x->n_frontends, sizeof fe, cmp_fe_key) != NULL;
}

/* Reads one direction's address out of a dumped entry. Returns false if the
 * kernel did not send it (then the entry is left alone). */
static bool ct_get_addr(const struct nf_conntrack *ct, uint8_t family, enum nf_conntrack_attr a4,
                        enum nf_conntrack_attr a6, struct inet_addr *ret) {
        enum nf_conntrack_attr attr = family == 4 ? a4 : a6;
        const void *p;

        if (!nfct_attr_is_set(ct, attr))
                return false;
        p = nfct_get_attr(ct, attr);
        if (!p)
                return false;
        *ret = (struct inet_addr) {.family = family};
        memcpy(ret->bytes, p, family == 4 ? 4 : 16);
        return true;
}

enum flush_kind {
        FLUSH_STALE_UDP,                /* conntrack_reconcile_udp() */
        FLUSH_DNAT,                     /* conntrack_flush_dnat() */
        FLUSH_UNNATTED,                 /* conntrack_flush_unnatted() */
};

struct dump_ctx {
        const struct conntrack_index *index;
        enum flush_kind kind;
        struct nf_conntrack **stale;    /* owned; stolen from the dump */
        size_t n_stale, cap_stale;
        size_t n_seen;
        int r;
};

static bool is_dnat(const struct nf_conntrack *ct) {
        return nfct_attr_is_set(ct, ATTR_STATUS) && (nfct_get_attr_u32(ct, ATTR_STATUS) & IPS_DST_NAT);
}

/* conntrack_flush_unnatted()'s test: not DNAT-ed, from or to an address. */
static bool is_unnatted_match(const struct dump_ctx *c, const struct nf_conntrack *ct) {
        struct inet_addr a;
        uint8_t family = c->index->family;

        if (is_dnat(ct))
                return false;
        return (ct_get_addr(ct, family, ATTR_ORIG_IPV4_SRC, ATTR_ORIG_IPV6_SRC, &a) &&
                conntrack_index_has_addr(c->index, &a)) ||
               (ct_get_addr(ct, family, ATTR_ORIG_IPV4_DST, ATTR_ORIG_IPV6_DST, &a) &&
                conntrack_index_has_addr(c->index, &a));
}

/* The other two: an entry to a frontend that is not DNAT-ed to one of its
 * backends (DNAT-ed ones only, of any protocol; or UDP ones, NAT-ed or not). */
static bool is_stale_match(struct dump_ctx *c, const struct nf_conntrack *ct) {
        struct inet_addr dst, src;
        uint16_t dport, sport;

        if (c->kind == FLUSH_DNAT ? !is_dnat(ct) : nfct_get_attr_u8(ct, ATTR_L4PROTO) != IPPROTO_UDP)
                return false;
        c->n_seen++;
        if (!nfct_attr_is_set(ct, ATTR_ORIG_PORT_DST) || !nfct_attr_is_set(ct, ATTR_REPL_PORT_SRC))
                return false;
        if (!ct_get_addr(ct, c->index->family, ATTR_ORIG_IPV4_DST, ATTR_ORIG_IPV6_DST, &dst) ||
            !ct_get_addr(ct, c->index->family, ATTR_REPL_IPV4_SRC, ATTR_REPL_IPV6_SRC, &src))
                return false;
        /* libnetfilter_conntrack keeps ports as on the wire. */
        dport = ntohs(nfct_get_attr_u16(ct, ATTR_ORIG_PORT_DST));
        sport = ntohs(nfct_get_attr_u16(ct, ATTR_REPL_PORT_SRC));
        return conntrack_index_is_stale(c->index, &dst, dport, &src, sport);
}

static int dump_cb(enum nf_conntrack_msg_type type, struct nf_conntrack *ct, void *userdata) {
        struct dump_ctx *c = userdata;

        (void) type;
        if (!nfct_attr_is_set(ct, ATTR_L4PROTO))
                return NFCT_CB_CONTINUE;
        if (c->kind == FLUSH_UNNATTED) {
                c->n_seen++;
                if (!is_unnatted_match(c, ct))
                        return NFCT_CB_CONTINUE;
        } else if (!is_stale_match(c, ct)) {
                return NFCT_CB_CONTINUE;
        }

        if (c->n_stale == c->cap_stale) {
                size_t cap = c->cap_stale ? c->cap_stale * 2 : 16;
                struct nf_conntrack **v = reallocarray(c->stale, cap, sizeof *v);
                if (!v) {
                        c->r = -ENOMEM;
                        return NFCT_CB_FAILURE;
                }
                c->stale = v;
                c->cap_stale = cap;
        }
        /* Keep the dumped object itself: it carries the zone, without
         * which the kernel would look for the tuple in zone 0. (It does not
         * pin the entry: libnetfilter_conntrack 1.0.9 sends no CTA_ID on
         * delete, so an entry recreated with the same tuple between dump and
         * delete, a window of milliseconds, is deleted too and rebuilt by
         * its next packet.) */
        c->stale[c->n_stale++] = ct;
        return NFCT_CB_STOLEN;
}

static void dump_ctx_done(struct dump_ctx *c) {
        for (size_t i = 0; i < c->n_stale; i++)
                nfct_destroy(c->stale[i]);
        free(c->stale);
}

static void nfct_closep(struct nfct_handle **h) {
        if (*h)
                nfct_close(*h);
}

static void log_entry(const struct nf_conntrack *ct, uint8_t family, const char *what, const char *kind, int r) {
        struct inet_addr src = {0}, dst = {0}, rsrc = {0};
        char s[INET_ADDR_STRLEN], d[INET_ADDR_STRLEN], rs[INET_ADDR_STRLEN];

        (void) ct_get_addr(ct, family, ATTR_ORIG_IPV4_SRC, ATTR_ORIG_IPV6_SRC, &src);
        (void) ct_get_addr(ct, family, ATTR_ORIG_IPV4_DST, ATTR_ORIG_IPV6_DST, &dst);
        (void) ct_get_addr(ct, family, ATTR_REPL_IPV4_SRC, ATTR_REPL_IPV6_SRC, &rsrc);
        src.family = dst.family = rsrc.family = family;
        log_v(4, "%s %s conntrack entry %s:%u -> %s:%u, reply from %s:%u%s%s", what, kind,
              inet_addr_format(&src, s), ntohs(nfct_get_attr_u16(ct, ATTR_ORIG_PORT_SRC)),
              inet_addr_format(&dst, d), ntohs(nfct_get_attr_u16(ct, ATTR_ORIG_PORT_DST)),
              inet_addr_format(&rsrc, rs), ntohs(nfct_get_attr_u16(ct, ATTR_REPL_PORT_SRC)),
              r < 0 ? ": " : "", r < 0 ? strerror(-r) : "");
}

static int reconcile(uint8_t family, const struct ct_frontend *frontends, size_t n, enum flush_kind kind) {
        _cleanup_(conntrack_index_freep) struct conntrack_index *index = NULL;
        _cleanup_(nfct_closep) struct nfct_handle *h = NULL;
        _cleanup_(dump_ctx_done) struct dump_ctx c = {0};
        uint32_t af = family == 6 ? AF_INET6 : AF_INET;
        const char *kind_name = kind == FLUSH_DNAT ? "DNAT-ed service" :
                                kind == FLUSH_UNNATTED ? "un-NAT-ed" : "stale UDP";
        int deleted = 0, failed = 0;
        int r;

        r = conntrack_index_new(family, frontends, n, &index);
        if (r < 0)
                return r;
        /* Nothing can match: spare the kernel a dump of the whole table. */
        if (index->n_frontends == 0)
                return 0;

        h = nfct_open(CONNTRACK, 0);
        if (!h)
                return -errno;
        c.index = index;
        c.kind = kind;
        if (nfct_callback_register(h, NFCT_T_ALL, dump_cb, &c) < 0)
                return -errno;
        /* The kernel filters the dump by the family in the request header. */
        if (nfct_query(h, NFCT_Q_DUMP, &af) < 0)
                return c.r < 0 ? c.r : -errno;
        nfct_callback_unregister(h);

        r = 0;
        for (size_t i = 0; i < c.n_stale; i++) {
                int q = nfct_query(h, NFCT_Q_DESTROY, c.stale[i]) < 0 ? -errno : 0;

                if (q == -ENOENT) {
                        /* It expired (or was replaced) since the dump: what we wanted. */
                        log_entry(c.stale[i], family, "Already gone:", kind_name, 0);
                        continue;
                }
                if (q < 0) {
                        failed++;
                        if (r == 0)
                                r = q;
                        log_entry(c.stale[i], family, "Failed to delete", kind_name, q);
                        continue;
                }
                deleted++;
                log_entry(c.stale[i], family, "Deleted", kind_name, 0);
        }
        /* The caller logs the count at verbosity 2; this adds the detail. */
        if (deleted > 0 || failed > 0)
                log_v(4, "Deleted %d %s conntrack entries, %d failed (IPv%u: %zu entries, %zu frontends)", deleted,
                      kind_name, failed, family, c.n_seen, index->n_frontends);
        /* A failed delete is returned so the caller retries on the next
         * sync; the deletions that worked are logged above. */
        return r < 0 ? r : deleted;
}

int conntrack_reconcile_udp(uint8_t family, const struct ct_frontend *frontends, size_t n) {
        return reconcile(family, frontends, n, FLUSH_STALE_UDP);
}

int conntrack_flush_dnat(uint8_t family, const struct ct_frontend *frontends, size_t n) {
        return reconcile(family, frontends, n, FLUSH_DNAT);
}

int conntrack_flush_unnatted(uint8_t family, const struct inet_addr *addrs, size_t n) {
        _cleanup_free_ struct ct_frontend *fe = calloc(n + 1, sizeof *fe);

        if (!fe)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                fe[i] = (struct ct_frontend) {.ip = addrs[i], .any_port = 1};
        return reconcile(family, fe, n, FLUSH_UNNATTED);
}
