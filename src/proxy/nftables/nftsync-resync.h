/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A resync of one table: a full sync that trusts the records.
 */
#include <stddef.h>

struct inet_cidr;
struct model;
struct nftsync_stats;
struct nftsync_table;
struct render_params;

/* Renders the fixed part and every service of s's table again and diffs
 * each against its record, as a partial sync of everything, and removes
 * what the table holds that no record wants. Only valid after a
 * successful sync, when nobody else has changed the table since. Queued
 * in the family's batch, in transactions of about the size bound.
 * Returns 0 or -errno (logged when the kernel's). */
int nftsync_resync_table(struct nftsync_table *s, const struct model *m, const struct render_params *p,
                         const struct inet_cidr *service_cidrs, size_t n_service_cidrs, struct nftsync_stats *st);
