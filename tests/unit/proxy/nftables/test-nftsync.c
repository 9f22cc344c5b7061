/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nftables mode's sync decisions, against an in-memory kernel
 * (nft-fake.h) under the real netlink layer: what each kind of sync sends,
 * and that the kernel ends up holding exactly what a fresh load of the
 * same model gives (a second fake, loaded from scratch, compared as
 * text). No root, milliseconds; tests/netns/test-nftsync.sh walks the same
 * ground against the real kernel.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply/nftables.h"
#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "model/model.h"
#include "cluster.h"
#include "nft-fake.h"
#include "proxy/nftables/nftsync.h"
#include "render/nftir.h"
#include "render/nftmsg.h"
#include "render/render.h"
#include "test.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "util/log.h"

/* --- the world: a model, render parameters, a fake kernel and a sync --- */

struct world {
        struct kproxy_config cfg;
        struct host_facts host;
        struct inet_cidr hostaddr;
        struct render_params p;
        struct model *m;
        struct nft_fake *k;
        struct nftables *nl;
        struct nftsync *sync;
        struct nftsync_stats st;
};

static void world_init(struct world *w, unsigned shards) {
        memset(w, 0, sizeof *w);
        config_init(&w->cfg);
        w->cfg.mode = PROXY_MODE_NFTABLES;
        w->cfg.cluster_cidr = strdup("10.244.0.0/16");
        w->cfg.nftables_shards = (int32_t) shards;
        inet_cidr_parse("192.168.0.2/24", &w->hostaddr);
        w->host.addrs = &w->hostaddr;
        w->host.n_addrs = 1;
        if (render_params_init(&w->p, 4, &w->cfg, "node-1", NULL, &w->host, NULL) < 0)
                abort();
        w->m = model_new();
        w->k = nft_fake_new();
        if (nftables_open_on(nft_fake_open, w->k, &w->nl) < 0 || !(w->sync = nftsync_new(4, w->nl)))
                abort();
}

static void world_done(struct world *w) {
        nftsync_free(w->sync);
        nftables_close(w->nl);
        nft_fake_free(w->k);
        model_free(w->m);
        render_params_done(&w->p);
        config_done(&w->cfg);
}

/* A new sync over the same kernel: kproxy restarted. */
static void restart(struct world *w) {
        nftsync_free(w->sync);
        if (!(w->sync = nftsync_new(4, w->nl)))
                abort();
}

/* Commits m (a batch of messages after nftmsg_batch_begin()) through n. */
static int commit(struct nftables *n, struct nftmsg *m) {
        char err[512];
        nftmsg_batch_end(m);
        int r = nftables_commit(n, m, err, sizeof err);
        nftmsg_done(m);
        return r;
}

/* Whether w's kernel holds exactly what a fresh load of w's model gives
 * (its tables made anew, the whole ruleset in one batch); with show,
 * prints both when not. */
static bool fresh_compare(struct world *w, bool show) {
        struct nft_fake *fresh = nft_fake_new();
        struct nftables *n = NULL;
        struct nftmsg m;
        struct buf a = BUF_INIT, b = BUF_INIT;
        if (nftables_open_on(nft_fake_open, fresh, &n) < 0)
                abort();
        nftmsg_init(&m, 4, 1);
        nftmsg_batch_begin(&m);
        for (int t = 0; t <= w->cfg.nftables_shards; t++) {
                m.table = (uint16_t) t;
                nftmsg_table(&m);
        }
        bool ok = render_nftables_netlink(w->m, &w->p, NULL, 0, &m) == 0 && commit(n, &m) == 0;
        nft_fake_text(w->k, &a);
        nft_fake_text(fresh, &b);
        ok = ok && a.len == b.len && memcmp(a.data, b.data, a.len) == 0;
        if (!ok && show)
                fprintf(stderr, "--- the synced kernel:\n%s--- a fresh load:\n%s", a.data, b.data);
        buf_done(&a);
        buf_done(&b);
        nftables_close(n);
        nft_fake_free(fresh);
        return ok;
}

