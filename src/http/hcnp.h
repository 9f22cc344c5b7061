/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Per-service health-check node ports: for every LoadBalancer Service with
 * externalTrafficPolicy Local (spec.healthCheckNodePort), a listener that
 * cloud load balancers probe to learn whether this node has local
 * endpoints, answering as upstream kube-proxy's health-check server does.
 * Listeners open and close as services come and go (libmicrohttpd on the
 * event loop).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/inet.h"

struct ev_loop;
struct hcnp;

struct hcnp_service {
        const char *ns, *name;
        uint16_t port;                  /* spec.healthCheckNodePort */
        size_t local_endpoints;         /* this node's ready endpoints */
};

int hcnp_new(struct ev_loop *l, struct hcnp **ret);
struct hcnp *hcnp_free(struct hcnp *h);

/* Makes the listeners match svcs (several services may not share a port:
 * the first wins, the others are logged). addrs: the node addresses to
 * listen on (nodePortAddresses), or n_addrs 0 for every address. Opens new
 * ports, closes ports no longer wanted, updates the counts of the others.
 * Returns 0 or the first -errno (each failure is logged naming the service
 * and port; the others are still served). */
int hcnp_sync(struct hcnp *h, const struct hcnp_service *svcs, size_t n, const struct inet_addr *addrs,
              size_t n_addrs);
/* The proxy's own health, reported as serviceProxyHealthy. */
void hcnp_set_proxy_healthy(struct hcnp *h, bool healthy);
/* The port a service's listener is bound to (its healthCheckNodePort), or
 * 0 if none: for tests. */
size_t hcnp_count(const struct hcnp *h);
