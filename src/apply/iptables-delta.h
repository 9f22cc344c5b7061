/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Partial syncs without rewriting the top-level chains whole. Upstream's
 * partial sync still flushes and refills KUBE-SERVICES, KUBE-NODEPORTS and
 * the filter chains on every change: O(services) per change, 2.5 s at 20k
 * services with iptables-nft. This remembers what the last sync left in
 * the chains that are not a service's own (no KUBE-SVC-/SVL-/EXT-/FW-/SEP-
 * prefix) and rewrites a new restore input so that such a chain is
 * - left out when its rules are unchanged (the common case: endpoints
 *   changed, the service's own chains carry the change);
 * - changed with -D of the rules that went and -I at their final position
 *   of the rules that came, when that is a small part of the chain and the
 *   rules that stay keep their order;
 * - else written whole, as before.
 * The result leaves the chain exactly as the whole input would.
 */
#include <stddef.h>

struct buf;
struct iptables_delta;

struct iptables_delta *iptables_delta_new(void);
void iptables_delta_free(struct iptables_delta *d);

/* Appends input, rewritten as above, to out. Returns how many chains were
 * left out or changed by rule (0: out got input unchanged). Without a
 * remembered state (new, forgotten), out gets input as it is. */
size_t iptables_delta_rewrite(const struct iptables_delta *d, const char *input, size_t len, struct buf *out);

/* The kernel now holds what input (a whole rendered input, not a rewritten
 * one) says: remember its chains. */
void iptables_delta_commit(struct iptables_delta *d, const char *input, size_t len);

/* What the kernel holds is unknown (a failed restore): the next rewrite
 * passes its input unchanged. */
void iptables_delta_forget(struct iptables_delta *d);