static bool same_as_fresh(struct world *w) {
        return fresh_compare(w, true);
}

static bool differs_from_fresh(struct world *w) {
        return !fresh_compare(w, false);
}

static int full(struct world *w, bool rebuild) {
        return nftsync_full(w->sync, w->m, &w->p, NULL, 0, rebuild, &w->st);
}

static int partial(struct world *w, const char *key) {
        struct hmap changed = HMAP_INIT;
        hmap_put(&changed, key, NULL);
        int r = nftsync_partial(w->sync, w->m, &w->p, &changed, &w->st);
        hmap_done(&changed);
        return r;
}

/* The name of a chain of the journal's "add chain" lines: the first that
 * starts with prefix and holds what. */
static bool chain_named(const struct nft_fake *k, const char *prefix, const char *what, char *out, size_t size) {
        const char *j = nft_fake_journal(k), *key = "add chain ip kube-proxy ";
        for (const char *l = strstr(j, key); l; l = strstr(l + 1, key)) {
                const char *name = l + strlen(key);
                size_t len = strcspn(name, "\n");
                snprintf(out, size, "%.*s", (int) len, name);
                if (strncmp(out, prefix, strlen(prefix)) == 0 && strstr(out, what))
                        return true;
        }
        return false;
}

/* Whether every line of the journal holds one of the strings (NULL-ended). */
static bool journal_only(const struct nft_fake *k, const char *const *allowed) {
        const char *j = nft_fake_journal(k);
        bool ok = true;
        while (*j) {
                size_t len = strcspn(j, "\n");
                char line[1024];
                snprintf(line, sizeof line, "%.*s", (int) len, j);
                bool hit = false;
                for (size_t i = 0; allowed[i] && !hit; i++)
                        hit = strstr(line, allowed[i]) != NULL;
                if (!hit) {
                        fprintf(stderr, "unexpected in the journal: %s\n", line);
                        ok = false;
                }
                j += len + (j[len] == '\n');
        }
        return ok;
}

/* --- tests --- */

/* The first full sync into an empty kernel writes everything, in the
 * renderer's bytes: the kernel then holds what a fresh load gives. */
static void test_cold_full_sync(void) {
        struct world w;
        world_init(&w, 0);
        cluster_small(w.m, true);
        CHECK(full(&w, false) == 0);
        CHECK(w.st.chains_written > 20 && w.st.chains_kept == 0 && w.st.conflicts == 0);
        CHECK(w.st.transactions == 1 && nft_fake_genid(w.k) == 1);
        CHECK(nft_fake_txn_messages(w.k, 0) == w.st.messages);
        CHECK(nft_fake_journal_count(w.k, "add chain") == w.st.chains_written);
        CHECK(same_as_fresh(&w));
        world_done(&w);
}

/* A resync over an unchanged kernel sends nothing at all; a restart's
 * full sync reads every chain back, keeps all of them but the one with an
 * anonymous set, and rewrites only the element containers (flushed and
 * filled again, by design: a full sync trusts no record of them). */
static void test_unchanged_writes_nothing(void) {
        struct world w;
        world_init(&w, 0);
        cluster_small(w.m, true);
        CHECK(full(&w, false) == 0);
        size_t chains = w.st.chains_written;
        nft_fake_journal_clear(w.k);
        uint32_t gen = nft_fake_genid(w.k);

        CHECK(nftsync_resync(w.sync, w.m, &w.p, NULL, 0, &w.st) == 0);
        CHECK(w.st.messages == 0 && w.st.transactions == 0 && !w.st.listed_chains);
        CHECK(nft_fake_genid(w.k) == gen && *nft_fake_journal(w.k) == '\0');

        restart(&w);
        CHECK(full(&w, false) == 0);
        CHECK(w.st.chains_written == 1 && w.st.chains_kept == chains - 1 && !w.st.listed_chains);
        /* The firewall chain of svc-f, with its list of ranges, is the one. */
        CHECK(nft_fake_journal_count(w.k, "flush chain") == 1 && nft_fake_journal_count(w.k, "firewall-") >= 1);
        const char *allowed[] = {"add table ip kube-proxy", "flush set", "add element", "firewall-",
                                 "add set ip kube-proxy __set", NULL};
        CHECK(journal_only(w.k, allowed));
        CHECK(nft_fake_journal_count(w.k, "add chain") == 0 && nft_fake_journal_count(w.k, "delete") == 0);
        CHECK(same_as_fresh(&w));
        world_done(&w);
}

