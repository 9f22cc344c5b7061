/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * nftables mode's walk: the route through its table's chains and maps.
 * Internal to src/explain/.
 */
struct explain_ctx;

/* The walk of c->route through nftables mode's chains, and the chain of
 * each endpoint in c->r->eps. */
void explain_walk_nftables(struct explain_ctx *c);
