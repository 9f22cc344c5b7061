/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/* Writing a sysctl of the current network namespace, e.g.
 * "net/ipv4/conf/all/route_localnet". Returns 0 or -errno. */
int sysctl_write(const char *name, const char *value);