/* A partial sync sends only the changed services' objects, in one
 * transaction: an endpoint change, a new service, a deleted one. */
static void test_partial_only_changed(void) {
        struct world w;
        world_init(&w, 0);
        cluster_small(w.m, false);
        nftsync_set_chunk(w.sync, 10);  /* a partial sync ignores it */
        CHECK(full(&w, false) == 0);

        nft_fake_journal_clear(w.k);
        cluster_endpoints(w.m, "svc-a", 1, 3);      /* one more endpoint */
        CHECK(partial(&w, "ns/svc-a") == 0);
        CHECK(w.st.transactions == 1 && w.st.chains_written == 2 && w.st.chains_deleted == 0);
        const char *only_a[] = {"ns/svc-a/", NULL};
        CHECK(journal_only(w.k, only_a));
        CHECK(nft_fake_journal_count(w.k, "add chain") == 1);   /* the new endpoint's */
        CHECK(nft_fake_journal_count(w.k, "flush chain") == 1); /* the service chain, rewritten */
        CHECK(same_as_fresh(&w));

        nft_fake_journal_clear(w.k);
        cluster_endpoints(w.m, "svc-a", 1, 1);      /* two endpoints go */
        CHECK(partial(&w, "ns/svc-a") == 0);
        CHECK(w.st.transactions == 1 && w.st.chains_deleted == 2);
        CHECK(journal_only(w.k, only_a));
        CHECK(same_as_fresh(&w));

        nft_fake_journal_clear(w.k);
        cluster_service(w.m, &(struct cluster_svc) {.name = "svc-g", .ip = "10.96.0.20", .port = 8443});
        cluster_endpoints(w.m, "svc-g", 9, 2);
        CHECK(partial(&w, "ns/svc-g") == 0);
        /* Its chains, and its cluster IP (10.96.0.20) in cluster-ips. */
        const char *only_g[] = {"ns/svc-g/", "cluster-ips 0a600014", NULL};
        CHECK(w.st.transactions == 1 && w.st.elements_added == 2);
        CHECK(journal_only(w.k, only_g));
        CHECK(same_as_fresh(&w));

        /* Gone: its chains, and its elements (named by their keys:
         * 10.96.0.20, and it with tcp and 8443). */
        nft_fake_journal_clear(w.k);
        model_service_delete(w.m, "ns/svc-g");
        CHECK(partial(&w, "ns/svc-g") == 0);
        const char *gone_g[] = {"ns/svc-g/", "service-ips 0a6000140600000020fb0000", "cluster-ips 0a600014", NULL};
        CHECK(w.st.transactions == 1 && w.st.elements_deleted == 2 && w.st.chains_deleted == 3);
        CHECK(journal_only(w.k, gone_g));
        CHECK(nft_fake_has_chain(w.k, 4, "kube-proxy", "reject-chain") == 1);
        CHECK(same_as_fresh(&w));

        /* Nothing changed: nothing sent. */
        uint32_t gen = nft_fake_genid(w.k);
        CHECK(partial(&w, "ns/svc-b") == 0 && w.st.transactions == 0 && nft_fake_genid(w.k) == gen);
        world_done(&w);
}

/* Someone else flushed a service's chain: the next full sync (no records
 * trusted) writes that chain again and no other. */
