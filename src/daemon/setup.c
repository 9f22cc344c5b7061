/* SPDX-License-Identifier: Apache-2.0 */
#include "daemon/setup.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "apply/conntrack-limits.h"
#include "apply/sysctl.h"
#include "config/config.h"
#include "host/host.h"
#include "proxy/backend.h"
#include "util/log.h"

int setup_node(const struct kproxy_config *c, const struct backend_ops *ops, const char *node_name, const char *root,
               struct host_facts *ret_host) {
        struct conntrack_limits l;
        int r, q;

        /* A mode without conntrack's NAT (userspace) leaves conntrack as
         * it is: on the nodes it is for, there may be none. */
        r = 0;
        if (ops->conntrack) {
                conntrack_limits_from_config(&c->conntrack, conntrack_limits_cpus(root), &l);
                r = conntrack_limits_apply(root, &l);
        }
        q = host_probe(ret_host);
        if (q < 0)
                return q;
        if (root) {
                /* The probe reads the machine's own tcp_be_liberal; with a
                 * scratch root, the scratch tree's value is the truth. */
                uint64_t v;
                ret_host->tcp_be_liberal = sysctl_read_u64(root, "/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal",
                                                           &v) == 0 && v != 0;
        }
        q = ops->setup ? ops->setup(c, ret_host, node_name, root) : 0;
        if (q < 0 && r == 0)
                r = q;
        return r;
}

int setup_oom_score_adj(const struct kproxy_config *c, const char *root) {
        char path[4096];

        if (!c->has_oom_score_adj)
                return 0;
        snprintf(path, sizeof path, "%s/proc/self/oom_score_adj", root ? root : "");
        /* Signed, so not sysctl_read_u64(): compare the text. */
        char want[16], have[16] = "";
        snprintf(want, sizeof want, "%" PRIi32, c->oom_score_adj);
        FILE *f = fopen(path, "re");
        if (f) {
                if (!fgets(have, sizeof have, f))
                        have[0] = '\0';
                have[strcspn(have, "\n")] = '\0';
                fclose(f);
        }
        if (strcmp(have, want) == 0)
                return 0;
        int r = sysctl_write(NULL, path, want);
        if (r < 0)
                return log_warning_errno(r, "Failed to set oom_score_adj to %s (lowering it needs CAP_SYS_RESOURCE); "
                                            "kproxy's is %s",
                                         want, have[0] ? have : "unknown");
        log_v(2, "Set oom_score_adj to %s", want);
        return 0;
}
