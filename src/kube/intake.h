/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * API objects into the model: each watched object is decoded, validated
 * and stored, and what it changed is recorded for the next sync. The
 * first two stages of the data flow (docs/architecture.md):
 *
 *   watch event ──▶ intake: decode, store, mark ──▶ model + changed set ──▶ sync
 *
 * A malformed object is logged (naming the object and field) and leaves
 * its previous good version in effect; it never removes anything. The
 * intake knows nothing of the kernel, the schedule or metrics: it answers
 * each object with what it meant (enum intake_effect), and calls the
 * hooks for what the caller tracks per service.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct json_t json_t;
struct hmap;
struct inet_cidr;
struct model;
struct svc;
struct svc_refusal;
struct admit_policy;
struct intake;

enum intake_source {
        INTAKE_SERVICES,
        INTAKE_SLICES,
        INTAKE_NODE,
        INTAKE_SERVICE_CIDRS,
        _INTAKE_SOURCE_MAX,
};

enum intake_effect {
        INTAKE_SERVICE_CHANGE = 1 << 0,         /* counts as a service change (metrics) */
        INTAKE_ENDPOINTS_CHANGE = 1 << 1,       /* counts as an endpoints change */
        INTAKE_ALL_CHANGED = 1 << 2,            /* the Node's labels or addresses: every service's rules */
        INTAKE_NODE_ELIGIBLE = 1 << 3,          /* the Node is there and not being deleted */
        INTAKE_NODE_INELIGIBLE = 1 << 4,        /* ... it is gone, or leaving */
        INTAKE_SERVICE_CIDRS_CHANGED = 1 << 5,  /* the union of the ServiceCIDRs changed */
};

struct intake_hooks {
        /* A version of a service is about to be replaced or deleted (old
         * is valid during the call). */
        void (*replacing)(void *ctx, const struct svc *old);
        /* Service key was marked changed (the service may be gone). */
        void (*marked)(void *ctx, const char *key);
        void *ctx;
        /* An address a service claims is refused now (refused), or no
         * longer (the service admits it, dropped it or is gone): for the
         * caller's counts. The intake logs each refusal as it appears. */
        void (*refusal)(void *ctx, const struct svc_refusal *r, bool refused);
};

/* node_name: only this Node is taken in. Returns 0 or -ENOMEM. */
int intake_new(const char *node_name, const struct intake_hooks *hooks, struct intake **ret);
struct intake *intake_free(struct intake *i);
/* Decides the addresses services claim with p (model/admit.h; borrowed;
 * NULL, the default: every address admitted): the services held now at
 * once, in key order (those whose decision changed are marked; returns
 * INTAKE_SERVICE_CHANGE if any did), and each that comes after. A change
 * of the API server's endpoints or of the Node's addresses decides the
 * claimants again, and marks those whose decision changed. */
unsigned intake_set_admission(struct intake *i, const struct admit_policy *p);

/* An object now looks like obj (upsert), or is gone (obj NULL). Returns
 * what it meant, 0 for nothing. */
unsigned intake_object(struct intake *i, enum intake_source src, const char *key, const json_t *obj);
/* Calls each(key, ctx) for every object of src held (after a relist,
 * those not listed are gone). A deleted Node is not held. */
void intake_keys(const struct intake *i, enum intake_source src, void (*each)(const char *key, void *ctx),
                 void *ctx);

const struct model *intake_model(const struct intake *i);
/* The union of the ServiceCIDRs' CIDRs. */
const struct inet_cidr *intake_service_cidrs(const struct intake *i, size_t *ret_n);
/* Service keys ("ns/name") changed since intake_applied(). */
const struct hmap *intake_changed(const struct intake *i);
/* The EndpointSlice change times (endpoints.kubernetes.io/last-change-trigger-time)
 * since intake_applied(): calls each(family, time, ctx). */
void intake_triggers(const struct intake *i, void (*each)(uint8_t family, double time, void *ctx), void *ctx);
/* What intake_changed() and intake_triggers() held is in the kernel. */
void intake_applied(struct intake *i);