static void test_full_repairs_flushed_chain(void) {
        struct world w;
        world_init(&w, 0);
        cluster_small(w.m, false);
        CHECK(full(&w, false) == 0);
        char chain[256];
        CHECK(chain_named(w.k, "service-", "ns/svc-b/", chain, sizeof chain));

        struct nftables *other = NULL;
        struct nftmsg m;
        CHECK(nftables_open_on(nft_fake_open, w.k, &other) == 0);
        nftmsg_init(&m, 4, 100);
        nftmsg_batch_begin(&m);
        nftmsg_chain_flush(&m, chain);
        CHECK(commit(other, &m) == 0);
        CHECK(nft_fake_rules(w.k, 4, "kube-proxy", chain) == 0);
        CHECK(differs_from_fresh(&w));

        nft_fake_journal_clear(w.k);
        CHECK(full(&w, false) == 0);
        CHECK(w.st.chains_written == 1 && w.st.chains_deleted == 0);
        CHECK(nft_fake_journal_count(w.k, "flush chain") == 1 && nft_fake_journal_count(w.k, chain) >= 2);
        size_t rules = nft_fake_journal_count(w.k, "add rule");
        CHECK(rules > 0 && rules == nft_fake_journal_count(w.k, "add rule ip kube-proxy service-"));
        CHECK(nft_fake_rules(w.k, 4, "kube-proxy", chain) > 0);
        CHECK(same_as_fresh(&w));
        nftables_close(other);
        world_done(&w);
}

/* Someone else deleted a map element: the full sync puts it back and
 * writes no chain. */
static void test_full_repairs_deleted_element(void) {
        struct world w;
        world_init(&w, 0);
        cluster_small(w.m, false);
        CHECK(full(&w, false) == 0);
        /* svc-b's cluster IP, tcp, 443 */
        const uint8_t key[12] = {10, 96, 0, 11, 6, 0, 0, 0, 0x01, 0xbb, 0, 0};
        CHECK(nft_fake_has_elem(w.k, 4, "kube-proxy", "service-ips", key, sizeof key) == 1);

        struct nftables *other = NULL;
        struct nftmsg m;
        CHECK(nftables_open_on(nft_fake_open, w.k, &other) == 0);
        nftmsg_init(&m, 4, 100);
        nftmsg_batch_begin(&m);
        nftmsg_elem_del(&m, "service-ips", key, sizeof key);
        CHECK(commit(other, &m) == 0);
        CHECK(nft_fake_has_elem(w.k, 4, "kube-proxy", "service-ips", key, sizeof key) == 0);

        nft_fake_journal_clear(w.k);
        CHECK(full(&w, false) == 0);
        CHECK(w.st.chains_written == 0 && nft_fake_journal_count(w.k, "add rule") == 0);
        CHECK(nft_fake_has_elem(w.k, 4, "kube-proxy", "service-ips", key, sizeof key) == 1);
        CHECK(same_as_fresh(&w));
        nftables_close(other);
        world_done(&w);
}

/* Someone else added a rule to a service's chain and a chain of their
 * own: the full sync writes that service chain again, removes the
 * stranger, and leaves every other chain alone. */
static void test_full_repairs_extra_rule(void) {
        struct world w;
        world_init(&w, 0);
        cluster_small(w.m, false);
        CHECK(full(&w, false) == 0);
        char chain[256];
        CHECK(chain_named(w.k, "service-", "ns/svc-c/", chain, sizeof chain));
        int rules = nft_fake_rules(w.k, 4, "kube-proxy", chain);

        struct nftables *other = NULL;
        struct nftmsg m;
        struct nftir_rule drop = {.s = {{.kind = NFTIR_DROP}}, .n = 1, .comment = "not kproxy's"};
        struct nftir_chain theirs = {.name = {chain, NULL, false}, .rules = &drop, .n_rules = 1};
        struct nftir_chain stray = {.name = {"stray", NULL, false}};
        CHECK(nftables_open_on(nft_fake_open, w.k, &other) == 0);
        nftmsg_init(&m, 4, 100);
        nftmsg_batch_begin(&m);
        nftmsg_rules(&m, &theirs);
        nftmsg_chain(&m, &stray);
        CHECK(commit(other, &m) == 0);
        CHECK(nft_fake_rules(w.k, 4, "kube-proxy", chain) == rules + 1);

        nft_fake_journal_clear(w.k);
        CHECK(full(&w, false) == 0);
        CHECK(w.st.chains_written == 1 && w.st.chains_deleted == 1 && w.st.listed_chains);
        CHECK(nft_fake_journal_count(w.k, "flush chain") == 2);        /* theirs and the stray */
        CHECK(nft_fake_journal_count(w.k, "delete chain ip kube-proxy stray") == 1);
        CHECK(nft_fake_rules(w.k, 4, "kube-proxy", chain) == rules);
        CHECK(nft_fake_has_chain(w.k, 4, "kube-proxy", "stray") == 0);
        CHECK(same_as_fresh(&w));
        nftables_close(other);
        world_done(&w);
}

