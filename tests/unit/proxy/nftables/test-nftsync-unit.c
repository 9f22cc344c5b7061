/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The unit a service is rendered into: each object's name, digest or id,
 * and bytes that are exactly its own messages; its record, which then
 * says the unit is the same; a render compared with that record, which
 * encodes only what changed; the shards' split of a service's objects.
 */
#include <libmnl/libmnl.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "model/model.h"
#include "proxy/nftables/nftsync-rec.h"
#include "proxy/nftables/nftsync-unit.h"
#include "render/nftmsg.h"
#include "render/render.h"
#include "test.h"
#include "util/inet.h"

struct fixture {
        struct kproxy_config cfg;
        struct host_facts host;
        struct inet_cidr hostaddr;
        struct render_params p;
        struct model *m;
        struct nftmsg ids;
};

static void fixture_init(struct fixture *f, unsigned shards) {
        memset(f, 0, sizeof *f);
        config_init(&f->cfg);
        f->cfg.mode = PROXY_MODE_NFTABLES;
        f->cfg.cluster_cidr = strdup("10.244.0.0/16");
        f->cfg.nftables_shards = (int32_t) shards;
        inet_cidr_parse("192.168.0.2/24", &f->hostaddr);
        f->host.addrs = &f->hostaddr;
        f->host.n_addrs = 1;
        if (render_params_init(&f->p, 4, &f->cfg, "node-1", NULL, &f->host, NULL) < 0)
                abort();
        f->m = model_new();
        cluster_small(f->m, false);
        nftmsg_init(&f->ids, 4, 0);
}

static void fixture_done(struct fixture *f) {
        nftmsg_done(&f->ids);
        model_free(f->m);
        render_params_done(&f->p);
        config_done(&f->cfg);
}

/* The string attribute type of the one message at off (len bytes) of m,
 * and how many messages the bytes hold. */
static const char *only_msg(const struct nftmsg *m, size_t off, size_t len, uint16_t type, uint16_t attr,
                            size_t *ret_n) {
        const char *s = NULL;
        size_t n = 0;
        for (size_t o = off; o < off + len; n++) {
                const struct nlmsghdr *nlh = (const struct nlmsghdr *) (m->b.data + o);
                const struct nlattr *a;
                o += NLMSG_ALIGN(nlh->nlmsg_len);
                if ((nlh->nlmsg_type & 0xff) != type)
                        continue;
                mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                        if (mnl_attr_get_type(a) == attr)
                                s = mnl_attr_get_str(a);
                }
        }
        *ret_n = n;
        return s;
}

/* svc-d: ClientIP affinity, two endpoints (cluster_small()'s). */
static void test_collects(void) {
        struct fixture f;
        struct nftsync_unit u;
        size_t n;
        fixture_init(&f, 0);
        nftsync_unit_init(&u, 4, 0, &f.ids);
        CHECK(nftsync_unit_render(&u, f.m, &f.p, "ns/svc-d", NULL, NULL, NULL, NULL) == 0);
        /* An endpoint- chain per endpoint, then (each object after those
         * it refers to) the service- chain; an affinity set per endpoint;
         * its cluster IP in cluster-ips and service-ips. */
        size_t endpoints = u.n_st;
        CHECK(endpoints >= 2 && u.n_ch == 1 + endpoints && u.n_el == 2);
        const char *service = u.ch[u.n_ch - 1].name;
        CHECK(strncmp(service, "service-", 8) == 0 && strstr(service, "-ns/svc-d/tcp/http"));
        for (size_t i = 0; i < u.n_ch; i++) {
                const char *name = only_msg(&u.chains, u.ch[i].chain_off, u.ch[i].chain_len, NFT_MSG_NEWCHAIN,
                                            NFTA_CHAIN_NAME, &n);
                CHECK(n == 1);
                CHECK_STREQ(name, u.ch[i].name);
                name = only_msg(&u.rules, u.ch[i].rules_off, u.ch[i].rules_len, NFT_MSG_NEWRULE, NFTA_RULE_CHAIN, &n);
                CHECK(n >= 1);
                CHECK_STREQ(name, u.ch[i].name);
                CHECK(u.ch[i].hash != 0);
                for (size_t j = 0; j < i; j++)
                        CHECK(strcmp(u.ch[i].name, u.ch[j].name) != 0);
        }
        for (size_t i = 0; i < u.n_st; i++) {
                const char *name = only_msg(&u.sets, u.st[i].off, u.st[i].len, NFT_MSG_NEWSET, NFTA_SET_NAME, &n);
                CHECK(n == 1 && u.st[i].timeout == 600 && strncmp(u.st[i].name, "affinity-", 9) == 0);
                CHECK_STREQ(name, u.st[i].name);
        }
        char set[64];
        uint8_t key[NFTMSG_KEY_MAX];
        size_t key_len;
        for (size_t i = 0; i < u.n_el; i++) {
                const char *name = only_msg(&u.elems, u.el[i].off, u.el[i].len, NFT_MSG_NEWSETELEM,
                                            NFTA_SET_ELEM_LIST_SET, &n);
                CHECK(n == 1 && nftsync_elemid_parse(u.el[i].id, set, sizeof set, key, &key_len) == 0);
                CHECK_STREQ(name, set);
                CHECK(key[0] == 10 && key[1] == 96 && key[2] == 0 && key[3] == 13);
        }
        CHECK(!u.unencoded);
        nftsync_unit_done(&u);
        fixture_done(&f);
}

