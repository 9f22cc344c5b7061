/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Stale UDP conntrack entries (libnetfilter_conntrack). UDP has no
 * connection end: an entry DNAT-ed to an endpoint that has gone, or created
 * while a service had no endpoint, keeps black-holing a client's flow until
 * it times out. After each sync kproxy reconciles, as upstream's reconciler
 * does: an entry whose original destination is a UDP service frontend but
 * whose reply source is not one of that frontend's serving endpoints is
 * deleted. Entries of live flows to serving endpoints are never touched,
 * also not on restart (upstream flushes them all then, #122740).
 */
#include <stddef.h>
#include <stdint.h>

#include "util/inet.h"

struct ct_backend {
        struct inet_addr ip;
        uint16_t port;
};

struct ct_frontend {
        struct inet_addr ip;            /* cluster IP, external IP or LB IP; ignored for NodePorts */
        uint16_t port;                  /* service port, or the node port */
        int node_port;                  /* 1: match any original destination with this port */
        int any_port;                   /* 1: the address itself, on any port (conntrack_flush_unnatted) */
        const struct ct_backend *backends;      /* serving endpoints (may be 0: nothing is valid) */
        size_t n_backends;
};

/* Lists the family's (4 or 6) UDP entries in the current network namespace
 * and deletes the stale ones. Returns the number deleted, or -errno. */
int conntrack_reconcile_udp(uint8_t family, const struct ct_frontend *frontends, size_t n);

/* Deletes the family's DNAT-ed entries, of any protocol, whose original
 * destination is one of frontends (their backends are ignored): after a
 * NAT mode's rules are gone (switching to userspace mode), such an entry
 * would keep a reused client port's new connection on the old binding,
 * which no NAT hook applies any more. Returns the number deleted, or
 * -errno. */
int conntrack_flush_dnat(uint8_t family, const struct ct_frontend *frontends, size_t n);

/* Deletes the family's entries, of any protocol, that are not DNAT-ed and
 * have one of addrs as original source or destination (any port): after
 * userspace mode's service addresses are removed (switching to a NAT mode).
 * Such an entry was made while conntrack saw that mode's own connections;
 * a client that reuses its port would have its new connection matched to
 * it, never DNAT-ed, and sent to an address that is no longer local.
 * Returns the number deleted, or -errno. */
int conntrack_flush_unnatted(uint8_t family, const struct inet_addr *addrs, size_t n);
