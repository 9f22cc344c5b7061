/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The sync loop, with upstream kube-proxy's semantics: API objects come in
 * and only mark services changed (kube/intake.h); syncs run no faster than
 * min-sync-period, have the mode's backend (proxy/backend.h) write only
 * the rules of changed services (partial syncs), and turn into full syncs
 * when needed (first sync, after a failed one, when the backend saw the
 * kernel changed under it, a Node label change, once an hour). Nothing is
 * written before every initial list has completed.
 */
#include <stdbool.h>
#include <stdint.h>

#include "kube/intake.h"

typedef struct json_t json_t;
struct ev_loop;
struct kproxy_config;
struct host_facts;
struct health_server;
struct metrics;
struct hcnp;
struct backend_ops;
struct proxier;

struct proxier_opts {
        const struct kproxy_config *config;
        const struct backend_ops *backend;      /* the mode (proxy/backend.h) */
        /* Optional: a backend synced beside the mode, after its rules, with
         * the same model and changes (--socket-lb: proxy/socklb/backend.h).
         * One that cannot be created is logged and left out: the mode's
         * rules serve everything. */
        const struct backend_ops *companion;
        const struct host_facts *host;          /* probed and set up (daemon/setup.h) */
        const char *node_name;
        struct health_server *health;           /* may be NULL */
        struct metrics *metrics;                /* may be NULL */
        struct hcnp *hcnp;                      /* may be NULL */
        bool ipv6;                              /* also program IPv6 (the backend's ipv6_usable()) */
        bool service_cidrs;                     /* ServiceCIDRs are watched (else never waited for) */
        /* The backend handed the node to a successor (backend_env's
         * handed_over): syncs have stopped; the caller stops its servers.
         * May be NULL. Called from the loop, never during a sync. */
        void (*handed_over)(void *ctx);
        void *ctx;
};

int proxier_new(struct ev_loop *l, const struct proxier_opts *o, struct proxier **ret);
struct proxier *proxier_free(struct proxier *p);

/* An object now looks like obj (upsert), or is gone (obj NULL): see
 * kube/intake.h. An object that fails validation is logged and ignored:
 * its previous good version, if any, stays in effect. */
void proxier_object(struct proxier *p, enum intake_source src, const char *key, const json_t *obj);
/* Calls each(key, ctx) for every object of src the proxier holds (after a
 * relist, those not listed are gone). */
void proxier_keys(struct proxier *p, enum intake_source src, void (*each)(const char *key, void *ctx), void *ctx);
/* The initial list of src has completed. */
void proxier_synced(struct proxier *p, enum intake_source src);

/* After handed_over: forgets the health and metrics servers and the
 * health-check node ports (the caller frees them next). */
void proxier_detach_servers(struct proxier *p);
/* Connections the backend still carries itself (0 for the NAT modes). */
size_t proxier_busy(struct proxier *p);
/* The process is stopping: no more syncs, and the backend takes no new
 * connections. Returns proxier_busy(). */
size_t proxier_quiesce(struct proxier *p);

/* Counters, for logs and tests. */
uint64_t proxier_syncs(const struct proxier *p);
uint64_t proxier_failures(const struct proxier *p);
