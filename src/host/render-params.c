/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the parameters: everything a renderer needs to know about
 * the node and the configuration is decided here, once per family, exactly
 * as upstream's proxier constructor decides it (local-traffic detector,
 * effective localhost NodePorts, nodePortAddresses, node IP, mark), so the
 * renderers stay simple functions of (model, params).
 */
#include "host/render-params.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "host/host.h"
#include "model/model.h"
#include "render/render.h"
#include "util/buf.h"

#define LARGE_CLUSTER_ENDPOINTS 1000

/* The first CIDR of the family in a comma-separated list. */
static int first_cidr_of_family(const char *list, uint8_t family, struct inet_cidr *ret) {
        if (!list)
                return -ENOENT;
        const char *p = list;
        while (*p) {
                size_t len = strcspn(p, ",");
                char tmp[INET_CIDR_STRLEN + 8];
                if (len < sizeof tmp) {
                        memcpy(tmp, p, len);
                        tmp[len] = '\0';
                        struct inet_cidr c;
                        if (inet_cidr_parse(tmp, &c) == 0 && c.addr.family == family) {
                                *ret = c;
                                return 0;
                        }
                }
                p += len + (p[len] == ',');
        }
        return -ENOENT;
}

/* Upstream's node IP choice: --bind-address when it is a specific address
 * of the family, else the Node object's first InternalIP, then ExternalIP,
 * of the family; else loopback. */
static void pick_node_ip(struct render_params *p, const struct kproxy_config *c, const struct node *node,
                         struct buf *warnings) {
        struct inet_addr a;

        if (c->bind_address && inet_addr_parse(c->bind_address, &a) == 0 && a.family == p->family &&
            !inet_addr_is_unspecified(&a)) {
                p->node_ip = a;
                return;
        }
        for (int type = NODE_ADDR_INTERNAL; node && type <= NODE_ADDR_EXTERNAL; type++)
                for (size_t i = 0; i < node->n_addrs; i++)
                        if (node->addrs[i].type == type && node->addrs[i].addr.family == p->family) {
                                p->node_ip = node->addrs[i].addr;
                                return;
                        }
        inet_addr_parse(p->family == 4 ? "127.0.0.1" : "::1", &p->node_ip);
        if (warnings)
                buf_printf(warnings, "no IPv%u address for node %s, using %s as the node IP\n", p->family,
                           p->node_name ? p->node_name : "(unknown)", p->family == 4 ? "127.0.0.1" : "::1");
}

static void pick_detector(struct render_params *p, const struct kproxy_config *c, const struct node *node,
                          struct buf *warnings) {
        struct inet_cidr cidr;

        p->detector = DETECTOR_NONE;
        switch (c->detect_local_mode) {
        case DETECT_LOCAL_CLUSTER_CIDR:
                if (first_cidr_of_family(c->cluster_cidr, p->family, &cidr) == 0) {
                        p->detector = DETECTOR_SOURCE_CIDR;
                        p->detector_cidr = cidr;
                        inet_cidr_format(&cidr, p->detector_arg);
                } else if (warnings) {
                        buf_printf(warnings,
                                   "no IPv%u cluster CIDR given: traffic from outside the cluster to IPv%u "
                                   "cluster IPs is not masqueraded\n",
                                   p->family, p->family);
                }
                break;
        case DETECT_LOCAL_NODE_CIDR:
                for (size_t i = 0; node && i < node->n_pod_cidrs; i++)
                        if (node->pod_cidrs[i].addr.family == p->family) {
                                p->detector = DETECTOR_SOURCE_CIDR;
                                p->detector_cidr = node->pod_cidrs[i];
                                inet_cidr_format(&node->pod_cidrs[i], p->detector_arg);
                                break;
                        }
                if (p->detector == DETECTOR_NONE && warnings)
                        buf_printf(warnings, "node has no IPv%u pod CIDR: local traffic detection is off\n",
                                   p->family);
                break;
        case DETECT_LOCAL_BRIDGE_INTERFACE:
                if (c->bridge_interface && *c->bridge_interface) {
                        p->detector = DETECTOR_INTERFACE;
                        snprintf(p->detector_arg, sizeof p->detector_arg, "%s", c->bridge_interface);
                }
                break;
        case DETECT_LOCAL_INTERFACE_NAME_PREFIX:
                if (c->interface_name_prefix && *c->interface_name_prefix) {
                        p->detector = DETECTOR_INTERFACE;
                        snprintf(p->detector_arg, sizeof p->detector_arg, "%s+", c->interface_name_prefix);
                }
                break;
        default:
                break;
        }
}

