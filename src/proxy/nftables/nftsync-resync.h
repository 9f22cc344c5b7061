/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A resync of one table: a full sync that trusts the records.
 */
struct nftsync_pass;
struct nftsync_stats;
struct nftsync_table;

/* Renders the fixed part and every service of s's table again (from the
 * pass) and diffs each against its record, as a partial sync of
 * everything, and removes what the table holds that no record wants. Only
 * valid after a successful sync, when nobody else has changed the table
 * since. Queued in the family's batch, in transactions of about the size
 * bound. Returns 0 or -errno (logged when the kernel's). */
int nftsync_resync_table(struct nftsync_table *s, const struct nftsync_pass *ps, struct nftsync_stats *st);
