/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The handle on nf_tables (apply/nftables.h): a netlink link to the
 * kernel, or to a test's in-memory kernel. The parts ask through it
 * (nftables-internal.h); the bottom of apply/nftables*.
 */
#include <stdint.h>

#include "apply/nftables-link.h"

struct nftables;

/* Opens a handle on the kernel's nf_tables (a netlink socket). Returns 0
 * or -errno. */
int nftables_open(struct nftables **ret);
/* Opens a handle that talks through open(kernel, ...)'s links instead:
 * the first now, another when chains are first read back. Returns 0 or
 * open's error. */
int nftables_open_on(nftables_link_open_fn open, void *kernel, struct nftables **ret);
struct nftables *nftables_close(struct nftables *n);

/* The netlink port id the kernel stamps on notifications of our changes. */
uint32_t nftables_portid(const struct nftables *n);
