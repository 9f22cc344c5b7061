/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Userspace mode's service addresses: host addresses on kube-proxy0, each
 * held while a service wants it (a count of the services), and per family
 * the addresses each service wants (what a partial sync of that service
 * lets go of). Private to proxy/userspace/.
 */
#include <stdbool.h>
#include <stdint.h>

#include "util/hmap.h"

struct buf;
struct ifaddr;
struct userspace_plan;

#define US_LINK "kube-proxy0"

struct us_addrs {
        struct ifaddr *ia;              /* rtnetlink on kube-proxy0 */
        struct hmap held;               /* address text -> struct us_held_addr */
        struct hmap svc[2];             /* per family: service key -> struct us_svc_addrs */
};

/* Opens rtnetlink for kube-proxy0. Returns 0 or -errno (logged). */
int us_addrs_init(struct us_addrs *a);
void us_addrs_done(struct us_addrs *a);

/* kube-proxy0 exists and is up. Returns 0 or -errno (logged). */
int us_addrs_link_ensure(struct us_addrs *a);
/* Whether kube-proxy0 is there (false: someone deleted it). */
bool us_addrs_link_present(struct us_addrs *a);

/* What the interface holds of family, as if this process had added it
 * and nobody wanted it yet (a full sync trusts only the kernel: a
 * predecessor's addresses, or someone's deletions). Returns 0 or -errno
 * (logged). */
int us_addrs_read(struct us_addrs *a, uint8_t family);
/* Before a sync that plans every service: nothing of family is wanted yet. */
void us_addrs_forget(struct us_addrs *a, uint8_t family);
/* Before a partial sync: the service key lets go of what it wanted. */
void us_addrs_drop(struct us_addrs *a, uint8_t family, const char *key);
/* The plan's addresses wanted, and added to the interface when new.
 * Returns 0 or the first -errno (logged); the others are still taken. */
int us_addrs_take(struct us_addrs *a, uint8_t family, const struct userspace_plan *pl);
/* Removes the family's addresses no service wants. Returns 0 or the first
 * -errno (logged). */
int us_addrs_prune(struct us_addrs *a, uint8_t family);
/* "address A" lines, for /debug/backend. */
void us_addrs_describe(const struct us_addrs *a, struct buf *out);
