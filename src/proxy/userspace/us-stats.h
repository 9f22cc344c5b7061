/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What userspace mode shows: its kproxy_userspace_ metric families and
 * its /debug/backend text. Private to proxy/userspace/; reads the
 * frontends and addresses, changes nothing.
 */
struct buf;
struct us_addrs;
struct us_frontends;

void us_stats_expose(const struct us_frontends *f, struct buf *out);
void us_stats_describe(const struct us_addrs *a, const struct us_frontends *f, struct buf *out);
