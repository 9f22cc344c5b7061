/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: any bytes as netlink messages (as the kernel's dumps
 * deliver them: each within its nlmsg_len, as mnl_nlmsg_ok() passes them)
 * through the rule-digest canonicaliser (apply/nftables-digest.c): the
 * digest of a rule, the spec of a chain, the chains a rule jumps to. Each
 * message is copied into a block of exactly its aligned length (libmnl's
 * attribute walks run to NLMSG_ALIGN(nlmsg_len), where the next message
 * would start; the kernel pads every message to it), so a read past the
 * message is a sanitizer report. mnl_nlmsg_ok() compares nlmsg_len
 * as an int, so it passes a length over 2 GiB; the kernel never sends one,
 * and the walk stops there. The digest is a pure function: the
 * same message twice gives the same digest; a chain's spec is never 0.
 */
#include <assert.h>
#include <libmnl/libmnl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apply/nftables-digest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_target(const char *chain, void *userdata) {
        size_t *n = userdata;
        assert(strlen(chain) < 65536);
        (*n)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        void *copy = malloc(size ? size : 1);
        int left = size > INT32_MAX ? INT32_MAX : (int) size;

        if (!copy)
                abort();
        memcpy(copy, data, size);
        for (const struct nlmsghdr *nlh = copy; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left)) {
                struct nlmsghdr *m;
                size_t targets = 0;

                if (nlh->nlmsg_len > (uint32_t) left)
                        break;
                size_t aligned = NLMSG_ALIGN(nlh->nlmsg_len);
                m = calloc(1, aligned);
                if (!m)
                        abort();
                memcpy(m, nlh, aligned <= (size_t) left ? aligned : nlh->nlmsg_len);
                uint64_t d = nftables_rule_msg_digest(NFTABLES_DIGEST_INIT, m);
                assert(nftables_rule_msg_digest(NFTABLES_DIGEST_INIT, m) == d);
                assert(nftables_chain_spec(m) != 0);
                nftables_rule_targets(m, on_target, &targets);
                free(m);
        }
        free(copy);
        return 0;
}
