/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * nftables mode's side effects, over nf_tables netlink. This header is, for
 * its callers, the one include of the whole interface, each part in its own
 * file:
 *
 *   nftables-handle.h    the handle: opening, closing, asking (nftables-internal.h)
 *   nftables-link.h      what the handle talks through: the kernel's socket,
 *                        or a test's in-memory kernel
 *   nftables-commit.h    a batch (render/nftmsg.h builds it) as one transaction
 *   nftables-dump.h      what the tables ("kube-proxy" and its shards) hold
 *   nftables-readback.h  what chains hold, as digests of their rules
 *   nftables-digest.h    those digests: one canonical form of a rule (pure)
 *   nftables-monitor.h   changes made by anyone else
 *   nftables-cleanup.h   removal (`--cleanup` removes the tables of both
 *                        modes; each mode's daemon removes the other's at
 *                        start, as upstream)
 */
#include "apply/nftables-cleanup.h"
#include "apply/nftables-commit.h"
#include "apply/nftables-digest.h"
#include "apply/nftables-dump.h"
#include "apply/nftables-handle.h"
#include "apply/nftables-link.h"
#include "apply/nftables-monitor.h"
#include "apply/nftables-readback.h"
