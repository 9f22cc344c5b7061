/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nft-readers.h's sequence: every reader of apply/nftables-*.c, then a
 * commit and its replies.
 */
#include "nft-readers.h"

#include <assert.h>
#include <string.h>

#include "apply/nftables-commit.h"
#include "apply/nftables-dump.h"
#include "apply/nftables-readback.h"
#include "render/nftmsg.h"
#include "util/hmap.h"

static void on_target(const char *chain, void *userdata) {
        (void) userdata;
        assert(strlen(chain) < 65536);
}

void nft_readers_run(struct nftables *n, uint8_t mode) {
        /* Chains of the seeds' IPv4 kernel (tests/unit/cluster.h's
         * cluster_small()): maps, an anonymous set, a DNAT, a base chain,
         * a chain's comment (udata), and one that is not there. */
        static const char *const names[] = {
                "services",
                "service-C3SY2S3N-ns/svc-f/tcp/http",
                "firewall-C3SY2S3N-ns/svc-f/tcp/http",
                "endpoint-2Z4DHYBG-ns/svc-a/tcp/http__10.244.1.10/8080",
                "nat-prerouting",
                "reject-chain",
                "x",
        };
        uint8_t family = mode & 1 ? 6 : 4;
        struct hmap chains = HMAP_INIT, sets = HMAP_INIT, digests = HMAP_INIT;
        uint32_t use, gen;
        char err[256];

        nftables_list(n, family, "kube-proxy", &chains, &sets);
        nftables_names_done(&chains);
        nftables_names_done(&sets);
        nftables_table_use(n, family, "kube-proxy", &use);
        nftables_genid(n, &gen);
        nftables_chain_present(n, family, "kube-proxy", "services");
        if (mode & 2)
                nftables_set_dump_messages(n, 32768);
        nftables_rule_digests_walk(n, family, "kube-proxy", names, sizeof names / sizeof names[0], &digests,
                                   on_target, NULL);
        nftables_names_done(&digests);

        struct nftmsg m;
        nftmsg_init(&m, family, 100);
        nftmsg_batch_begin(&m);
        nftmsg_table(&m);
        nftmsg_chain_flush(&m, "services");
        nftmsg_set_flush(&m, "cluster-ips");
        nftmsg_chain_del(&m, "endpoint-X");
        nftmsg_batch_end(&m);
        nftables_commit(n, &m, err, sizeof err);
        nftmsg_done(&m);
}
