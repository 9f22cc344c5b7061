/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Tests that need a network of their own: the calling process (all its
 * threads and later children) moves into a new network namespace, which
 * ends with it, so there is nothing to clean up.
 */

/* unshare(CLONE_NEWNET) and its loopback brought up; without root, in a
 * user namespace of its own too (uid and gid 0 inside, mapped to the
 * caller's), which owns the network namespace: everything the tests do in
 * it (addresses, nf_tables, iptables-nft, sockets) needs no privilege of
 * the machine's. Call it before starting threads. Returns 0 or -errno
 * (-EPERM where unprivileged user namespaces are off: the caller skips). */
int test_netns_enter(void);