static int pick_nodeports(struct render_params *p, const struct kproxy_config *c, const struct host_facts *h,
                          bool localhost_flag, struct buf *warnings) {
        struct inet_cidr *cidrs = calloc(c->n_nodeport_addresses + 1, sizeof *cidrs);
        size_t n = 0;
        bool loopback = false;

        if (!cidrs)
                return -ENOMEM;
        p->nodeports_match_all = false;
        for (size_t i = 0; i < c->n_nodeport_addresses; i++) {
                const char *s = c->nodeport_addresses[i];
                struct inet_cidr cidr;
                if (strcmp(s, "primary") == 0) {
                        cidr.addr = p->node_ip;
                        cidr.prefix = p->family == 4 ? 32 : 128;
                } else if (inet_cidr_parse(s, &cidr) < 0) {
                        if (warnings)
                                buf_printf(warnings, "--nodeport-addresses: \"%s\" is not a CIDR\n", s);
                        free(cidrs);
                        return -EINVAL;
                }
                if (cidr.addr.family != p->family)
                        continue;
                if (cidr.prefix == 0)
                        p->nodeports_match_all = true;
                cidrs[n++] = cidr;
        }
        if (n == 0)
                p->nodeports_match_all = true;
        if (p->family == 4) {
                struct inet_addr lo;
                inet_addr_parse("127.0.0.0", &lo);
                loopback = p->nodeports_match_all;
                for (size_t i = 0; i < n; i++)
                        if (inet_cidr_contains(&cidrs[i], &lo) || inet_addr_is_loopback(&cidrs[i].addr))
                                loopback = true;
        }
        p->localhost_nodeports = p->family == 4 && localhost_flag && loopback;

        if (!p->nodeports_match_all) {
                p->nodeport_ips = calloc(h->n_addrs + 1, sizeof *p->nodeport_ips);
                if (!p->nodeport_ips) {
                        free(cidrs);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < h->n_addrs; i++) {
                        const struct inet_addr *a = &h->addrs[i].addr;
                        bool inside = false;
                        for (size_t j = 0; j < n && !inside; j++)
                                inside = inet_cidr_contains(&cidrs[j], a);
                        if (!inside)
                                continue;
                        if (inet_addr_is_loopback(a) && (p->family == 6 || !localhost_flag)) {
                                char ip[INET_ADDR_STRLEN], why[64];
                                p->n_skipped_nodeport_ips++;
                                if (p->family == 6)
                                        snprintf(why, sizeof why, "not supported on IPv6");
                                else if (!c->iptables.localhost_nodeports)
                                        snprintf(why, sizeof why, "disabled (--iptables-localhost-nodeports=false)");
                                else
                                        snprintf(why, sizeof why, "not supported in %s mode",
                                                 proxy_mode_to_string(c->mode));
                                if (warnings)
                                        buf_printf(warnings,
                                                   "--nodeport-addresses includes %s, but NodePorts on "
                                                   "localhost are %s: skipping it\n",
                                                   inet_addr_format(a, ip), why);
                                continue;
                        }
                        p->nodeport_ips[p->n_nodeport_ips++] = *a;
                }
        }
        free(cidrs);
        return 0;
}

int render_params_init(struct render_params *p, uint8_t family, const struct kproxy_config *c,
                       const char *node_name, const struct node *node, const struct host_facts *h,
                       struct buf *warnings) {
        const struct config_sync *sync = config_mode_sync(c);

        *p = (struct render_params) {
                .family = family,
                .node_name = node_name,
                .node_zone = node ? node->zone : NULL,
                .masquerade_all = sync->masquerade_all,
                .random_fully = h->random_fully,
                .nfacct = h->nfacct,
                .tcp_be_liberal = h->tcp_be_liberal,
                .prefer_same_node = config_feature_enabled(c, "PreferSameTrafficDistribution"),
                .large_cluster_endpoints = LARGE_CLUSTER_ENDPOINTS,
                /* Only nftables mode's renderer shards. */
                .nft_shards = c->nftables_shards > 0 ? (unsigned) c->nftables_shards : 0,
        };
        if (sync->masquerade_bit < 0 || sync->masquerade_bit > 31)
                return -EINVAL;
        /* Go's %#08x: "0x" and eight digits. */
        p->mark_value = 1u << sync->masquerade_bit;
        snprintf(p->mark, sizeof p->mark, "0x%08x", p->mark_value);
        pick_node_ip(p, c, node, warnings);
        pick_detector(p, c, node, warnings);
        /* nftables mode has no localhost NodePorts (docs/reference/nftables-mode.md §3.4): its
         * section of the configuration never turns them on. */
        return pick_nodeports(p, c, h, sync->localhost_nodeports, warnings);
}

void render_params_done(struct render_params *p) {
        free(p->nodeport_ips);
        p->nodeport_ips = NULL;
        p->n_nodeport_ips = 0;
}
