/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A unit: one service (or the fixed part) rendered into scratch messages,
 * for one table: its chains, sets and elements with their names, digests
 * and ids, and where each one's bytes are, so that a diff can copy just
 * the changed pieces into a transaction. The unit is the renderer's sink
 * (render/nftir.h); its layout is here because the diff, the full sync and
 * the element owners read it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/nftables/nftsync-elemid.h"
#include "proxy/nftables/nftsync-name.h"
#include "render/nftir.h"
#include "render/nftmsg.h"

struct model;
struct nftsync_rec;
struct render_params;
struct svc;

struct nftsync_unit_chain {
        char *name;
        uint64_t hash;
        size_t chain_off, chain_len;    /* its NEWCHAIN in u->chains */
        size_t rules_off, rules_len;    /* its rules (and their anonymous sets) in u->rules */
};

struct nftsync_unit_set {
        char *name;
        uint32_t timeout;
        size_t off, len;
};

struct nftsync_unit_elem {
        char id[NFTSYNC_ELEMID_MAX];
        uint64_t value;
        size_t off, len;
};

struct nftsync_unit {
        uint16_t table;                 /* the objects kept; the others' are dropped */
        struct nftmsg sets, chains, rules, elems;
        struct nftsync_unit_chain *ch;
        size_t n_ch, cap_ch;
        struct nftsync_unit_set *st;
        size_t n_st, cap_st;
        struct nftsync_unit_elem *el;
        size_t n_el, cap_el;
        /* Set: chains and elements the same as its own in the same place
         * are not encoded (their lengths 0), and unencoded says so; a
         * resync needs no bytes for a service that did not change. */
        const struct nftsync_rec *like;
        struct nftsync_name_it like_names;      /* like's, at the last chain rendered */
        const char *like_id;            /* like's id of the next element rendered, or NULL */
        bool unencoded;
        /* A resync's units may be rendered with like and unhashed names
         * (nftir_sink.unhashed: no SHA-256 per chain name): nothing is
         * encoded then, and a service that differs from like is rendered
         * again, whole. */
        bool unhashed_ok, unhashed;
        /* Set (a full sync with nothing to read back: a cold start or a
         * rebuild): sets, chains and rules are encoded straight into it,
         * the family's batch, in the renderer's order (each object after
         * those it refers to), and none of their bytes stay in the unit. */
        struct nftmsg *direct;
        /* The names of ch and st: chunks that never move (pointers into
         * them stay valid), reused from one service to the next. */
        struct nftsync_unit_names *names;
};

/* An empty unit of the family's table; its sets and rules number their
 * set ids in ids' count (the transaction's). */
void nftsync_unit_init(struct nftsync_unit *u, uint8_t family, unsigned table, struct nftmsg *ids);
/* Empties u, keeping its memory for the next service. */
void nftsync_unit_reset(struct nftsync_unit *u);
void nftsync_unit_done(struct nftsync_unit *u);
/* Empties u for a render compared with like (NULL: none) as it goes;
 * unhashed: the render leaves derived names' hashes unset. */
void nftsync_unit_begin(struct nftsync_unit *u, const struct nftsync_rec *like, bool unhashed);
/* The renderer's sink that fills u. */
struct nftir_sink nftsync_unit_sink(struct nftsync_unit *u);

/* Renders one service's objects in u's table into u (begun with like)
 * and, with side (a main-table unit, when u's table is a shard), its
 * main-table objects into side (begun with side_like): a shard's render
 * has them all. known: the service (its table checked by the caller), or
 * NULL to look key up; a service not in the model or not in u's table
 * leaves u empty. Returns 0 or the renderer's -errno. */
int nftsync_unit_render(struct nftsync_unit *u, const struct model *m, const struct render_params *p, const char *key,
                        const struct svc *known, const struct nftsync_rec *like, struct nftsync_unit *side,
                        const struct nftsync_rec *side_like);

/* Whether u is exactly what the record says is in the kernel, in the
 * same order (rendering is deterministic): the common case of a resync,
 * which then needs no diff and keeps the record. */
bool nftsync_unit_same(const struct nftsync_unit *u, const struct nftsync_rec *rec);

/* The record of what u puts in the kernel, with room for its elements:
 * they go at *ret_end when claimed (nftsync_owner_claim()). */
struct nftsync_rec *nftsync_unit_record(const struct nftsync_unit *u, const char *key, char **ret_end);
