/* SPDX-License-Identifier: Apache-2.0 */
/* apply/iptables-chains: iptables mode's fixed chains per table, and which
 * chains --cleanup takes as its own. */
#include <stdbool.h>
#include <string.h>

#include "apply/iptables-chains.h"
#include "test.h"

static bool listed(const char *table, const char *chain) {
        size_t n = 0;
        const char *const *v = iptables_fixed_chains(table, &n);

        for (size_t i = 0; i < n; i++)
                if (strcmp(v[i], chain) == 0)
                        return true;
        return false;
}

static void test_fixed_chains(void) {
        size_t n = 99;

        /* Upstream's iptables proxier makes these on every full sync. */
        CHECK(listed("nat", "KUBE-SERVICES") && listed("nat", "KUBE-NODEPORTS") &&
              listed("nat", "KUBE-POSTROUTING") && listed("nat", "KUBE-MARK-MASQ"));
        CHECK(listed("filter", "KUBE-SERVICES") && listed("filter", "KUBE-EXTERNAL-SERVICES") &&
              listed("filter", "KUBE-FORWARD") && listed("filter", "KUBE-NODEPORTS") &&
              listed("filter", "KUBE-PROXY-FIREWALL"));
        /* The canary is in all three tables; mangle holds nothing else. */
        CHECK(listed("nat", "KUBE-PROXY-CANARY") && listed("filter", "KUBE-PROXY-CANARY"));
        CHECK(iptables_fixed_chains("mangle", &n) != NULL && n == 1 && listed("mangle", "KUBE-PROXY-CANARY"));
        /* kubelet's chains are not iptables mode's marks. */
        CHECK(!listed("filter", "KUBE-FIREWALL") && !listed("nat", "KUBE-MARK-DROP") &&
              !listed("nat", "KUBE-KUBELET-CANARY"));
        /* Per-service chains are not fixed; KUBE-MARK-MASQ is nat's only. */
        CHECK(!listed("nat", "KUBE-SVC-67NZLRHBNDSAWJRO") && !listed("filter", "KUBE-MARK-MASQ"));
        CHECK(iptables_fixed_chains("raw", &n) == NULL && n == 0);
}

static void test_chain_is_proxys(void) {
        /* nat: the fixed chains and every per-service chain. */
        CHECK(iptables_chain_is_proxys("nat", "KUBE-SERVICES"));
        CHECK(iptables_chain_is_proxys("nat", "KUBE-SVC-67NZLRHBNDSAWJRO"));
        CHECK(iptables_chain_is_proxys("nat", "KUBE-SEP-FZQ6KZLGXRSKN2AD"));
        CHECK(iptables_chain_is_proxys("nat", "KUBE-EXT-67NZLRHBNDSAWJRO"));
        CHECK(!iptables_chain_is_proxys("nat", "KUBE-KUBELET-CANARY"));
        CHECK(!iptables_chain_is_proxys("nat", "POSTROUTING"));
        /* filter: the fixed chains only, and never kubelet's firewall. */
        CHECK(iptables_chain_is_proxys("filter", "KUBE-PROXY-FIREWALL"));
        CHECK(!iptables_chain_is_proxys("filter", "KUBE-FIREWALL"));
        CHECK(!iptables_chain_is_proxys("filter", "KUBE-SVC-67NZLRHBNDSAWJRO"));
        /* mangle: the canary; other tables: nothing. */
        CHECK(iptables_chain_is_proxys("mangle", "KUBE-PROXY-CANARY"));
        CHECK(!iptables_chain_is_proxys("mangle", "KUBE-SERVICES"));
        CHECK(!iptables_chain_is_proxys("raw", "KUBE-SERVICES"));
}

int main(void) {
        TEST_RUN(test_fixed_chains);
        TEST_RUN(test_chain_is_proxys);
        TEST_DONE();
}