/* The record of a unit, with its elements claimed, and a render compared
 * with it. */
static struct nftsync_rec *record(const struct nftsync_unit *u, const char *key) {
        char *end;
        struct nftsync_rec *r = nftsync_unit_record(u, key, &end);
        for (size_t i = 0; i < u->n_el; i++)
                nftsync_rec_add_elem(r, &end, u->el[i].id, u->el[i].value);
        return r;
}

static void test_record_and_like(void) {
        struct fixture f;
        struct nftsync_unit u;
        fixture_init(&f, 0);
        nftsync_unit_init(&u, 4, 0, &f.ids);
        CHECK(nftsync_unit_render(&u, f.m, &f.p, "ns/svc-a", NULL, NULL, NULL, NULL) == 0);
        struct nftsync_rec *r = record(&u, "ns/svc-a");
        char **names = nftsync_rec_names(r);
        for (size_t i = 0; i < u.n_ch; i++)
                CHECK_STREQ(names[i], u.ch[i].name);
        CHECK(names[u.n_ch] == NULL);
        free(names);
        CHECK(nftsync_unit_same(&u, r));
        CHECK(!nftsync_unit_same(&u, NULL));

        /* The same render compared with the record: nothing encoded. */
        CHECK(nftsync_unit_render(&u, f.m, &f.p, "ns/svc-a", NULL, r, NULL, NULL) == 0);
        CHECK(u.unencoded && u.chains.b.len == 0 && u.rules.b.len == 0 && u.elems.b.len == 0);
        CHECK(nftsync_unit_same(&u, r));

        /* Without the 8 hashed characters of its names, still the same. */
        u.unhashed_ok = true;
        CHECK(nftsync_unit_render(&u, f.m, &f.p, "ns/svc-a", NULL, r, NULL, NULL) == 0);
        CHECK(u.unhashed && nftsync_unit_same(&u, r) && u.chains.b.len == 0);
        u.unhashed_ok = false;

        /* A third endpoint: the new endpoint chain and the rewritten
         * service chain are encoded, the two old endpoint chains not. */
        cluster_endpoints(f.m, "svc-a", 1, 3);
        CHECK(nftsync_unit_render(&u, f.m, &f.p, "ns/svc-a", NULL, r, NULL, NULL) == 0);
        CHECK(!nftsync_unit_same(&u, r) && u.n_ch == 4);
        size_t encoded = 0;
        for (size_t i = 0; i < u.n_ch; i++)
                encoded += u.ch[i].chain_len > 0;
        CHECK(encoded == 2 && u.ch[0].chain_len == 0 && u.ch[1].chain_len == 0 && u.ch[3].chain_len > 0);
        nftsync_rec_free(r);
        nftsync_unit_done(&u);
        fixture_done(&f);
}

/* A full sync without anything to read back encodes straight into the
 * family's batch: sets, chains and rules, in the renderer's order, and
 * nothing stays in the unit but the names; elements stay (they go in the
 * last transaction). */
