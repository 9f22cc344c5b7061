/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * One sync of the family's tables, as the parts that sync one table see
 * it: the model and parameters, and for a full sync or a resync the
 * model's services in key order with the table each one's nat side goes
 * to, and (a resync with shards) what the shards' passes found of the
 * main table. nftsync.c makes it and passes it down; no part reaches the
 * family's tables for it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hmap;
struct inet_cidr;
struct model;
struct render_params;
struct svc;

struct nftsync_pass {
        const struct model *m;
        const struct render_params *p;
        const struct inet_cidr *service_cidrs;  /* the fixed part's (full syncs, resyncs) */
        size_t n_service_cidrs;
        const struct svc **svcs;                /* a full sync's and a resync's: in key order */
        const uint8_t *shards;                  /* the table of each one's nat side (render_nft_shard()) */
        size_t n_svcs;
        /* A resync with shards: a shard's render of a service holds its
         * main-table objects too, so the shards' passes compare them with
         * the main table's records (main_recs) and mark in main_same those
         * found the same, which the main table's pass then leaves out. */
        const struct hmap *main_recs;
        bool *main_same;                        /* per service of svcs, or NULL */
};

/* Whether the pass's i-th service has objects in table: the main table
 * (0) has every service's filter side, a shard only its own services' nat
 * side. */
static inline bool nftsync_pass_holds(const struct nftsync_pass *ps, unsigned table, size_t i) {
        return table == 0 || ps->shards[i] == table;
}
