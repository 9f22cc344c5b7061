/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The netlink back-end of the nftables description: nf_tables messages for
 * kproxy's tables (render/nftir.h), appended to a buffer that becomes one batch
 * (transaction). Pure: builds bytes, never sends them (apply/nftables.h
 * does). The expressions are the ones nft 1.0.6 generates for the same
 * script text, so `nft list` shows the daemon's table exactly as it shows
 * `nft -f` of `kproxy render`'s output (tests/netns/test-nftmsg.sh proves
 * it against the kernel).
 *
 * Messages are encoded with libmnl's attribute helpers straight into one
 * growing buffer: no allocation per rule (libnftnl's object model costs
 * about 0.6 µs per rule, measured: half a second at 20k services).
 *
 * This header is, for its callers, the one include of the whole encoder:
 *
 *   nftmsg-stream.h    the message stream: a buffer of messages, batches
 *   nftmsg-object.h    the table, sets and maps, chains, and their removal
 *   nftmsg-rule.h      a chain's rules (nftmsg-interval.h: their anonymous sets)
 *   nftmsg-elem.h      map and set elements
 */
#include "render/nftmsg-elem.h"
#include "render/nftmsg-object.h"
#include "render/nftmsg-rule.h"
#include "render/nftmsg-stream.h"
