/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Tests that need a network of their own: the calling process (all its
 * threads and later children) moves into a new network namespace, which
 * ends with it, so there is nothing to clean up.
 */

/* unshare(CLONE_NEWNET) and its loopback brought up. Returns 0 or -errno
 * (-EPERM without root: the caller skips). */
int test_netns_enter(void);
