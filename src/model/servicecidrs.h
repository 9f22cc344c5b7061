/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The cluster's ServiceCIDRs (networking.k8s.io/v1): each object's CIDRs
 * by name, and their union, which nftables mode turns into its drop rule
 * for unallocated cluster IPs (upstream's proxier gets the complete list
 * on every change, and so does the renderer here). No I/O.
 */
#include <stdbool.h>
#include <stddef.h>

struct inet_cidr;
struct service_cidrs;

struct service_cidrs *service_cidrs_new(void);
struct service_cidrs *service_cidrs_free(struct service_cidrs *s);

/* Sets the CIDRs of object name (copied), or removes it (n == 0). Returns
 * true when the union changed. Aborts on out of memory, as the model does. */
bool service_cidrs_set(struct service_cidrs *s, const char *name, const struct inet_cidr *cidrs, size_t n);

/* The union: sorted (IPv4 first), without duplicates. Borrowed until the
 * next service_cidrs_set(). */
const struct inet_cidr *service_cidrs_all(const struct service_cidrs *s, size_t *ret_n);

/* Calls each(name, ctx) for every object held (after a relist, those not
 * listed are gone). */
void service_cidrs_keys(const struct service_cidrs *s, void (*each)(const char *name, void *ctx), void *ctx);
