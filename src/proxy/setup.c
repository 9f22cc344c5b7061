/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/setup.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "apply/conntrack-limits.h"
#include "apply/nfacct.h"
#include "apply/sysctl.h"
#include "config/config.h"
#include "host/host.h"
#include "render/render.h"
#include "util/log.h"

#define ROUTE_LOCALNET "/proc/sys/net/ipv4/conf/all/route_localnet"

/* Localhost NodePorts need the kernel to route 127/8 to other hosts.
 * Whether they are on is the renderer's decision (IPv4, the flag, loopback
 * in nodePortAddresses); the Node is not needed for it. */
static int ensure_route_localnet(const struct kproxy_config *c, const struct host_facts *h, const char *node_name,
                                 const char *root) {
        struct render_params rp;
        uint64_t cur;
        bool want;

        if (c->mode != PROXY_MODE_IPTABLES)
                return 0;
        if (render_params_init(&rp, 4, c, node_name, NULL, h, NULL) < 0)
                return 0;       /* an invalid configuration is refused before this */
        want = rp.localhost_nodeports;
        render_params_done(&rp);
        if (!want || (sysctl_read_u64(root, ROUTE_LOCALNET, &cur) == 0 && cur == 1))
                return 0;
        log_info("Setting net.ipv4.conf.all.route_localnet=1 for NodePorts on localhost (turn them off with "
                 "--iptables-localhost-nodeports=false, or leave loopback out of --nodeport-addresses)");
        int r = sysctl_write(root, ROUTE_LOCALNET, "1");
        if (r < 0) {
                log_warning_errno(r, "Failed to set net.ipv4.conf.all.route_localnet=1 (NodePorts on localhost "
                                     "will not answer)");
                return sysctl_not_permitted(r) ? 0 : r;
        }
        return 0;
}

int setup_node(const struct kproxy_config *c, const char *node_name, const char *root, struct host_facts *ret_host) {
        struct conntrack_limits l;
        int r, q;

        conntrack_limits_from_config(&c->conntrack, conntrack_limits_cpus(root), &l);
        r = conntrack_limits_apply(root, &l);
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
        if (ret_host->tcp_be_liberal && c->mode == PROXY_MODE_IPTABLES)
                log_info("nf_conntrack_tcp_be_liberal is set: no rule drops conntrack-INVALID packets");
        q = ensure_route_localnet(c, ret_host, node_name, root);
        if (q < 0 && r == 0)
                r = q;
        if (c->mode == PROXY_MODE_IPTABLES)
                ret_host->nfacct = nfacct_ensure_all();
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
