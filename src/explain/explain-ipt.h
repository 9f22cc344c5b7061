/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * iptables mode's walk: the route through its chains in upstream's names.
 * Internal to src/explain/.
 */
struct explain_ctx;

/* The walk of c->route through iptables mode's chains, and the chain of
 * each endpoint in c->r->eps. */
void explain_walk_iptables(struct explain_ctx *c);
