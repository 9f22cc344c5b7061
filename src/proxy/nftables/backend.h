/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * nftables mode behind the backend interface (proxy/backend.h): the
 * object (struct nftables_mode) over one nftsync per family
 * (proxy/nftables/nftsync.h), the watch on its tables, the no-local
 * tally, set-up, clean-up, render.
 */
struct backend_ops;

extern const struct backend_ops backend_nftables;
