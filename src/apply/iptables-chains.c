/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fixed chains are upstream's: iptables mode creates them on every
 * full sync, so their presence in a table marks the mode as much as the
 * per-service chains (KUBE-SVC-... and friends, iptables_chain_owned()) do.
 */
#include "apply/iptables-chains.h"

#include <string.h>

#include "apply/iptables-lines.h"
#include "util/cleanup.h"

static const char *const nat_fixed[] = {"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ",
                                        "KUBE-PROXY-CANARY"};
static const char *const filter_fixed[] = {"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-FORWARD",
                                           "KUBE-NODEPORTS", "KUBE-PROXY-FIREWALL", "KUBE-PROXY-CANARY"};
static const char *const mangle_fixed[] = {"KUBE-PROXY-CANARY"};

const char *const *iptables_fixed_chains(const char *table, size_t *ret_n) {
        if (strcmp(table, "nat") == 0)
                return *ret_n = ELEMENTSOF(nat_fixed), nat_fixed;
        if (strcmp(table, "filter") == 0)
                return *ret_n = ELEMENTSOF(filter_fixed), filter_fixed;
        if (strcmp(table, "mangle") == 0)
                return *ret_n = ELEMENTSOF(mangle_fixed), mangle_fixed;
        *ret_n = 0;
        return NULL;
}

bool iptables_chain_is_proxys(const char *table, const char *chain) {
        const char *const *fixed = NULL;
        size_t n = 0;
        if (strcmp(table, "nat") == 0) {
                if (iptables_chain_owned(chain, strlen(chain)))
                        return true;
                fixed = nat_fixed, n = ELEMENTSOF(nat_fixed);
        } else if (strcmp(table, "filter") == 0) {
                fixed = filter_fixed, n = ELEMENTSOF(filter_fixed);
        } else if (strcmp(table, "mangle") == 0) {
                return strcmp(chain, "KUBE-PROXY-CANARY") == 0;
        }
        for (size_t i = 0; i < n; i++)
                if (strcmp(chain, fixed[i]) == 0)
                        return true;
        return false;
}