/* Counts what one render of a service would queue for its chains and
 * sets (the per-service part of a full sync's pieces). */
struct count {
        size_t n;
};

static void count_table(void *ud, unsigned idx) {
        (void) ud;
        (void) idx;
}

static void count_set(void *ud, const struct nftir_set *s) {
        (void) s;
        ((struct count *) ud)->n++;
}

static void count_chain(void *ud, const struct nftir_chain *c) {
        ((struct count *) ud)->n += 1 + c->n_rules;
}

static void count_elem(void *ud, const struct nftir_elem *e) {
        (void) ud;
        (void) e;
}

/* A full sync's transactions hold at least the size bound's worth of
 * messages (but the last) and never more than a piece over it: the bound
 * plus one service's chains and sets (and, in the first, the table's
 * fixed part). Without a bound, and in a rebuild, one transaction. */
static void test_transaction_bounds(void) {
        struct world w;
        world_init(&w, 0);
        for (int i = 0; i < 30; i++) {
                char name[32], ip[32];
                snprintf(name, sizeof name, "bulk-%02d", i);
                snprintf(ip, sizeof ip, "10.96.1.%d", i + 1);
                cluster_service(w.m, &(struct cluster_svc) {.name = name, .ip = ip, .port = 80});
                cluster_endpoints(w.m, name, 100 + i, 1 + i % 4);
        }
        size_t max_service = 0, n_svcs = 0;
        const struct svc **svcs = model_services_sorted(w.m, &n_svcs);
        for (size_t i = 0; i < n_svcs; i++) {
                struct count c = {0};
                struct nftir_sink sink = {count_table, count_set, count_chain, count_elem, &c, false};
                CHECK(render_nft_service_table(w.m, svcs[i], &w.p, &sink, 0) == 0);
                max_service = c.n > max_service ? c.n : max_service;
        }
        free(svcs);
        struct count fixed = {0};
        struct nftir_sink sink = {count_table, count_set, count_chain, count_elem, &fixed, false};
        CHECK(render_nft_fixed(&w.p, NULL, 0, &sink) == 0);

        const size_t chunk = 40;
        nftsync_set_chunk(w.sync, chunk);
        CHECK(full(&w, false) == 0);
        CHECK(w.st.transactions >= 4 && nft_fake_genid(w.k) == w.st.transactions);
        size_t total = 0;
        for (uint32_t i = 0; i < w.st.transactions; i++) {
                size_t n = nft_fake_txn_messages(w.k, i);
                total += n;
                if (i + 1 < w.st.transactions)
                        CHECK(n >= chunk && n < chunk + max_service + fixed.n + 1);
        }
        CHECK(total == w.st.messages);
        CHECK(same_as_fresh(&w));

        /* A partial sync is one transaction, however large. */
        for (int i = 0; i < 30; i += 3) {
                char name[32];
                snprintf(name, sizeof name, "bulk-%02d", i);
                cluster_endpoints(w.m, name, 100 + i, 5);
        }
        struct hmap changed = HMAP_INIT;
        const char *keys[] = {"ns/bulk-00", "ns/bulk-03", "ns/bulk-06", "ns/bulk-09", "ns/bulk-12",
                              "ns/bulk-15", "ns/bulk-18", "ns/bulk-21", "ns/bulk-24", "ns/bulk-27"};
        for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
                hmap_put(&changed, keys[i], NULL);
        CHECK(nftsync_partial(w.sync, w.m, &w.p, &changed, &w.st) == 0);
        hmap_done(&changed);
        CHECK(w.st.transactions == 1 && w.st.messages > chunk);
        CHECK(same_as_fresh(&w));

        /* A rebuild: one transaction, the table deleted first. */
        nft_fake_journal_clear(w.k);
        uint32_t before = nft_fake_genid(w.k);
        CHECK(full(&w, true) == 0);
        CHECK(w.st.transactions == 1 && nft_fake_genid(w.k) == before + 1);
        const char *rebuilt = "add table ip kube-proxy \ndelete table ip kube-proxy \nadd table ip kube-proxy \n";
        CHECK(strncmp(nft_fake_journal(w.k), rebuilt, strlen(rebuilt)) == 0);
        CHECK(same_as_fresh(&w));

        /* No bound: one transaction. */
        restart(&w);
        nftsync_set_chunk(w.sync, 0);
        CHECK(full(&w, false) == 0 && w.st.transactions == 1);
        world_done(&w);
}

