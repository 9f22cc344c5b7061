/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the nftables sync: the kernel's table is a function of the
 * model, and kproxy remembers, per service, just enough of what it last
 * put there (chain names with a digest of their rules, affinity sets with
 * their timeouts, map element keys with a digest of their values) to send
 * only the difference. A service is rendered into scratch buffers (the
 * same nftir description `kproxy render` prints), compared with its record
 * and the changed pieces are copied into the transaction (a full sync
 * with nothing to compare encodes them in the batch directly).
 *
 * Order inside a transaction is what keeps the kernel's reference checks
 * happy (the packet path only ever sees the committed result):
 *
 *   per service: flush its changed and stale chains, delete its changed
 *                and stale affinity sets, add sets, add new chains, write
 *                the rules of new and changed chains
 *   then:        delete map elements (every service), add map elements,
 *                delete the stale chains (flushed above, so unreferenced)
 *
 * Deleting an element and its target chain in one transaction is safe
 * because kproxy never points at a chain from an anonymous set (upstream's
 * per-service numgen maps), whose release the kernel defers.
 *
 * Map keys belong to the first service that claims them; a second claimant
 * (two services with one external IP and port) is skipped with a warning,
 * and gets the key when its owner lets go of it.
 *
 * A full sync (a restart, or after someone else changed the table) has no
 * records to go by: it reads each service's chains back from the kernel
 * (apply/nftables.h: digests of their rules in a form the bytes kproxy
 * sends share, and of a base chain's hook) and leaves alone those that
 * already hold what it would write. The hourly one trusts the records
 * when nobody else changed the table, and diffs every service against
 * them instead; a service rendered exactly as recorded needs no diff.
 *
 * With shards (render/nftir.h) each table has its own records, and the
 * tables' messages share the family's transactions (struct nftsync).
 */
#include "proxy/nftsync.h"

#include <assert.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apply/nftables.h"
#include "model/model.h"
#include "render/chain.h"
#include "render/nftir.h"
#include "render/nftmsg.h"
#include "render/render.h"
#include "util/cleanup.h"
#include "util/hmap.h"
#include "util/log.h"
#include "util/strb.h"

#define DEFAULT_CHUNK 25000
/* Element ids (elem_id()): a set's code and its key. */
#define ELEM_ID_MAX (64 + 2 * NFTMSG_KEY_MAX)

/* What one service put in the kernel, in one allocation: the struct,
 * its chains' digests (rec_hashes()), its sets' timeouts
 * (rec_timeouts()), the names of its chains then sets (names_len bytes,
 * each coded against the one before it: name_pack()), its elements'
 * value digests (rec_values()), then its key and its elements' ids, each
 * after 4 bytes that say how far it is from the record's start
 * (rec_of_id(): a table's owners map keeps only the id). 50k services ×
 * 10 endpoints hold 600k chain names. */
struct rec {
        char *key;
        uint32_t n_chains, n_sets, n_elems, names_len;
};

static uint64_t *rec_hashes(const struct rec *r) {
        return (uint64_t *) (r + 1);
}

static uint32_t *rec_timeouts(const struct rec *r) {
        return (uint32_t *) (rec_hashes(r) + r->n_chains);
}

static const char *rec_names_coded(const struct rec *r) {
        return (const char *) (rec_timeouts(r) + r->n_sets);
}

#define ALIGN8(x) (((x) + 7) & ~(size_t) 7)

static uint64_t *rec_values(const struct rec *r) {
        size_t off = ALIGN8(sizeof *r + r->n_chains * sizeof(uint64_t) + r->n_sets * sizeof(uint32_t) +
                            r->names_len);
        return (uint64_t *) (void *) ((char *) r + off);
}

/* The id of the record's first element (NULL without a record or
 * elements), and of the next after id. */
static const char *rec_first_id(const struct rec *r) {
        return r && r->n_elems ? r->key + strlen(r->key) + 1 + sizeof(uint32_t) : NULL;
}

static const char *rec_next_id(const char *id) {
        return id + strlen(id) + 1 + sizeof(uint32_t);
}

/* The record that holds the id. */
static struct rec *rec_of_id(const char *id) {
        uint32_t back;
        memcpy(&back, id - sizeof back, sizeof back);
        return (struct rec *) (void *) (id - back);
}

#define NAME_MAX_LEN 256        /* NFT_NAME_MAXLEN, NUL included */
#define NAME_REST_MAX (2 * NAME_MAX_LEN)

/* Reads a record's names in order. */
struct name_it {
        const char *p;                  /* the next coded name */
        const char *prefix;             /* the current name's, NULL: kept whole (in rest) */
        const char *hash;               /* its 8 characters when kept, else NULL (derived) */
        size_t len;                     /* of rest */
        char rest[NAME_REST_MAX];
};

struct waiter {
        char *svc;
        char id[];
};

struct tsync {
        uint8_t family;
        uint16_t table;                 /* render/nftir.h's index */
        char tname[NFTIR_TABLE_NAME_MAX];
        struct nftables *nl;
        struct hmap recs;               /* service key -> struct rec */
        struct hmap owners;             /* element ids of the records (rec_of_id(): whose) */
        struct hmap waiting;            /* element id -> struct waiter: a service refused it */
        struct nftsync *g;              /* the family's tables: the transactions are theirs */
};

/* The family's tables, and the transaction they fill together: every
 * commit costs the kernel a walk over every chain of the network
 * namespace (nf_tables_commit makes each chain's next rule generation
 * current: 12 ms at 200k empty chains, measured), so the tables' pieces
 * go out in as few transactions as the size bound allows, not one or
 * more per table. */
struct nftsync {
        uint8_t family;
        struct nftables *nl;
        void (*after_commit)(void *);
        void *after_commit_ud;
        size_t chunk;
        size_t n;                               /* 1 + the shard count of the render parameters */
        struct tsync *t[NFTIR_TABLES_MAX + 1];  /* by table index: 0, then the shards */
        struct nftmsg pend;                     /* a batch begin and the queued messages */
        bool pend_tables[NFTIR_TABLES_MAX + 1]; /* whose messages are in it (for the log) */
        struct nftmsg ids;                      /* only its counter: set ids unique in a transaction */
        uint32_t seq;
        const struct svc **svcs;                /* a full sync's: the model's services in key order */
        uint8_t *shards;                        /* and the shard of each (render_nft_shard()) */
        bool *main_same;                        /* a resync's with shards: struct side */
        size_t n_svcs;
};

/* One service (or the fixed part) rendered into scratch messages. */
struct unit_chain {
        char *name;
        uint64_t hash;
        size_t chain_off, chain_len;    /* its NEWCHAIN in u->chains */
        size_t rules_off, rules_len;    /* its rules (and their anonymous sets) in u->rules */
};

struct unit_set {
        char *name;
        uint32_t timeout;
        size_t off, len;
};

struct unit_elem {
        char id[ELEM_ID_MAX];
        uint64_t value;
        size_t off, len;
};

struct unit {
        uint16_t table;                 /* the objects kept; the others' are dropped */
        struct nftmsg sets, chains, rules, elems;
        struct unit_chain *ch;
        size_t n_ch, cap_ch;
        struct unit_set *st;
        size_t n_st, cap_st;
        struct unit_elem *el;
        size_t n_el, cap_el;
        /* Set: chains and elements the same as its own in the same place
         * are not encoded (their lengths 0), and unencoded says so; a
         * resync needs no bytes for a service that did not change. */
        const struct rec *like;
        struct name_it like_names;      /* like's, at the last chain rendered */
        const char *like_id;            /* like's id of the next element rendered, or NULL */
        bool unencoded;
        /* A resync's units may be rendered with like and unhashed names
         * (nftir_sink.unhashed: no SHA-256 per chain name): nothing is
         * encoded then, and a service that differs from like is rendered
         * again, whole. */
        bool unhashed_ok, unhashed;
        /* Set (a full sync with nothing to read back: a cold start or a
         * rebuild): sets, chains and rules are encoded straight into it,
         * the family's batch, in the renderer's order (each object after
         * those it refers to), and none of their bytes stay in the unit. */
        struct nftmsg *direct;
        /* The names of ch and st: chunks that never move (pointers into
         * them stay valid), reused from one service to the next. */
        struct name_chunk *names;
};

struct name_chunk {
        struct name_chunk *next;
        size_t used;
        char b[16384 - 2 * sizeof(size_t)];
};

/* --- records --- */

/* A copy of s at *end, in a record's storage (record_of() counted room
 * for it); *end moves past it. */
static char *rec_str(char **end, const char *s) {
        size_t len = strlen(s) + 1;
        char *p = memcpy(*end, s, len);
        *end += len;
        return p;
}

static struct rec *rec_free(struct rec *r) {
        free(r);
        return NULL;
}

static void *xcalloc(size_t n, size_t size) {
        void *p = calloc(n ? n : 1, size);
        if (!p)
                abort();        /* as buf: a node proxy short of a few kB cannot go on */
        return p;
}

static char *xstrdup(const char *s) {
        char *p = strdup(s);
        if (!p)
                abort();
        return p;
}

static void grow(void **p, size_t *cap, size_t n, size_t size) {
        if (n < *cap)
                return;
        *cap = *cap ? *cap * 2 : 16;
        void *q = realloc(*p, *cap * size);
        if (!q)
                abort();
        *p = q;
}

/* Records keep a service's chain and set names without what they repeat.
 * "<prefix><8 characters>-<key><rest>" is kept as a code for the prefix
 * and the rest: the 8 characters are the renderer's hash of "<key><rest>"
 * (render/nft.c, upstream's hashAndTruncate()), derived again when the
 * name is needed whole; a name cut short (240 characters and "...")
 * keeps them. Other names are kept whole, as their rest. And a rest is
 * kept as the lengths of what its start and its end share with the rest
 * before it, then what is between: a service's endpoint chains differ from
 * one another in a few characters of an address. Each name is
 *
 *   [code][shared start][shared end][8 characters if kept][between]\0
 *
 * code 0: kept whole; 1 + k: prefix k, hash derived; 1 + NAME_PREFIXES
 * + k: prefix k, hash kept. Together they were two thirds of the records'
 * memory at 10k services × 10 endpoints. */
static const char *const name_prefixes[] = {"service-", "local-", "external-", "firewall-", "endpoint-",
                                            "affinity-"};
#define NAME_PREFIXES (sizeof name_prefixes / sizeof *name_prefixes)
#define NAME_BODY_CUT 240       /* the renderer's bodies: this long when cut */
#define NAME_CODES (2 * NAME_PREFIXES)

/* The renderer's 8 characters for key and rest, in out[9]. */
static void name_hash(const char *key, const char *rest, char out[9]) {
        char base[NAME_MAX_LEN];
        struct strb b = strb_init(base, sizeof base);
        strb_puts(&b, key);
        strb_puts(&b, rest);
        chain_hash_str(base, 8, out);
}

/* Splits name (key: the record's) into its code, its 8 characters when
 * kept (*ret_hash, else NULL) and its rest (*ret_rest, in name). */
static unsigned name_split(const char *key, const char *name, const char **ret_hash, const char **ret_rest) {
        size_t kl = strlen(key), n = strlen(name);
        *ret_hash = NULL;
        *ret_rest = name;
        for (size_t k = 0; k < NAME_PREFIXES && n < NAME_MAX_LEN; k++) {
                size_t pl = strlen(name_prefixes[k]);
                const char *h = name + pl;
                if (strncmp(name, name_prefixes[k], pl) != 0 || strnlen(h, 9) < 9 || h[8] != '-' ||
                    strncmp(h + 9, key, kl) != 0)
                        continue;
                *ret_rest = h + 9 + kl;
                if (n - pl < NAME_BODY_CUT) {
#ifdef __SANITIZE_ADDRESS__
                        /* The sanitizer build of the tests checks that the hash is
                         * the derived one; elsewhere the SHA-256 per name would
                         * add 10% to kproxy's CPU in a cold full sync (measured). */
                        char want[9];
                        name_hash(key, *ret_rest, want);
                        assert(memcmp(h, want, 8) == 0);
#endif
                        return (unsigned) (1 + k);
                }
                *ret_hash = h;
                return (unsigned) (1 + NAME_PREFIXES + k);
        }
        return 0;
}

/* The coded form of name after a name whose rest was prev ("" for the
 * first), at out; returns its size, NUL included.
 * *ret_rest: name's rest, the next name's prev. */
static size_t name_pack(const char *key, const char *name, const char *prev, char *out, const char **ret_rest) {
        const char *hash, *rest;
        unsigned code = name_split(key, name, &hash, &rest);
        size_t rl = strlen(rest), pl = strlen(prev), shared = 0, suffix = 0;
        while (shared < 255 && rest[shared] && rest[shared] == prev[shared])
                shared++;
        while (suffix < 255 && suffix < rl - shared && suffix < pl - shared &&
               rest[rl - 1 - suffix] == prev[pl - 1 - suffix])
                suffix++;
        size_t middle = rl - shared - suffix, size = 3 + (hash ? 8 : 0) + middle + 1;
        *ret_rest = rest;
        assert(rl < NAME_REST_MAX);
        out[0] = (char) code;
        out[1] = (char) shared;
        out[2] = (char) suffix;
        if (hash)
                memcpy(out + 3, hash, 8);
        memcpy(out + size - middle - 1, rest + shared, middle);
        out[size - 1] = '\0';
        return size;
}

static void name_it_init(struct name_it *it, const struct rec *r) {
        it->p = rec_names_coded(r);
        it->prefix = it->hash = NULL;
        it->rest[0] = '\0';
        it->len = 0;
}

/* Moves to the next name (the first after name_it_init()). */
static void name_next(struct name_it *it) {
        unsigned code = (unsigned char) it->p[0];
        size_t shared = (unsigned char) it->p[1], suffix = (unsigned char) it->p[2];
        const char *q = it->p + 3;
        it->prefix = it->hash = NULL;
        if (code >= 1 && code <= NAME_PREFIXES) {
                it->prefix = name_prefixes[code - 1];
        } else if (code > NAME_PREFIXES && code <= NAME_CODES) {
                it->prefix = name_prefixes[code - 1 - NAME_PREFIXES];
                it->hash = q;
                q += 8;
        }
        size_t middle = strlen(q);
        it->p = q + middle + 1;
        /* name_pack() never codes more than the name before has, nor a
         * longer name than the buffer holds; the bounds keep a bad record
         * in the buffer. */
        if (shared > it->len)
                shared = it->len;
        if (suffix > it->len - shared)
                suffix = it->len - shared;
        if (shared + suffix + middle >= sizeof it->rest)
                middle = sizeof it->rest - 1 - shared - suffix;
        /* The shared end first: the middle may be written over it. */
        memmove(it->rest + shared + middle, it->rest + it->len - suffix, suffix);
        memcpy(it->rest + shared, q, middle);
        it->len = shared + middle + suffix;
        it->rest[it->len] = '\0';
}

/* The length of the current name, whole. */
static size_t name_len(const struct name_it *it, const char *key) {
        if (!it->prefix)
                return strlen(it->rest);
        return strlen(it->prefix) + 9 + strlen(key) + strlen(it->rest);
}

/* The current name, whole, in out (size bytes: name_len() + 1 suffice).
 * Returns out. */
static const char *name_unpack(const struct name_it *it, const char *key, char *out, size_t size) {
        struct strb b = strb_init(out, size);
        char h[9];
        if (!it->prefix) {
                strb_puts(&b, it->rest);
                return out;
        }
        const char *hash = it->hash;
        if (!hash) {
                name_hash(key, it->rest, h);
                hash = h;
        }
        strb_puts(&b, it->prefix);
        strb_putn(&b, hash, 8);
        strb_putn(&b, "-", 1);
        strb_puts(&b, key);
        strb_puts(&b, it->rest);
        return out;
}

/* Whether the current name is name, without making it whole. name is the
 * renderer's: when its prefix, key and rest are the current name's, so is
 * its hash (derived from them), which is then not compared. */
static bool name_equal(const struct name_it *it, const char *key, const char *name) {
        if (!it->prefix)
                return strcmp(it->rest, name) == 0;
        size_t pl = strlen(it->prefix), kl = strlen(key);
        return strncmp(name, it->prefix, pl) == 0 && strnlen(name + pl, 9) == 9 &&
               (!it->hash || memcmp(name + pl, it->hash, 8) == 0) && name[pl + 8] == '-' &&
               strncmp(name + pl + 9, key, kl) == 0 && strcmp(name + pl + 9 + kl, it->rest) == 0;
}

/* A record's names, whole, in one allocation (free() it): chains first,
 * then sets. */
static char **rec_names(const struct rec *r) {
        size_t n = r->n_chains + r->n_sets, bytes = 0;
        struct name_it it;
        name_it_init(&it, r);
        for (size_t i = 0; i < n; i++) {
                name_next(&it);
                bytes += name_len(&it, r->key) + 1;
        }
        char **v = xcalloc(1, (n + 1) * sizeof *v + bytes);
        char *p = (char *) (v + n + 1), *end = p + bytes;
        name_it_init(&it, r);
        for (size_t i = 0; i < n; i++) {
                name_next(&it);
                v[i] = p;
                p += strlen(name_unpack(&it, r->key, p, (size_t) (end - p))) + 1;
        }
        return v;
}

static void drop_records(struct tsync *s) {
        const char *k;
        void *v;
        for (size_t i = 0; hmap_next(&s->recs, &i, &k, &v);)
                rec_free(v);
        hmap_done(&s->recs);
        hmap_done(&s->owners);
        for (size_t i = 0; hmap_next(&s->waiting, &i, &k, &v);) {
                free(((struct waiter *) v)->svc);
                free(v);
        }
        hmap_done(&s->waiting);
}

static int tsync_new(struct nftsync *g, unsigned table, struct tsync **ret) {
        struct tsync *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->family = g->family;
        s->table = (uint16_t) table;
        char name[NFTIR_TABLE_NAME_MAX];
        snprintf(s->tname, sizeof s->tname, "%s", nftir_table_name(table, name));
        s->nl = g->nl;
        s->g = g;
        s->recs = (struct hmap) HMAP_INIT_KEYED(struct rec, key);
        s->owners = (struct hmap) HMAP_INIT_STRINGS;
        *ret = s;
        return 0;
}

static struct tsync *tsync_free(struct tsync *s) {
        if (!s)
                return NULL;
        drop_records(s);
        free(s);
        return NULL;
}

/* --- units: the collecting sink --- */

static void unit_init(struct unit *u, const struct tsync *s, struct nftmsg *ids) {
        memset(u, 0, sizeof *u);
        u->table = s->table;
        nftmsg_init(&u->sets, s->family, 0);
        nftmsg_init(&u->chains, s->family, 0);
        nftmsg_init(&u->rules, s->family, 0);
        nftmsg_init(&u->elems, s->family, 0);
        /* Set ids are numbered in the transaction's count. */
        nftmsg_share_set_ids(&u->sets, ids);
        nftmsg_share_set_ids(&u->rules, ids);
}

/* A copy of name in u's chunks (a chain or set name: under 256 bytes). */
static char *unit_name(struct unit *u, const struct nftir_name *n) {
        struct name_chunk *c = u->names;
        if (!c || c->used + NAME_MAX_LEN > sizeof c->b) {
                c = xcalloc(1, sizeof *c);
                c->next = u->names;
                u->names = c;
        }
        char *p = c->b + c->used;
        c->used += strlen(nftir_name_join(n, p, NAME_MAX_LEN)) + 1;
        return p;
}

static void unit_reset(struct unit *u) {
        /* Keep the newest chunk, empty: a service's names fit in one. */
        struct name_chunk *c = u->names ? u->names->next : NULL;
        while (c) {
                struct name_chunk *next = c->next;
                free(c);
                c = next;
        }
        if (u->names) {
                u->names->next = NULL;
                u->names->used = 0;
        }
        u->n_ch = u->n_st = u->n_el = 0;
        u->unhashed = false;
        nftmsg_clear(&u->sets);
        nftmsg_clear(&u->chains);
        nftmsg_clear(&u->rules);
        nftmsg_clear(&u->elems);
}

static void unit_done(struct unit *u) {
        unit_reset(u);
        free(u->names);
        free(u->ch);
        free(u->st);
        free(u->el);
        nftmsg_done(&u->sets);
        nftmsg_done(&u->chains);
        nftmsg_done(&u->rules);
        nftmsg_done(&u->elems);
}

static void u_table(void *ud, unsigned idx) {
        (void) ud;      /* the transaction adds the table itself */
        (void) idx;
}

static void u_set(void *ud, const struct nftir_set *set) {
        struct unit *u = ud;
        if (set->table != u->table)
                return;
        grow((void **) &u->st, &u->cap_st, u->n_st, sizeof *u->st);
        struct unit_set *x = &u->st[u->n_st++];
        x->name = unit_name(u, &set->name);
        x->timeout = set->timeout;
        if (u->direct) {
                nftmsg_set(u->direct, set);
                x->off = x->len = 0;
                return;
        }
        if (u->unhashed) {
                x->off = x->len = 0;
                u->unencoded = true;
                return;
        }
        x->off = u->sets.b.len;
        nftmsg_set(&u->sets, set);
        x->len = u->sets.b.len - x->off;
}

static void u_chain(void *ud, const struct nftir_chain *c) {
        struct unit *u = ud;
        if (c->table != u->table)
                return;
        grow((void **) &u->ch, &u->cap_ch, u->n_ch, sizeof *u->ch);
        struct unit_chain *x = &u->ch[u->n_ch++];
        x->name = unit_name(u, &c->name);
        x->hash = nftir_chain_hash(c);
        const struct rec *o = u->like;
        size_t i = u->n_ch - 1;
        if (o && i < o->n_chains)
                name_next(&u->like_names);
        if (o && i < o->n_chains && rec_hashes(o)[i] == x->hash && name_equal(&u->like_names, o->key, x->name)) {
                x->chain_off = x->chain_len = x->rules_off = x->rules_len = 0;
                u->unencoded = true;
                return;
        }
        if (u->unhashed) {
                x->chain_off = x->chain_len = x->rules_off = x->rules_len = 0;
                u->unencoded = true;
                return;
        }
        if (u->direct) {
                nftmsg_chain(u->direct, c);
                nftmsg_rules(u->direct, c);
                x->chain_off = x->chain_len = x->rules_off = x->rules_len = 0;
                return;
        }
        x->chain_off = u->chains.b.len;
        nftmsg_chain(&u->chains, c);
        x->chain_len = u->chains.b.len - x->chain_off;
        x->rules_off = u->rules.b.len;
        nftmsg_rules(&u->rules, c);
        x->rules_len = u->rules.b.len - x->rules_off;
}

/* An element is known by an id, a string: its set, as a byte for the
 * renderer's sets or else "<name>/", then its key's bytes six bits a
 * character. 100k of them at 50k services, in the records and their
 * owners' maps: "service-ips" and a 12-byte key in 17 characters, not 36
 * in hex. */
static const char *const elem_sets[] = {"cluster-ips", "service-ips", "service-nodeports", "no-endpoint-services",
                                        "no-endpoint-nodeports", "firewall-ips", "nodeport-ips"};
#define ELEM_SETS (sizeof elem_sets / sizeof *elem_sets)
_Static_assert(ELEM_SETS < '\n', "a set's code is never a newline (give_released() splits ids at those)");
static const char id_digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+_";

/* The id of key (n bytes) in set, in out[ELEM_ID_MAX]. */
static void elem_id(const char *set, const uint8_t *key, size_t n, char *out) {
        size_t o = 0;
        for (size_t k = 0; k < ELEM_SETS && !o; k++)
                if (strcmp(set, elem_sets[k]) == 0)
                        out[o++] = (char) (1 + k);
        if (!o) {
                size_t len = strnlen(set, 63);
                memcpy(out, set, len);
                out[len] = '/';
                o = len + 1;
        }
        for (size_t bit = 0; bit < 8 * n; bit += 6) {
                unsigned v = 0;
                for (size_t b = bit; b < bit + 6; b++)
                        v = v << 1 | (b < 8 * n ? (key[b / 8] >> (7 - b % 8)) & 1u : 0);
                out[o++] = id_digits[v];
        }
        out[o] = '\0';
}

/* Decodes an element id back into its set and key. */
static int elem_id_parse(const char *id, char *set, size_t set_len, uint8_t *key, size_t *ret_len) {
        const char *digits;
        unsigned c = (unsigned char) id[0];
        if (c >= 1 && c <= ELEM_SETS) {
                snprintf(set, set_len, "%s", elem_sets[c - 1]);
                digits = id + 1;
        } else {
                const char *slash = strchr(id, '/');
                if (!slash || (size_t) (slash - id) >= set_len)
                        return -EINVAL;
                memcpy(set, id, (size_t) (slash - id));
                set[slash - id] = '\0';
                digits = slash + 1;
        }
        size_t chars = strlen(digits), n = chars * 6 / 8;
        if (n > NFTMSG_KEY_MAX)
                return -EINVAL;
        memset(key, 0, n);
        for (size_t i = 0; i < chars; i++) {
                const char *d = strchr(id_digits, digits[i]);
                if (!d || !*d)
                        return -EINVAL;
                unsigned v = (unsigned) (d - id_digits);
                for (size_t b = 0; b < 6; b++) {
                        size_t bit = i * 6 + b;
                        if (bit < 8 * n && (v >> (5 - b)) & 1u)
                                key[bit / 8] |= (uint8_t) (0x80u >> bit % 8);
                }
        }
        *ret_len = n;
        return 0;
}

/* The id for a log: "<set> <key in hex>", in out (size bytes). */
static const char *elem_id_show(const char *id, char *out, size_t size) {
        char set[64];
        uint8_t key[NFTMSG_KEY_MAX];
        size_t n;
        struct strb b = strb_init(out, size);
        if (elem_id_parse(id, set, sizeof set, key, &n) < 0) {
                strb_puts(&b, "(bad id)");
                return out;
        }
        strb_puts(&b, set);
        strb_putn(&b, " ", 1);
        strb_puthex(&b, key, n);
        return out;
}

static void u_elem(void *ud, const struct nftir_elem *e) {
        struct unit *u = ud;
        uint8_t key[NFTMSG_KEY_MAX];
        if (e->table != u->table)
                return;
        size_t n = nftmsg_elem_key(u->elems.family, e, key);
        grow((void **) &u->el, &u->cap_el, u->n_el, sizeof *u->el);
        struct unit_elem *x = &u->el[u->n_el++];
        elem_id(e->set, key, n, x->id);
        x->value = nftir_elem_value_hash(e);
        /* As chains: the same element in the same place is not encoded. */
        const char *o = u->like_id;
        if (o) {
                size_t i = u->n_el - 1;
                u->like_id = i + 1 < u->like->n_elems ? rec_next_id(o) : NULL;
                if (rec_values(u->like)[i] == x->value && strcmp(o, x->id) == 0) {
                        x->off = x->len = 0;
                        u->unencoded = true;
                        return;
                }
        }
        if (u->unhashed) {
                x->off = x->len = 0;
                u->unencoded = true;
                return;
        }
        x->off = u->elems.b.len;
        nftmsg_elem(&u->elems, e);
        x->len = u->elems.b.len - x->off;
}

static const struct nftir_sink unit_sink_ops = {u_table, u_set, u_chain, u_elem, NULL};

static struct nftir_sink unit_sink(struct unit *u) {
        struct nftir_sink k = unit_sink_ops;
        k.ud = u;
        return k;
}

static void elem_del(struct nftmsg *m, const char *id) {
        char set[64];
        uint8_t key[NFTMSG_KEY_MAX];
        size_t n;
        if (elem_id_parse(id, set, sizeof set, key, &n) == 0)
                nftmsg_elem_del(m, set, key, n);
}

/* --- transactions --- */

/* The sections of one transaction, in commit order. */
struct txn {
        struct nftmsg head;     /* table, fixed sets */
        struct nftmsg body;     /* per service: flushes, sets, chains, rules */
        struct nftmsg del_el, add_el, tail;
};

static void txn_init(struct txn *t, struct tsync *s) {
        nftmsg_init(&t->head, s->family, 0);
        nftmsg_init(&t->body, s->family, 0);
        nftmsg_init(&t->del_el, s->family, 0);
        nftmsg_init(&t->add_el, s->family, 0);
        nftmsg_init(&t->tail, s->family, 0);
        t->head.table = t->body.table = t->del_el.table = t->add_el.table = t->tail.table = s->table;
        nftmsg_share_set_ids(&t->head, &s->g->ids);
        nftmsg_share_set_ids(&t->body, &t->head);
}

static void txn_clear(struct txn *t) {
        nftmsg_clear(&t->head);
        nftmsg_clear(&t->body);
        nftmsg_clear(&t->del_el);
        nftmsg_clear(&t->add_el);
        nftmsg_clear(&t->tail);
}

static void txn_done(struct txn *t) {
        nftmsg_done(&t->head);
        nftmsg_done(&t->body);
        nftmsg_done(&t->del_el);
        nftmsg_done(&t->add_el);
        nftmsg_done(&t->tail);
}

static size_t txn_size(const struct txn *t) {
        return t->head.n + t->body.n + t->del_el.n + t->add_el.n + t->tail.n;
}

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* Transactions of a full sync or a resync: each is validated against the
 * whole table (the kernel re-walks what the base chains reach), so over an
 * existing table of n chains and sets they are cut into about eight, not
 * into chunk-message pieces (about three messages per chain). */
static size_t chunk_for(const struct tsync *s, size_t n) {
        size_t chunk = s->g->chunk;
        return chunk && n * 3 / 8 > chunk ? n * 3 / 8 : chunk;
}

/* Forgets the queued messages; release: and the buffer's memory (a full
 * sync's fills megabytes). */
static void group_reset(struct nftsync *g, bool release) {
        if (release) {
                nftmsg_done(&g->pend);
                nftmsg_init(&g->pend, g->family, g->seq);
                nftmsg_share_set_ids(&g->pend, &g->ids);
        } else {
                nftmsg_clear(&g->pend);
        }
        memset(g->pend_tables, 0, sizeof g->pend_tables);
}

/* Sends the queued messages as one transaction. */
static int group_send(struct nftsync *g, struct nftsync_stats *st) {
        char err[1024], names[256] = "";
        int r;

        if (g->pend.n == 0)
                return 0;
        nftmsg_batch_end(&g->pend);
        g->seq = g->pend.seq;
        double t0 = now_s();
        r = nftables_commit(g->nl, &g->pend, err, sizeof err);
        st->kernel_seconds += now_s() - t0;
        if (r < 0) {
                size_t len = 0;
                for (size_t i = 0; i < g->n && len < sizeof names; i++)
                        if (g->pend_tables[i])
                                len += (size_t) snprintf(names + len, sizeof names - len, "%s%s",
                                                         len ? ", " : "", g->t[i]->tname);
                log_error("IPv%u nftables %s transaction of %zu messages failed: %s", g->family, names,
                          g->pend.n, err);
        }
        st->transactions++;
        st->messages += g->pend.n;
        group_reset(g, false);
        if (g->after_commit)
                g->after_commit(g->after_commit_ud);
        return r;
}

/* Queues t's messages (emptying t) in the family's transaction, which is
 * sent once it holds limit messages or more (0: only by group_send()).
 * A transaction never splits t. */
/* The family's batch, ready for s's messages (a batch begin first). */
static struct nftmsg *pend_for(struct tsync *s) {
        struct nftsync *g = s->g;
        if (g->pend.b.len == 0)
                nftmsg_batch_begin(&g->pend);
        g->pend.table = s->table;
        g->pend_tables[s->table] = true;
        return &g->pend;
}

static int txn_queue(struct tsync *s, struct txn *t, size_t limit, struct nftsync_stats *st) {
        struct nftsync *g = s->g;

        if (txn_size(t) == 0)
                return 0;
        pend_for(s);
        nftmsg_append(&g->pend, &t->head);
        nftmsg_append(&g->pend, &t->body);
        nftmsg_append(&g->pend, &t->del_el);
        nftmsg_append(&g->pend, &t->add_el);
        nftmsg_append(&g->pend, &t->tail);
        txn_clear(t);
        return limit && g->pend.n >= limit ? group_send(g, st) : 0;
}

/* --- element ownership --- */

static void wait_for_key(struct tsync *s, const char *id, const char *svc) {
        if (hmap_get(&s->waiting, id))
                return;
        struct waiter *w = malloc(sizeof *w + strlen(id) + 1);
        if (!w)
                abort();
        strcpy(w->id, id);
        w->svc = xstrdup(svc);
        hmap_put(&s->waiting, w->id, w);
}

/* Claims u's elements for r (their ids go to end: record_of()'s). old:
 * r's previous elements (already let go of in s->owners), NULL on a full
 * sync; an element whose value changed is deleted and added, a new one
 * added (t's del_el and add_el). */
static void claim_elements(struct tsync *s, struct rec *r, char *end, const struct unit *u, struct txn *t,
                           const struct hmap *old, struct nftsync_stats *st) {
        struct hmap seen = HMAP_INIT;
        for (size_t i = 0; i < u->n_el; i++) {
                const struct unit_elem *e = &u->el[i];
                if (hmap_get(&seen, e->id))
                        continue;       /* the same key twice in one service */
                hmap_put(&seen, e->id, (void *) e);
                const char *owned = hmap_get(&s->owners, e->id);
                struct rec *owner = owned ? rec_of_id(owned) : NULL;
                if (owner && owner != r) {
                        st->conflicts++;
                        char show[ELEM_ID_MAX + 64];
                        log_warning("Service %s wants %s, which service %s already has; ignoring it until %s "
                                    "lets go", r->key, elem_id_show(e->id, show, sizeof show), owner->key,
                                    owner->key);
                        wait_for_key(s, e->id, r->key);
                        continue;
                }
                const uint64_t *prev = old ? hmap_get(old, e->id) : NULL;
                if (!prev || *prev != e->value) {
                        if (prev)
                                elem_del(&t->del_el, e->id);
                        nftmsg_append_range(&t->add_el, &u->elems, e->off, e->len);
                        st->elements_added++;
                }
                rec_values(r)[r->n_elems++] = e->value;
                uint32_t back = (uint32_t) (end + sizeof back - (char *) r);
                memcpy(end, &back, sizeof back);
                end += sizeof back;
                char *id = rec_str(&end, e->id);
                hmap_put(&s->owners, id, id);
        }
        hmap_done(&seen);
}

/* --- partial sync --- */

/* The record of what u puts in the kernel; its elements are
 * claim_elements()'s, their ids to go at *ret_end. */
static struct rec *record_of(const char *key, const struct unit *u, char **ret_end) {
        size_t n = u->n_ch + u->n_st, names_len = 0, strings = strlen(key) + 1, bound = 0;
        const char *prev = "";
        /* The names are coded once, here (a coded name is at most 12 bytes
         * longer than the name), and copied into the record below. */
        for (size_t i = 0; i < n; i++)
                bound += strlen(i < u->n_ch ? u->ch[i].name : u->st[i - u->n_ch].name) + 12;
        char small[8192];
        _cleanup_free_ char *big = bound > sizeof small ? xcalloc(1, bound) : NULL;
        char *coded = big ? big : small;
        for (size_t i = 0; i < n; i++)
                names_len += name_pack(key, i < u->n_ch ? u->ch[i].name : u->st[i - u->n_ch].name, prev,
                                       coded + names_len, &prev);
        for (size_t i = 0; i < u->n_el; i++)
                strings += sizeof(uint32_t) + strlen(u->el[i].id) + 1;  /* claim_elements() copies those it keeps */
        size_t elems_off = ALIGN8(sizeof(struct rec) + u->n_ch * sizeof(uint64_t) + u->n_st * sizeof(uint32_t) +
                                  names_len);
        struct rec *r = xcalloc(1, elems_off + u->n_el * sizeof(uint64_t) + strings);
        r->n_chains = (uint32_t) u->n_ch;
        r->n_sets = (uint32_t) u->n_st;
        r->names_len = (uint32_t) names_len;
        for (size_t i = 0; i < u->n_ch; i++)
                rec_hashes(r)[i] = u->ch[i].hash;
        for (size_t i = 0; i < u->n_st; i++)
                rec_timeouts(r)[i] = u->st[i].timeout;
        memcpy((char *) rec_names_coded(r), coded, names_len);
        char *end = (char *) (rec_values(r) + u->n_el);
        r->key = rec_str(&end, key);
        *ret_end = end;
        return r;
}

/* Diffs u (the service's new rendering) against its record old (may be
 * NULL) into t, and returns the new record (NULL when the service puts
 * nothing in the kernel). Element keys old lets go of are appended to
 * released. */
static struct rec *diff_service(struct tsync *s, const char *key, struct rec *old, const struct unit *u,
                                struct txn *t, struct buf *released, struct nftsync_stats *st) {
        struct hmap old_chains = HMAP_INIT, old_sets = HMAP_INIT, old_elems = HMAP_INIT, new_chains = HMAP_INIT,
                    new_sets = HMAP_INIT;
        bool sets_changed = false;
        struct rec *r = NULL;
        /* The old record's names, whole: oc[i] of its chains, os[i] of its sets. */
        char **names = old ? rec_names(old) : NULL, **oc = names, **os = names ? names + old->n_chains : NULL;

        for (size_t i = 0; old && i < old->n_chains; i++)
                hmap_put(&old_chains, oc[i], &rec_hashes(old)[i]);
        for (size_t i = 0; old && i < old->n_sets; i++)
                hmap_put(&old_sets, os[i], &rec_timeouts(old)[i]);
        const char *id = rec_first_id(old);
        for (size_t i = 0; old && i < old->n_elems; i++, id = rec_next_id(id))
                hmap_put(&old_elems, id, &rec_values(old)[i]);
        for (size_t i = 0; i < u->n_ch; i++)
                hmap_put(&new_chains, u->ch[i].name, &u->ch[i]);
        for (size_t i = 0; i < u->n_st; i++)
                hmap_put(&new_sets, u->st[i].name, &u->st[i]);

        /* A set added, gone or changed: every chain of the service is
         * rewritten, so none refers to a set about to change. */
        for (size_t i = 0; i < u->n_st; i++) {
                const uint32_t *o = hmap_get(&old_sets, u->st[i].name);
                sets_changed |= !o || *o != u->st[i].timeout;
        }
        sets_changed |= old && old->n_sets != u->n_st;

        /* 1. flush changed and stale chains */
        for (size_t i = 0; old && i < old->n_chains; i++) {
                const struct unit_chain *n = hmap_get(&new_chains, oc[i]);
                if (!n || n->hash != rec_hashes(old)[i] || sets_changed)
                        nftmsg_chain_flush(&t->body, oc[i]);
        }
        /* 2. delete stale and changed sets; 3. add new and changed ones */
        for (size_t i = 0; old && i < old->n_sets; i++) {
                const struct unit_set *n = hmap_get(&new_sets, os[i]);
                if (!n || n->timeout != rec_timeouts(old)[i])
                        nftmsg_set_del(&t->body, os[i]);
        }
        for (size_t i = 0; i < u->n_st; i++) {
                const uint32_t *o = hmap_get(&old_sets, u->st[i].name);
                if (!o || *o != u->st[i].timeout)
                        nftmsg_append_range(&t->body, &u->sets, u->st[i].off, u->st[i].len);
        }
        /* 4. add new chains; 5. write the rules of new and changed ones */
        for (size_t i = 0; i < u->n_ch; i++)
                if (!hmap_get(&old_chains, u->ch[i].name))
                        nftmsg_append_range(&t->body, &u->chains, u->ch[i].chain_off, u->ch[i].chain_len);
        for (size_t i = 0; i < u->n_ch; i++) {
                const uint64_t *o = hmap_get(&old_chains, u->ch[i].name);
                if (!o || *o != u->ch[i].hash || sets_changed) {
                        nftmsg_append_range(&t->body, &u->rules, u->ch[i].rules_off, u->ch[i].rules_len);
                        st->chains_written++;
                }
        }
        /* Stale chains go after the elements that point at them. */
        for (size_t i = 0; old && i < old->n_chains; i++)
                if (!hmap_get(&new_chains, oc[i])) {
                        nftmsg_chain_del(&t->tail, oc[i]);
                        st->chains_deleted++;
                }

        char *end = NULL;
        if (u->n_ch + u->n_st + u->n_el > 0)
                r = record_of(key, u, &end);

        /* Elements: let go of the old ones, claim the new ones (taking back
         * those kept), then delete what was not taken back. */
        id = rec_first_id(old);
        for (size_t i = 0; old && i < old->n_elems; i++, id = rec_next_id(id))
                hmap_remove(&s->owners, id);
        if (r)
                claim_elements(s, r, end, u, t, &old_elems, st);
        id = rec_first_id(old);
        for (size_t i = 0; old && i < old->n_elems; i++, id = rec_next_id(id)) {
                const char *owned = r ? hmap_get(&s->owners, id) : NULL;
                if (owned && rec_of_id(owned) == r)
                        continue;       /* kept */
                elem_del(&t->del_el, id);
                st->elements_deleted++;
                buf_puts(released, id);
                buf_putc(released, '\n');
        }

        hmap_done(&old_chains);
        hmap_done(&old_sets);
        hmap_done(&old_elems);
        hmap_done(&new_chains);
        hmap_done(&new_sets);
        free(names);
        return r;
}

static void put_record(struct tsync *s, struct rec *r) {
        if (r)
                hmap_put(&s->recs, r->key, r);
}

/* Whether service key has objects in s's table: the main table has every
 * service's filter side, a shard only its own services' nat side (a
 * service's shard does not change while running). */
static bool holds(const struct tsync *s, const struct render_params *p, const char *key) {
        return s->table == 0 || render_nft_shard(key, p->nft_shards) == s->table;
}

/* The same for a full sync's i-th service: a hash per service, not one
 * per service and table. */
static bool holds_at(const struct tsync *s, size_t i) {
        return s->table == 0 || s->g->shards[i] == s->table;
}

static void unit_begin(struct unit *u, const struct rec *like, bool unhashed) {
        unit_reset(u);
        u->unhashed = unhashed;
        u->like = like;
        if (like)
                name_it_init(&u->like_names, like);
        u->like_id = rec_first_id(like);
        u->unencoded = false;
}

/* Two units fed by one render: each keeps its own table's objects. */
static void tee_set(void *ud, const struct nftir_set *x) {
        struct unit **u = ud;
        u_set(u[0], x);
        u_set(u[1], x);
}

static void tee_chain(void *ud, const struct nftir_chain *x) {
        struct unit **u = ud;
        u_chain(u[0], x);
        u_chain(u[1], x);
}

static void tee_elem(void *ud, const struct nftir_elem *x) {
        struct unit **u = ud;
        u_elem(u[0], x);
        u_elem(u[1], x);
}

/* Renders one service's objects in s's table into u (emptied first) and,
 * with side (a main-table unit, when s is a shard), its main-table
 * objects into side: a shard's render has them all. known: the service
 * (from g->svcs, its shard checked with holds_at()), or NULL to look key
 * up. */
static int render_unit(const struct tsync *s, const struct model *m, const struct render_params *p,
                       const char *key, const struct svc *known, const struct rec *like, struct unit *u,
                       struct unit *side, const struct rec *side_like) {
        const struct svc *svc = known;
        if (!svc && (svc = model_service_get(m, key)) && !holds(s, p, key))
                svc = NULL;
        struct unit *both[2] = {u, side};
        struct nftir_sink sink = unit_sink(u);
        if (side)
                sink = (struct nftir_sink) {u_table, tee_set, tee_chain, tee_elem, both};
        /* Without a record the service is written: its names must be whole. */
        sink.unhashed = u->unhashed_ok && like;
        unit_begin(u, like, sink.unhashed);
        if (side)
                unit_begin(side, side_like, sink.unhashed);
        if (!svc)
                return 0;
        return render_nft_service_table(m, svc, p, &sink, s->table);
}

/* Whether u is exactly what the record says is in the kernel, in the
 * same order (rendering is deterministic): the common case of a resync,
 * which then needs no diff and keeps the record. */
static bool same_as_record(const struct rec *old, const struct unit *u) {
        if (!old || old->n_chains != u->n_ch || old->n_sets != u->n_st || old->n_elems != u->n_el)
                return false;
        struct name_it it;
        name_it_init(&it, old);
        for (size_t i = 0; i < u->n_ch; i++) {
                name_next(&it);
                if (rec_hashes(old)[i] != u->ch[i].hash || !name_equal(&it, old->key, u->ch[i].name))
                        return false;
        }
        for (size_t i = 0; i < u->n_st; i++) {
                name_next(&it);
                if (rec_timeouts(old)[i] != u->st[i].timeout || !name_equal(&it, old->key, u->st[i].name))
                        return false;
        }
        /* Every element of the unit claimed (none refused or twice). */
        const char *id = rec_first_id(old);
        for (size_t i = 0; i < u->n_el; i++, id = rec_next_id(id))
                if (rec_values(old)[i] != u->el[i].value || strcmp(id, u->el[i].id) != 0)
                        return false;
        return true;
}

/* A resync's look at the main table from the shards' passes: a shard's
 * render of a service holds the service's main-table objects too, so
 * they are compared with its main-table record there, and the main
 * table's pass leaves out the services found the same, instead of
 * rendering every service a second time. Only the main table's pass
 * changes its records, so what was compared still holds then. */
struct side {
        struct unit u;
        const struct hmap *recs;        /* the main table's */
        bool *same;                     /* per service of the full sync (g->svcs) */
};

/* Diffs the service key (rendered from m into u) against its record; with
 * side, also sets side->same[i] (i: the service's place in g->svcs).
 * known: as render_unit()'s. */
static int resync_service(struct tsync *s, const struct model *m, const struct render_params *p, const char *key,
                          const struct svc *known, struct unit *u, struct side *side, size_t i, struct txn *t,
                          struct buf *released, struct nftsync_stats *st, size_t *recorded) {
        const struct rec *rec = hmap_get(&s->recs, key);
        if (recorded)
                *recorded += rec != NULL;
        const struct rec *side_rec = side ? hmap_get(side->recs, key) : NULL;
        int r = render_unit(s, m, p, key, known, rec, u, side ? &side->u : NULL, side_rec);
        if (r < 0)
                return r;
        if (side)
                side->same[i] = same_as_record(side_rec, &side->u);
        if (same_as_record(rec, u))
                return 0;
        /* Changed: the diff may need any chain's bytes. */
        if (u->unencoded && (r = render_unit(s, m, p, key, known, NULL, u, NULL, NULL)) < 0)
                return r;
        struct rec *old = hmap_remove(&s->recs, key);
        put_record(s, diff_service(s, key, old, u, t, released, st));
        rec_free(old);
        return 0;
}

/* Map keys let go of (released: ids, one per line) go to the services
 * that were refused them. */
static int give_released(struct tsync *s, const struct model *m, const struct render_params *p, struct unit *u,
                         struct txn *t, struct buf *released, struct nftsync_stats *st) {
        int r = 0;
        for (size_t off = 0; r == 0 && off < released->len;) {
                char *id = released->data + off, *nl = strchr(id, '\n');
                *nl = '\0';
                off = (size_t) (nl - released->data) + 1;
                struct waiter *w = hmap_remove(&s->waiting, id);
                if (!w)
                        continue;
                char show[ELEM_ID_MAX + 64];
                log_v(2, "Service %s can now have %s", w->svc, elem_id_show(id, show, sizeof show));
                r = resync_service(s, m, p, w->svc, NULL, u, NULL, 0, t, released, st, NULL);
                free(w->svc);
                free(w);
        }
        return r;
}

static int tsync_partial(struct tsync *s, const struct model *m, const struct render_params *p,
                         const struct hmap *changed, struct nftsync_stats *st) {
        struct txn t;
        struct unit u;
        struct buf released = BUF_INIT;
        const char *key;
        void *v;
        int r = 0;

        memset(st, 0, sizeof *st);
        txn_init(&t, s);
        unit_init(&u, s, &t.head);
        for (size_t it = 0; r == 0 && hmap_next(changed, &it, &key, &v);)
                r = resync_service(s, m, p, key, NULL, &u, NULL, 0, &t, &released, st, NULL);
        if (r == 0)
                r = give_released(s, m, p, &u, &t, &released, st);
        if (r == 0)
                r = txn_queue(s, &t, 0, st);
        buf_done(&released);
        unit_done(&u);
        txn_done(&t);
        return r;
}

/* --- full sync --- */

/* The digest nftables_rule_digests() gives a chain holding the rules in
 * bytes [off, off + len) of m; 0 (no digest) when they include anything
 * but rules (an anonymous set, whose name the kernel chooses). */
static uint64_t rules_digest(const struct nftmsg *m, size_t off, size_t len) {
        uint64_t h = NFTABLES_DIGEST_INIT;
        for (size_t end = off + len; off < end;) {
                const struct nlmsghdr *nlh = (const struct nlmsghdr *) (m->b.data + off);
                if ((nlh->nlmsg_type & 0xff) != NFT_MSG_NEWRULE)
                        return 0;
                h = nftables_rule_msg_digest(h, nlh);
                off += MNL_ALIGN(nlh->nlmsg_len);
        }
        return h;
}

/* u's objects for a table that may hold some of them already (chains: the
 * names of those that exist; sets as nftables_list() gives them; digests
 * of the chains' rules as nftables_rule_digests() gives them, NULL when
 * unknown): a chain that already
 * holds u's rules is left alone, others are created or flushed, then
 * refilled; affinity sets are kept when unchanged (so clients keep their
 * endpoint) and replaced otherwise, and then every chain of u is written
 * (none may refer to a set being replaced). */
static void emit_in_place(const struct unit *u, const struct hmap *chains, const struct hmap *sets,
                          const struct hmap *digests, struct nftmsg *body, struct nftsync_stats *st) {
        bool keep[u->n_ch + 1], replace[u->n_st + 1], rehook[u->n_ch + 1];
        bool sets_replaced = false;
        for (size_t i = 0; i < u->n_st; i++) {
                const struct nftables_set *e = hmap_get(sets, u->st[i].name);
                replace[i] = !e || e->timeout_ms != (uint64_t) u->st[i].timeout * 1000;
                sets_replaced |= replace[i];
        }
        for (size_t i = 0; i < u->n_ch; i++) {
                keep[i] = rehook[i] = false;
                if (!digests || !hmap_get(chains, u->ch[i].name))
                        continue;
                /* A chain of ours re-made by someone else with another hook,
                 * priority or policy: the kernel will not change those in
                 * place, so it goes and comes back (base chains are never
                 * jumped to). */
                const struct nftables_chain_digest *d = hmap_get(digests, u->ch[i].name);
                const struct nlmsghdr *ours_chain = (const void *) (u->chains.b.data + u->ch[i].chain_off);
                rehook[i] = d && d->spec != nftables_chain_spec(ours_chain);
                if (sets_replaced || rehook[i])
                        continue;
                uint64_t ours = rules_digest(&u->rules, u->ch[i].rules_off, u->ch[i].rules_len);
                keep[i] = ours != 0 && ours == (d ? d->digest : NFTABLES_DIGEST_INIT);
        }
        for (size_t i = 0; i < u->n_ch; i++) {
                if (!keep[i] && hmap_get(chains, u->ch[i].name))
                        nftmsg_chain_flush(body, u->ch[i].name);
                if (rehook[i]) {
                        log_info("IPv%u nftables chain %s has another hook, priority or policy than kproxy's, "
                                 "making it again", u->chains.family, u->ch[i].name);
                        nftmsg_chain_del(body, u->ch[i].name);
                }
        }
        for (size_t i = 0; i < u->n_st; i++) {
                if (!replace[i])
                        continue;
                if (hmap_get(sets, u->st[i].name))
                        nftmsg_set_del(body, u->st[i].name);
                nftmsg_append_range(body, &u->sets, u->st[i].off, u->st[i].len);
        }
        for (size_t i = 0; i < u->n_ch; i++)
                if (!hmap_get(chains, u->ch[i].name) || rehook[i])
                        nftmsg_append_range(body, &u->chains, u->ch[i].chain_off, u->ch[i].chain_len);
        for (size_t i = 0; i < u->n_ch; i++) {
                if (keep[i]) {
                        st->chains_kept++;
                        continue;
                }
                nftmsg_append_range(body, &u->rules, u->ch[i].rules_off, u->ch[i].rules_len);
                st->chains_written++;
        }
}

static int list_table(struct tsync *s, struct hmap *chains, struct hmap *sets, struct nftsync_stats *st) {
        double t0 = now_s();
        int r = nftables_list(s->nl, s->family, s->tname, chains, sets);
        st->list_seconds += now_s() - t0;
        st->listed_chains |= chains != NULL;
        return r;
}

/* The fixed part's record, under a key no service has. */
#define FIXED_KEY ""

/* The sets of sets (from nftables_list()) that no record in desired
 * wants, of the nat side or the others: deleted in t's tail. */
static void remove_sets(const struct tsync *s, const struct hmap *sets, const struct hmap *desired, bool nat,
                        struct txn *t) {
        const char *k;
        void *v;
        for (size_t it = 0; hmap_next(sets, &it, &k, &v);) {
                if (nftir_nat_map(k) != nat || hmap_get(desired, k))
                        continue;
                log_v(2, "IPv%u nftables set %s %s is not kproxy's, removing it", s->family, s->tname, k);
                nftmsg_set_del(&t->tail, k);
        }
}

/* What the table holds (chains, sets: from nftables_list()) and no record
 * wants, stale or someone else's: flushed in t's body, deleted in its tail. */
static void remove_unwanted(struct tsync *s, const struct hmap *chains, const struct hmap *sets, struct txn *t,
                            struct nftsync_stats *st) {
        struct hmap desired = HMAP_INIT;
        const char *k;
        void *v;
        size_t n_lists = 0;
        if ((!chains || chains->len == 0) && (!sets || sets->len == 0))
                return;         /* nothing listed (a resync that trusts the count) */
        char ***lists = xcalloc(s->recs.len + 1, sizeof *lists);
        for (size_t it = 0; hmap_next(&s->recs, &it, &k, &v);) {
                const struct rec *rec = v;
                char **names = lists[n_lists++] = rec_names(rec);
                for (size_t i = 0; i < rec->n_chains + rec->n_sets; i++)
                        hmap_put(&desired, names[i], (void *) rec);
        }
        /* The nat side's maps go before the chains they point at: when the
         * shard count changes, they leave a table with those chains. Others'
         * sets go after the chains (what refers to what is unknown). */
        remove_sets(s, sets, &desired, true, t);
        for (size_t it = 0; hmap_next(chains, &it, &k, &v);) {
                if (hmap_get(&desired, k))
                        continue;
                log_v(2, "IPv%u nftables chain %s %s is not kproxy's, removing it", s->family, s->tname, k);
                nftmsg_chain_flush(&t->body, k);
                nftmsg_chain_del(&t->tail, k);
                st->chains_deleted++;
        }
        remove_sets(s, sets, &desired, false, t);
        hmap_done(&desired);
        for (size_t i = 0; i < n_lists; i++)
                free(lists[i]);
        free(lists);
}

/* A full sync over an existing table reads what the chains of each
 * service hold just before writing them. */
struct reading {
        bool on;                /* reading chains one service at a time */
        struct hmap digests;    /* chain -> struct nftables_chain_digest, for the chains that exist */
};

/* Reads what u's chains hold into rd; on an error, lists every chain into
 * chains instead and stops reading (the chains are then all written).
 * Returns 0, or -errno when neither worked: which chains exist is then
 * unknown, and writing rules into an existing one would add to them. */
static int read_chains(struct tsync *s, const struct unit *u, struct reading *rd, struct hmap *chains,
                       struct nftsync_stats *st) {
        const char *names[u->n_ch + 1];
        double t0 = now_s();
        for (size_t i = 0; i < u->n_ch; i++)
                names[i] = u->ch[i].name;
        int r = nftables_rule_digests(s->nl, s->family, s->tname, names, u->n_ch, &rd->digests);
        st->list_seconds += now_s() - t0;
        if (r == 0)
                return 0;
        log_warning_errno(r, "Failed to read the rules of IPv%u nftables table %s, writing all of them",
                          s->family, s->tname);
        rd->on = false;
        r = list_table(s, chains, NULL, st);
        if (r < 0)
                log_error_errno(r, "Failed to list IPv%u nftables table %s", s->family, s->tname);
        return r;
}

static int tsync_full(struct tsync *s, const struct model *m, const struct render_params *p,
                      const struct inet_cidr *service_cidrs, size_t n_service_cidrs, bool rebuild,
                      struct nftsync_stats *st) {
        struct hmap chains = HMAP_INIT, sets = HMAP_INIT;
        struct reading rd = {false, HMAP_INIT};
        struct txn t, fin;
        struct unit u;
        size_t n_svcs = 0;
        const struct svc **svcs = NULL;
        bool one = rebuild || s->g->chunk == 0;
        uint32_t use = 0;
        int r = 0;

        memset(st, 0, sizeof *st);
        /* An existing table: its named sets now, its chains one service at
         * a time (their names and rules), and all chain names only if the
         * kernel counts more chains and sets than that finds. */
        if (!rebuild) {
                double t0 = now_s();
                r = nftables_table_use(s->nl, s->family, s->tname, &use);
                st->list_seconds += now_s() - t0;
                if (r == 0)
                        r = list_table(s, NULL, &sets, st);
                rd.on = r == 0;
                if (r == -ENOENT)
                        r = 0;          /* a cold start */
                if (r < 0) {
                        log_error_errno(r, "Failed to list IPv%u nftables table %s", s->family, s->tname);
                        goto out_lists;
                }
        }
        /* A cold load reaches nothing before its last transaction and
         * keeps the small bound (use is 0). */
        size_t chunk = chunk_for(s, use);
        drop_records(s);
        txn_init(&t, s);
        txn_init(&fin, s);
        unit_init(&u, s, &t.head);

        /* "add" first, so that "delete" never fails on a missing table. */
        nftmsg_table(&t.head);
        if (rebuild) {
                nftmsg_table_del(&t.head);
                nftmsg_table(&t.head);
        }

        struct nftir_sink sink = unit_sink(&u);
        r = render_nft_fixed(p, service_cidrs, n_service_cidrs, &sink);
        if (r < 0)
                goto out;
        if (rd.on && (r = read_chains(s, &u, &rd, &chains, st)) < 0)
                goto out;
        emit_in_place(&u, rd.on ? &rd.digests : &chains, &sets, rd.on ? &rd.digests : NULL, &t.body, st);
        for (size_t i = 0; i < u.n_st; i++)
                nftmsg_set_flush(&fin.del_el, u.st[i].name);    /* every element is added again */
        char *end;
        struct rec *fixed = record_of(FIXED_KEY, &u, &end);
        claim_elements(s, fixed, end, &u, &fin, NULL, st);
        put_record(s, fixed);

        /* The table and the fixed part, then the services' chains written
         * straight into the family's batch (their elements and the stale
         * objects go in the last transaction, below): 100 MB at 10k
         * services, copied once instead of twice, and with nothing to read
         * back, encoded there. */
        r = txn_queue(s, &t, one ? 0 : chunk, st);
        if (r < 0)
                goto out;
        /* As when this table's pieces were queued whole: a piece of chunk
         * messages goes out with whatever the batch held before it. */
        size_t piece = s->g->pend.n;
        svcs = s->g->svcs;
        n_svcs = s->g->n_svcs;
        for (size_t i = 0; i < n_svcs; i++) {
                if (!holds_at(s, i))
                        continue;
                u.direct = rd.on ? NULL : pend_for(s);
                r = render_unit(s, m, p, svcs[i]->key, svcs[i], NULL, &u, NULL, NULL);
                if (r < 0)
                        goto out;
                if (u.n_ch + u.n_st + u.n_el == 0)
                        continue;
                if (rd.on && (r = read_chains(s, &u, &rd, &chains, st)) < 0)
                        goto out;
                if (u.direct)
                        st->chains_written += u.n_ch;
                else
                        emit_in_place(&u, rd.on ? &rd.digests : &chains, &sets, rd.on ? &rd.digests : NULL,
                                      pend_for(s), st);
                struct rec *rec = record_of(svcs[i]->key, &u, &end);
                claim_elements(s, rec, end, &u, &fin, NULL, st);
                put_record(s, rec);
                if (!one && s->g->pend.n - piece >= chunk) {
                        r = group_send(s->g, st);
                        if (r < 0)
                                goto out;
                        piece = 0;
                }
        }

        /* Chains no service has: only when the kernel counts more chains
         * and named sets than the services' chains found and the sets. */
        if (rd.on && rd.digests.len + sets.len != use) {
                log_v(2, "IPv%u nftables table %s holds %u chains and sets, %zu are kproxy's: listing it",
                      s->family, s->tname, use, rd.digests.len + sets.len);
                r = list_table(s, &chains, NULL, st);
                if (r < 0) {
                        log_error_errno(r, "Failed to list IPv%u nftables table %s", s->family, s->tname);
                        goto out;
                }
        }
        remove_unwanted(s, &chains, &sets, &fin, st);

        /* The last transaction: elements, stale objects (with the chunk's
         * remains, or everything when it must be one transaction). */
        nftmsg_append(&t.body, &fin.body);
        nftmsg_append(&t.del_el, &fin.del_el);
        nftmsg_append_elems_merged(&t.add_el, &fin.add_el);
        nftmsg_append(&t.tail, &fin.tail);
        r = txn_queue(s, &t, chunk, st);
out:
        unit_done(&u);
        txn_done(&t);
        txn_done(&fin);
out_lists:
        nftables_names_done(&chains);
        nftables_names_done(&sets);
        nftables_names_done(&rd.digests);
        return r;
}

static int tsync_resync(struct tsync *s, const struct model *m, const struct render_params *p,
                        const struct inet_cidr *service_cidrs, size_t n_service_cidrs, struct nftsync_stats *st) {
        struct hmap chains = HMAP_INIT, sets = HMAP_INIT;
        struct buf released = BUF_INIT;
        struct txn t;
        struct unit u;
        struct side side = {.recs = &s->g->t[0]->recs, .same = s->g->main_same};
        struct nftmsg side_ids;
        size_t n_svcs = 0, n_gone = 0;
        const struct svc **svcs = NULL;
        char **gone = NULL;
        bool tee = s->table != 0 && side.same;
        int r;

        memset(st, 0, sizeof *st);
        /* The table holds what the records say unless the kernel counts
         * other chains and named sets in it (anonymous ones it does not
         * count, 6.18): only then is it listed (a dump of chain names is
         * quadratic in the kernel, seconds at 20k services) to find them. */
        uint32_t use = 0;
        size_t want = 0, n_chains = 0;
        const char *k;
        void *v;
        for (size_t it = 0; hmap_next(&s->recs, &it, NULL, &v);) {
                const struct rec *rec = v;
                want += rec->n_chains + rec->n_sets;
                n_chains += rec->n_chains;
        }
        r = nftables_table_use(s->nl, s->family, s->tname, &use);
        if (r < 0 || use != want) {
                if (r == 0)
                        log_v(2, "IPv%u nftables table %s holds %u chains and sets, its records %zu: "
                              "listing it", s->family, s->tname, use, want);
                r = list_table(s, &chains, &sets, st);
        }
        if (r < 0) {
                log_error_errno(r, "Failed to list IPv%u nftables table %s", s->family, s->tname);
                goto out_lists;
        }
        size_t chunk = chunk_for(s, n_chains);
        txn_init(&t, s);
        unit_init(&u, s, &t.head);
        nftmsg_init(&side_ids, s->family, 0);
        unit_init(&side.u, s->g->t[0], &side_ids);
        u.unhashed_ok = true;

        /* What no record has goes first, on its own: a service may want a
         * stray's name for a new chain. */
        remove_unwanted(s, &chains, &sets, &t, st);
        r = txn_queue(s, &t, 0, st);
        if (r == 0)
                r = group_send(s->g, st);
        if (r < 0)
                goto out;

        struct nftir_sink sink = unit_sink(&u);
        unit_reset(&u);
        r = render_nft_fixed(p, service_cidrs, n_service_cidrs, &sink);
        if (r < 0)
                goto out;
        struct rec *old = hmap_remove(&s->recs, FIXED_KEY);
        put_record(s, diff_service(s, FIXED_KEY, old, &u, &t, &released, st));
        rec_free(old);

        /* Every service of the model, then every recorded one it lost:
         * there are some when the records outnumber the services that had
         * one (only a service's own resync changes its record). */
        svcs = s->g->svcs;
        n_svcs = s->g->n_svcs;
        size_t recorded = hmap_get(&s->recs, FIXED_KEY) != NULL, n_recs = s->recs.len;
        for (size_t i = 0; r == 0 && i < n_svcs; i++) {
                if (!holds_at(s, i))
                        continue;
                if (s->table == 0 && side.same && side.same[i]) {
                        recorded++;     /* same_as_record() had a record */
                        continue;
                }
                r = resync_service(s, m, p, svcs[i]->key, svcs[i], &u, tee ? &side : NULL, i, &t, &released,
                                   st, &recorded);
                if (r == 0 && chunk && txn_size(&t) >= chunk)
                        r = txn_queue(s, &t, chunk, st);
        }
        if (r == 0 && recorded < n_recs) {
                gone = xcalloc(s->recs.len + 1, sizeof *gone);
                for (size_t it = 0; hmap_next(&s->recs, &it, &k, &v);)
                        if (*k && !model_service_get(m, k))
                                gone[n_gone++] = xstrdup(k);
        }
        for (size_t i = 0; r == 0 && i < n_gone; i++) {
                r = resync_service(s, m, p, gone[i], NULL, &u, NULL, 0, &t, &released, st, NULL);
                if (r == 0 && chunk && txn_size(&t) >= chunk)
                        r = txn_queue(s, &t, chunk, st);
        }
        if (r == 0)
                r = give_released(s, m, p, &u, &t, &released, st);
        if (r == 0)
                r = txn_queue(s, &t, chunk, st);
out:
        for (size_t i = 0; i < n_gone; i++)
                free(gone[i]);
        free(gone);
        buf_done(&released);
        unit_done(&u);
        unit_done(&side.u);
        nftmsg_done(&side_ids);
        txn_done(&t);
out_lists:
        nftables_names_done(&chains);
        nftables_names_done(&sets);
        return r;
}

/* --- the family's tables --- */

int nftsync_new(uint8_t family, struct nftables *nl, struct nftsync **ret) {
        struct nftsync *g = calloc(1, sizeof *g);
        if (!g)
                return -ENOMEM;
        g->family = family;
        g->nl = nl;
        g->chunk = DEFAULT_CHUNK;
        nftmsg_init(&g->ids, family, 0);
        nftmsg_init(&g->pend, family, 0);
        nftmsg_share_set_ids(&g->pend, &g->ids);
        *ret = g;
        return 0;
}

struct nftsync *nftsync_free(struct nftsync *g) {
        if (!g)
                return NULL;
        for (size_t i = 0; i < g->n; i++)
                tsync_free(g->t[i]);
        nftmsg_done(&g->pend);
        nftmsg_done(&g->ids);
        free(g);
        return NULL;
}

void nftsync_set_after_commit(struct nftsync *g, void (*fn)(void *userdata), void *userdata) {
        g->after_commit = fn;
        g->after_commit_ud = userdata;
}

void nftsync_set_chunk(struct nftsync *g, size_t messages) {
        g->chunk = messages;
}

/* The tables p asks for: the first sync makes their syncs (the shard
 * count comes from the configuration and does not change). */
static int tables_for(struct nftsync *g, const struct render_params *p) {
        size_t want = 1 + (p->nft_shards < NFTIR_TABLES_MAX ? p->nft_shards : NFTIR_TABLES_MAX);
        if (g->n > 0 && g->n != want) {
                log_error("IPv%u nftables: the shard count changed from %zu to %u while running", g->family,
                          g->n - 1, p->nft_shards);
                return -EINVAL;
        }
        for (; g->n < want; g->n++) {
                if (tsync_new(g, (unsigned) g->n, &g->t[g->n]) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static void stats_add(struct nftsync_stats *a, const struct nftsync_stats *b) {
        a->transactions += b->transactions;
        a->messages += b->messages;
        a->chains_written += b->chains_written;
        a->chains_kept += b->chains_kept;
        a->chains_deleted += b->chains_deleted;
        a->elements_added += b->elements_added;
        a->elements_deleted += b->elements_deleted;
        a->conflicts += b->conflicts;
        a->kernel_seconds += b->kernel_seconds;
        a->list_seconds += b->list_seconds;
        a->listed_chains |= b->listed_chains;
}

enum kind { FULL, REBUILD, RESYNC, PARTIAL };

/* Every table in turn, the shards first: a restart that brings them in
 * has them ready before the main table lets go of the services' nat side
 * (in the same transaction, or an earlier one). A partial sync leaves out
 * the shards none of the changed services is in. */
static int each_table(struct nftsync *g, enum kind k, const struct model *m, const struct render_params *p,
                      const struct inet_cidr *service_cidrs, size_t n_service_cidrs, const struct hmap *changed,
                      struct nftsync_stats *st) {
        bool touched[NFTIR_TABLES_MAX + 1] = {false};
        int r = tables_for(g, p);
        memset(st, 0, sizeof *st);
        if (r < 0)
                return r;
        if (k == PARTIAL) {
                const char *key;
                void *v;
                touched[0] = true;
                for (size_t it = 0; hmap_next(changed, &it, &key, &v);) {
                        unsigned t = render_nft_shard(key, p->nft_shards);
                        touched[t < g->n ? t : 0] = true;
                }
        } else {
                g->svcs = model_services_sorted(m, &g->n_svcs);
                g->shards = malloc(g->n_svcs + 1);
                if ((!g->svcs && model_n_services(m) > 0) || !g->shards) {
                        free(g->svcs);
                        free(g->shards);
                        g->svcs = NULL;
                        g->shards = NULL;
                        return -ENOMEM;
                }
                for (size_t i = 0; i < g->n_svcs; i++)
                        g->shards[i] = (uint8_t) render_nft_shard(g->svcs[i]->key, p->nft_shards);
                /* Without it the main table's pass renders every service. */
                if (k == RESYNC && g->n > 1)
                        g->main_same = calloc(g->n_svcs + 1, sizeof *g->main_same);
        }
        for (size_t i = 1; i <= g->n && r == 0; i++) {
                struct tsync *s = g->t[i % g->n];
                struct nftsync_stats one;
                switch (k) {
                case FULL:
                case REBUILD:
                        r = tsync_full(s, m, p, service_cidrs, n_service_cidrs, k == REBUILD, &one);
                        break;
                case RESYNC:
                        r = tsync_resync(s, m, p, service_cidrs, n_service_cidrs, &one);
                        break;
                case PARTIAL:
                        if (!touched[s->table])
                                continue;
                        r = tsync_partial(s, m, p, changed, &one);
                        break;
                }
                stats_add(st, &one);
        }
        /* What the tables left queued: one transaction with the last of
         * each (or nothing after a failure: the next sync is a full one). */
        if (r == 0)
                r = group_send(g, st);
        group_reset(g, true);
        free(g->svcs);
        free(g->shards);
        free(g->main_same);
        g->svcs = NULL;
        g->shards = NULL;
        g->main_same = NULL;
        g->n_svcs = 0;
        /* The shards of a larger shard count before (all of them, now 0). */
        if (r == 0 && (k == FULL || k == REBUILD)) {
                double t0 = now_s();
                r = nftables_drop_tables(g->nl, g->family, (unsigned) g->n);
                st->list_seconds += now_s() - t0;
        }
        return r;
}

int nftsync_full(struct nftsync *g, const struct model *m, const struct render_params *p,
                 const struct inet_cidr *service_cidrs, size_t n_service_cidrs, bool rebuild,
                 struct nftsync_stats *st) {
        return each_table(g, rebuild ? REBUILD : FULL, m, p, service_cidrs, n_service_cidrs, NULL, st);
}

int nftsync_resync(struct nftsync *g, const struct model *m, const struct render_params *p,
                   const struct inet_cidr *service_cidrs, size_t n_service_cidrs, struct nftsync_stats *st) {
        return each_table(g, RESYNC, m, p, service_cidrs, n_service_cidrs, NULL, st);
}

int nftsync_partial(struct nftsync *g, const struct model *m, const struct render_params *p,
                    const struct hmap *changed, struct nftsync_stats *st) {
        return each_table(g, PARTIAL, m, p, NULL, 0, changed, st);
}
