/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Committing a batch (render/nftmsg.h builds it) as one nf_tables
 * transaction.
 */
#include <stddef.h>
#include <stdint.h>

struct nftables;
struct nftmsg;

/* Commits m, which must be one whole batch (nftmsg_batch_begin() ... end()),
 * as one transaction: all or nothing. Returns 0, or the error of the first
 * failing message (its type and object name and the kernel's message, if
 * any, are written to err, a buffer of errlen bytes). */
int nftables_commit(struct nftables *n, const struct nftmsg *m, char *err, size_t errlen);
/* What a message does, for the logs ("add chain", "delete element", ...). */
const char *nftables_msg_type_name(uint16_t type);