/* After each transaction: the kernel's text, kept. */
struct snapshots {
        struct nft_fake *k;
        struct buf text[64];
        size_t n;
};

static void snapshot(void *userdata) {
        struct snapshots *s = userdata;
        if (s->n < 64)
                nft_fake_text(s->k, &s->text[s->n++]);
}

/* A failed transaction leaves the kernel as it was (the earlier ones of
 * a full sync stay), the sync says so, and the next full sync makes the
 * table right; a rebuild does it in one transaction. */
static void test_failed_transaction(void) {
        struct world w;
        world_init(&w, 0);
        cluster_small(w.m, false);
        CHECK(full(&w, false) == 0);
        struct buf before = BUF_INIT, after = BUF_INIT;

        /* A partial sync whose commit fails. */
        cluster_endpoints(w.m, "svc-a", 1, 4);
        nft_fake_text(w.k, &before);
        uint32_t gen = nft_fake_genid(w.k);
        nft_fake_fail_commit(w.k, 1, -ENOMEM);
        CHECK(partial(&w, "ns/svc-a") == -ENOMEM);
        nft_fake_text(w.k, &after);
        CHECK(before.len == after.len && memcmp(before.data, after.data, before.len) == 0);
        CHECK(nft_fake_genid(w.k) == gen && nft_fake_refused(w.k) == 1);
        nft_fake_journal_clear(w.k);
        CHECK(full(&w, true) == 0);
        CHECK(w.st.transactions == 1 && nft_fake_journal_count(w.k, "delete table") == 1);
        CHECK(same_as_fresh(&w));

        buf_done(&before);
        buf_done(&after);
        world_done(&w);

        /* A cold full sync in pieces, one of which is refused (by a
         * message of svc-d's): the pieces before it stay, the refused one
         * changes nothing. */
        struct snapshots snaps = {0};
        world_init(&w, 0);
        cluster_small(w.m, false);
        snaps.k = w.k;
        nftsync_set_chunk(w.sync, 10);
        nftsync_set_after_commit(w.sync, snapshot, &snaps);
        nft_fake_fail_object(w.k, "ns/svc-d/", -ENOSPC);
        CHECK(full(&w, false) == -ENOSPC);
        CHECK(nft_fake_refused(w.k) == 1 && nft_fake_genid(w.k) >= 1 && snaps.n == nft_fake_genid(w.k) + 1);
        CHECK(snaps.n >= 2 && snaps.text[snaps.n - 2].len == snaps.text[snaps.n - 1].len &&
              memcmp(snaps.text[snaps.n - 2].data, snaps.text[snaps.n - 1].data, snaps.text[snaps.n - 1].len) == 0);
        CHECK(nft_fake_has_chain(w.k, 4, "kube-proxy", "nat-prerouting") == 1);
        CHECK(differs_from_fresh(&w));
        /* The next full sync reads back what the pieces left. */
        nft_fake_journal_clear(w.k);
        CHECK(full(&w, false) == 0);
        CHECK(w.st.chains_kept > 0 && nft_fake_journal_count(w.k, "ns/svc-d/") > 0);
        CHECK(same_as_fresh(&w));
        for (size_t i = 0; i < snaps.n; i++)
                buf_done(&snaps.text[i]);
        world_done(&w);
}