static void test_direct(void) {
        struct fixture f;
        struct nftsync_unit u;
        struct nftmsg batch;
        fixture_init(&f, 0);
        nftmsg_init(&batch, 4, 0);
        nftsync_unit_init(&u, 4, 0, &f.ids);
        u.direct = &batch;
        CHECK(nftsync_unit_render(&u, f.m, &f.p, "ns/svc-d", NULL, NULL, NULL, NULL) == 0);
        size_t rules = 0;
        for (size_t o = 0; o < batch.b.len; rules++)
                o += NLMSG_ALIGN(((const struct nlmsghdr *) (batch.b.data + o))->nlmsg_len);
        CHECK(u.sets.b.len == 0 && u.chains.b.len == 0 && u.rules.b.len == 0 && u.elems.n == 2);
        CHECK(batch.n == rules && batch.n > u.n_ch + u.n_st);
        for (size_t i = 0; i < u.n_ch; i++)
                CHECK(u.ch[i].chain_len == 0 && u.ch[i].rules_len == 0);
        nftsync_unit_done(&u);
        nftmsg_done(&batch);
        fixture_done(&f);
}

/* With shards, a service's nat side (its chains, affinity sets,
 * service-ips element) is its shard's, the rest the main table's: one
 * render fills both units. */
static void test_shard_and_side(void) {
        struct fixture f;
        struct nftsync_unit u, side;
        struct nftmsg side_ids;
        fixture_init(&f, 2);
        unsigned shard = render_nft_shard("ns/svc-d", 2);
        CHECK(shard >= 1 && shard <= 2);
        nftsync_unit_init(&u, 4, shard, &f.ids);
        nftmsg_init(&side_ids, 4, 0);
        nftsync_unit_init(&side, 4, 0, &side_ids);
        CHECK(nftsync_unit_render(&u, f.m, &f.p, "ns/svc-d", NULL, NULL, &side, NULL) == 0);
        CHECK(u.n_ch >= 3 && u.n_st >= 2 && side.n_ch == 0 && side.n_st == 0);
        CHECK(u.n_el == 1 && side.n_el == 1);   /* service-ips in the shard, cluster-ips in the main table */
        char set[64];
        uint8_t key[NFTMSG_KEY_MAX];
        size_t len;
        CHECK(nftsync_elemid_parse(u.el[0].id, set, sizeof set, key, &len) == 0 && strcmp(set, "service-ips") == 0);
        CHECK(nftsync_elemid_parse(side.el[0].id, set, sizeof set, key, &len) == 0 && strcmp(set, "cluster-ips") == 0);
        /* The other shard has nothing of it. */
        struct nftsync_unit other;
        nftsync_unit_init(&other, 4, 3 - shard, &f.ids);
        CHECK(nftsync_unit_render(&other, f.m, &f.p, "ns/svc-d", NULL, NULL, NULL, NULL) == 0);
        CHECK(other.n_ch + other.n_st + other.n_el == 0);
        nftsync_unit_done(&other);
        nftsync_unit_done(&u);
        nftsync_unit_done(&side);
        nftmsg_done(&side_ids);
        fixture_done(&f);
}

/* A service the model does not have leaves the unit empty. */
static void test_gone(void) {
        struct fixture f;
        struct nftsync_unit u;
        fixture_init(&f, 0);
        nftsync_unit_init(&u, 4, 0, &f.ids);
        CHECK(nftsync_unit_render(&u, f.m, &f.p, "ns/svc-a", NULL, NULL, NULL, NULL) == 0 && u.n_ch > 0);
        CHECK(nftsync_unit_render(&u, f.m, &f.p, "ns/no-such", NULL, NULL, NULL, NULL) == 0);
        CHECK(u.n_ch + u.n_st + u.n_el == 0 && u.chains.b.len == 0);
        nftsync_unit_done(&u);
        fixture_done(&f);
}

int main(void) {
        TEST_RUN(test_collects);
        TEST_RUN(test_record_and_like);
        TEST_RUN(test_direct);
        TEST_RUN(test_shard_and_side);
        TEST_RUN(test_gone);
        TEST_DONE();
}
