/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Element ids: every set and key comes back from its id, ids are short and
 * never hold a newline, what is not an id is refused, and a deletion by id
 * is the message for that set and key.
 */
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "proxy/nftables/nftsync-elemid.h"
#include "render/nftmsg.h"
#include "test.h"

/* The renderer's maps, and others (one with a slash in its name). */
static const char *const sets[] = {"cluster-ips", "service-ips", "service-nodeports", "no-endpoint-services",
                                   "no-endpoint-nodeports", "firewall-ips", "nodeport-ips",
                                   "affinity-ABCDEFGH-ns/svc/tcp/p__10.0.0.1/80", "a-set-of-someone-else"};

static void test_round_trip(void) {
        uint64_t x = 0x9e3779b97f4a7c15ull;
        for (size_t s = 0; s < sizeof sets / sizeof *sets; s++)
                for (size_t n = 0; n <= NFTMSG_KEY_MAX; n += (n < 4 ? 1 : 4)) {
                        uint8_t key[NFTMSG_KEY_MAX], back[NFTMSG_KEY_MAX];
                        char id[NFTSYNC_ELEMID_MAX], set[64];
                        size_t len = 99;
                        for (size_t i = 0; i < n; i++) {
                                x = x * 6364136223846793005ull + 1442695040888963407ull;
                                key[i] = (uint8_t) (x >> 56);
                        }
                        nftsync_elemid(sets[s], key, n, id);
                        CHECK(strlen(id) < NFTSYNC_ELEMID_MAX && !strchr(id, '\n') && !strchr(id, ' '));
                        CHECK(nftsync_elemid_parse(id, set, sizeof set, back, &len) == 0);
                        CHECK_STREQ(set, sets[s]);
                        /* Six bits a character: the key's bytes, then the
                         * zero bits that fill its last character. */
                        CHECK(len >= n && len < n + 1 + n / 3 && memcmp(back, key, n) == 0);
                }
}

/* The renderer's sets take one byte: "service-ips" and a 12-byte key in
 * 17 characters. */
static void test_short(void) {
        const uint8_t key[12] = {10, 96, 0, 10, 6, 0, 0, 0, 0, 80, 0, 0};
        char id[NFTSYNC_ELEMID_MAX];
        nftsync_elemid("service-ips", key, sizeof key, id);
        CHECK(strlen(id) == 17 && id[0] == 2);
        nftsync_elemid("someone-elses", key, sizeof key, id);
        CHECK(strncmp(id, "someone-elses/", 14) == 0 && strlen(id) == 14 + 16);
}

static void test_bad_ids(void) {
        char set[64];
        uint8_t key[NFTMSG_KEY_MAX];
        size_t len;
        char too_long[80];
        memset(too_long, 'A', sizeof too_long - 1);
        too_long[0] = 1;
        too_long[sizeof too_long - 1] = '\0';
        CHECK(nftsync_elemid_parse("no-slash-no-code", set, sizeof set, key, &len) == -EINVAL);
        CHECK(nftsync_elemid_parse("\002AB*D", set, sizeof set, key, &len) == -EINVAL);
        CHECK(nftsync_elemid_parse(too_long, set, sizeof set, key, &len) == -EINVAL);
        CHECK(nftsync_elemid_parse("a-set/AB", set, 4, key, &len) == -EINVAL);    /* no room for the set */
        char out[128];
        CHECK_STREQ(nftsync_elemid_show("no-slash-no-code", out, sizeof out), "(bad id)");
}

static void test_show(void) {
        const uint8_t key[12] = {192, 0, 2, 50, 6, 0, 0, 0, 0, 80, 0, 0};
        char id[NFTSYNC_ELEMID_MAX], out[128];
        nftsync_elemid("service-ips", key, sizeof key, id);
        CHECK_STREQ(nftsync_elemid_show(id, out, sizeof out), "service-ips c00002320600000000500000");
}

/* The deletion is a DELSETELEM of the table's set with exactly the key. */
static void test_del(void) {
        const uint8_t key[8] = {6, 0, 0, 0, 0x75, 0x31, 0, 0};
        char id[NFTSYNC_ELEMID_MAX];
        struct nftmsg m;
        nftsync_elemid("service-nodeports", key, sizeof key, id);
        nftmsg_init(&m, 4, 0);
        m.table = 2;
        nftsync_elemid_del(&m, id);
        nftsync_elemid_del(&m, "not an id");
        CHECK(m.n == 1);
        const struct nlmsghdr *nlh = (const struct nlmsghdr *) m.b.data;
        CHECK((nlh->nlmsg_type & 0xff) == NFT_MSG_DELSETELEM);
        const struct nlattr *a, *el, *k, *v;
        const char *table = NULL, *set = NULL;
        const uint8_t *got = NULL;
        size_t got_len = 0;
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
                if (mnl_attr_get_type(a) == NFTA_SET_ELEM_LIST_TABLE)
                        table = mnl_attr_get_str(a);
                else if (mnl_attr_get_type(a) == NFTA_SET_ELEM_LIST_SET)
                        set = mnl_attr_get_str(a);
                else if (mnl_attr_get_type(a) == NFTA_SET_ELEM_LIST_ELEMENTS)
                        mnl_attr_for_each_nested(el, a) mnl_attr_for_each_nested(k, el) {
                                if (mnl_attr_get_type(k) != NFTA_SET_ELEM_KEY)
                                        continue;
                                mnl_attr_for_each_nested(v, k) {
                                        got = mnl_attr_get_payload(v);
                                        got_len = mnl_attr_get_payload_len(v);
                                }
                        }
        }
        CHECK_STREQ(table, "kube-proxy-2");
        CHECK_STREQ(set, "service-nodeports");
        CHECK(got && got_len == sizeof key && memcmp(got, key, sizeof key) == 0);
        nftmsg_done(&m);
}

int main(void) {
        TEST_RUN(test_round_trip);
        TEST_RUN(test_short);
        TEST_RUN(test_bad_ids);
        TEST_RUN(test_show);
        TEST_RUN(test_del);
        TEST_DONE();
}
