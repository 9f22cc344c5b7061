/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The endpoints of an answer. Internal to src/explain/.
 */
struct explain_ctx;

/* Fills c->r->eps: the chosen chain's endpoints first, with their chances,
 * then the port's others, left out. Returns 0 or -ENOMEM. */
int explain_fill_endpoints(struct explain_ctx *c);