/* Two services claim one external IP and port: the first keeps the map
 * key, the second gets it when the first lets go. */
static void test_contended_key(void) {
        struct world w;
        world_init(&w, 0);
        struct cluster_svc first = {.name = "first", .ip = "10.96.0.40", .port = 80, .ext = "192.0.2.50"};
        struct cluster_svc second = {.name = "second", .ip = "10.96.0.41", .port = 80, .ext = "192.0.2.50"};
        cluster_service(w.m, &first);
        cluster_service(w.m, &second);
        cluster_endpoints(w.m, "first", 40, 1);
        cluster_endpoints(w.m, "second", 41, 1);
        log_set_verbosity(-10);         /* the conflict's warning */
        CHECK(full(&w, false) == 0 && w.st.conflicts == 1);
        CHECK(nft_fake_journal_count(w.k, "service-ips c00002320600000000500000 goto external-") == 1);
        CHECK(nft_fake_journal_count(w.k, "ns/first/tcp/http") > 0);
        nft_fake_journal_clear(w.k);
        model_service_delete(w.m, "ns/first");
        CHECK(partial(&w, "ns/first") == 0 && w.st.transactions == 1);
        CHECK(nft_fake_journal_count(w.k, "add element ip kube-proxy service-ips c00002320600000000500000 goto "
                                          "external-") == 1);
        CHECK(nft_fake_journal_count(w.k, "ns/second/tcp/http") > 0);
        CHECK(same_as_fresh(&w));
        log_set_verbosity(0);
        world_done(&w);
}

/* With shards, each table has its own records and the tables share the
 * transactions: a cold sync, a resync that sends nothing, a partial sync
 * in one transaction, each the same as a fresh load of every table. */
static void test_shards(void) {
        struct world w;
        world_init(&w, 2);
        cluster_small(w.m, true);
        CHECK(full(&w, false) == 0 && w.st.transactions == 1);
        CHECK(nft_fake_has_chain(w.k, 4, "kube-proxy-1", "nat-prerouting") == 1);
        CHECK(nft_fake_has_chain(w.k, 4, "kube-proxy-2", "nat-prerouting") == 1);
        CHECK(same_as_fresh(&w));
        CHECK(nftsync_resync(w.sync, w.m, &w.p, NULL, 0, &w.st) == 0 && w.st.messages == 0);
        cluster_endpoints(w.m, "svc-c", 3, 1);
        cluster_endpoints(w.m, "svc-d", 4, 5);
        struct hmap changed = HMAP_INIT;
        hmap_put(&changed, "ns/svc-c", NULL);
        hmap_put(&changed, "ns/svc-d", NULL);
        CHECK(nftsync_partial(w.sync, w.m, &w.p, &changed, &w.st) == 0 && w.st.transactions == 1);
        hmap_done(&changed);
        CHECK(same_as_fresh(&w));
        /* A restart over the loaded tables keeps their chains. */
        restart(&w);
        CHECK(full(&w, false) == 0 && w.st.chains_kept > 0 && w.st.chains_written == 1);
        CHECK(same_as_fresh(&w));
        world_done(&w);
}

int main(void) {
        log_set_verbosity(-10);
        TEST_RUN(test_cold_full_sync);
        TEST_RUN(test_unchanged_writes_nothing);
        TEST_RUN(test_partial_only_changed);
        TEST_RUN(test_full_repairs_flushed_chain);
        TEST_RUN(test_full_repairs_deleted_element);
        TEST_RUN(test_full_repairs_extra_rule);
        TEST_RUN(test_transaction_bounds);
        TEST_RUN(test_failed_transaction);
        TEST_RUN(test_contended_key);
        TEST_RUN(test_shards);
        TEST_DONE();
}
