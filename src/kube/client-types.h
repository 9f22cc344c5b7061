/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * What the API client's consumers and its reflectors (kube/reflector.h)
 * share: the events a reflector reports, the consumer's callbacks, and a
 * request as the observer sees it. kube/client.h is the client itself.
 */
#include <stdbool.h>
#include <stddef.h>

typedef struct json_t json_t;

enum kube_event {
        KUBE_EVENT_UPSERT,      /* obj is the object */
        KUBE_EVENT_DELETE,      /* obj is the last state, or NULL after a relist */
        KUBE_EVENT_SYNCED,      /* a (re)list completed: everything listed has been reported */
};

/* key is "namespace/name" (or "name" for cluster-scoped objects). */
typedef void (*kube_event_fn)(void *userdata, enum kube_event ev, const char *key, const json_t *obj);
/* Calls each(key, ctx) for every key the consumer holds from the watch. */
typedef void (*kube_keys_fn)(void *userdata, void (*each)(const char *key, void *ctx), void *ctx);

/* One request to the API server as client-go's metrics count it: a list
 * when it is done, a watch when its response headers arrive (or it failed
 * without any). Called once per request, from the event loop. */
struct kube_request_report {
        const char *method;             /* "GET" */
        const char *host;               /* the server's host[:port], as in its URL */
        unsigned code;                  /* HTTP status; 0: no response came */
        bool watch;
        double seconds;                 /* lists: the whole request, its wait for the rate limit
                                         * included; watches: until the headers */
        double waited;                  /* the wait for the client-side rate limit (kube_client_set_rate) */
        size_t response_bytes;          /* lists: the body read */
};
typedef void (*kube_request_fn)(void *userdata, const struct kube_request_report *r);
