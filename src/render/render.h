/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Renderers: the model, seen through one IP family's proxier parameters, to
 * the text the kernel tools take. Pure functions: no I/O, no clock, no logs.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/inet.h"

struct buf;
struct model;
struct node;
struct svc;

enum detector_kind {
        DETECTOR_NONE,          /* not implemented for this family: no masquerade by source */
        DETECTOR_SOURCE_CIDR,   /* ClusterCIDR, NodeCIDR:   -s CIDR  / ! -s CIDR */
        DETECTOR_INTERFACE,     /* BridgeInterface, InterfaceNamePrefix: -i IF / ! -i IF */
};

struct render_params {
        uint8_t family;                 /* 4 or 6 */
        const char *node_name;
        const char *node_zone;          /* NULL: no zone label */
        struct inet_addr node_ip;       /* primary node IP of the family */
        char mark[16];                  /* masquerade mark, "0x00004000" */
        uint32_t mark_value;            /* the same, as a number */
        bool masquerade_all;
        enum detector_kind detector;
        char detector_arg[64];          /* "10.0.0.0/8", "br0", "veth+" */
        struct inet_cidr detector_cidr; /* DETECTOR_SOURCE_CIDR: detector_arg's CIDR */
        bool localhost_nodeports;       /* effective: IPv4, flag set, loopback in nodePortAddresses */
        bool nodeports_match_all;
        struct inet_addr *nodeport_ips; /* when not match-all: host IPs inside nodePortAddresses */
        size_t n_nodeport_ips;
        size_t n_skipped_nodeport_ips;  /* loopback IPs that cannot carry NodePorts */
        bool random_fully;
        bool nfacct;
        bool tcp_be_liberal;
        bool prefer_same_node;          /* feature gate PreferSameTrafficDistribution */
        size_t large_cluster_endpoints; /* comments dropped above this many endpoints (1000) */
        unsigned nft_shards;            /* nftables: tables for services' nat side (render/nftir.h); 0: none */
};


struct hmap;
struct owned_chains;

/* What a sync asks of the iptables renderer beyond the full ruleset, and
 * what the render reports back. The renderer only reads the inputs: the
 * state that outlives a sync stays with its owner (the iptables backend),
 * which folds the render's fresh chains in (model/owned-chains.h). */
struct render_ipt_sync {
        /* In: service keys ("ns/name") whose own chains must be written;
         * the others' chains are left as they are in the kernel. NULL:
         * write every chain (a full sync). */
        const struct hmap *changed;
        /* In, a full sync: nat chains with kube-proxy's owned prefixes that
         * exist in the kernel now; those no longer used are flushed and
         * deleted (-X). NULL: none known. A partial sync does not read it,
         * except the last part of a full sync in parts, a render of no
         * service (changed empty): then the chains of the owned list count
         * as used. */
        const struct hmap *existing;
        /* In: the chains each service owned after the last sync (NULL:
         * none known). A partial sync deletes the chains a changed service
         * held that it no longer uses; without them it deletes nothing. */
        const struct owned_chains *owned;
        /* Out: the chains of the services written (every service in a full
         * sync), owned by the caller, for owned_chains_merge(owned, fresh,
         * changed); NULL on error. */
        struct owned_chains *fresh;
        /* Out: counts of rules written per table, for metrics and logs;
         * the nat total includes the rules of chains left unchanged. */
        size_t n_filter_rules, n_nat_rules, n_nat_rules_total;
        /* Out: service ports whose Local policy finds no local endpoint. */
        size_t n_no_local_internal, n_no_local_external;
};

struct nftir_sink;

/* nftables mode (upstream's v1.34 layout), described to a sink
 * (render/nftir.h). render_nft_fixed() gives the table, its sets and maps,
 * the base and helper chains and the nodeport-ips elements; service_cidrs
 * (may be NULL) are the cluster's ServiceCIDRs, for the drop rule of
 * unallocated cluster IPs. render_nft_service() gives one service's chains,
 * affinity sets and map elements (nothing for a service without a cluster
 * IP of p->family). Both return 0 or -ENOMEM. */
int render_nft_fixed(const struct render_params *p, const struct inet_cidr *service_cidrs, size_t n_service_cidrs,
                     const struct nftir_sink *sink);
int render_nft_service(const struct model *m, const struct svc *s, const struct render_params *p,
                       const struct nftir_sink *sink);
/* The same, where only table's objects are wanted (nftir_table_name()'s
 * index): with shards, the main table's view of a service leaves out the
 * nat side's chains unbuilt (the sink still gets a few objects of other
 * tables, to drop). */
int render_nft_service_table(const struct model *m, const struct svc *s, const struct render_params *p,
                             const struct nftir_sink *sink, unsigned table);
/* The table that holds the nat side of service key with shards tables
 * (nftir_table_name()'s index): 0 without shards, else 1 .. shards, from
 * a hash of the key alone. */
unsigned render_nft_shard(const char *key, unsigned shards);

/* The nft script of a first full sync for p->family, appended to out: only
 * "add" commands, for an empty kernel, objects before their users. */
int render_nftables(const struct model *m, const struct render_params *p, const struct inet_cidr *service_cidrs,
                    size_t n_service_cidrs, struct buf *out);
struct nftmsg;
/* The same as netlink messages (render/nftmsg.h), appended to out; the
 * caller frames them into a batch. */
int render_nftables_netlink(const struct model *m, const struct render_params *p,
                            const struct inet_cidr *service_cidrs, size_t n_service_cidrs, struct nftmsg *out);

/* The iptables-restore input for p->family (filter and nat tables),
 * appended to out. sync may be NULL: a first full sync on an empty
 * kernel, which is what `kproxy render` prints. Returns 0 or -ENOMEM
 * (sync->fresh is then NULL). */
int render_iptables(const struct model *m, const struct render_params *p, struct render_ipt_sync *sync,
                    struct buf *out);
