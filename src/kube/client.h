/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The Kubernetes API client: list-then-watch "reflectors" over HTTPS
 * (libcurl's multi-socket API on kproxy's event loop; TLS always verified
 * unless the kubeconfig says insecure-skip-tls-verify).
 *
 * A reflector lists a resource in pages (limit/continue), reports every
 * object, then watches from the list's resourceVersion with bookmarks,
 * resuming from the last resourceVersion it saw when a watch ends. A 410
 * Gone (too old a resourceVersion) means relist; after a relist, the keys
 * the consumer holds (it lists them: the client keeps no copy of a
 * cluster's keys) that were not listed are reported deleted, so the
 * consumer never keeps a ghost. Failures are retried with capped exponential backoff and jitter;
 * a watch silent for longer than idle_timeout_ms is dropped and restarted.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/client-types.h"

struct ev_loop;
struct kube_conn;
struct kube_client;
struct kube_watch;

struct kube_watch_opts {
        const char *path;               /* collection path, e.g. "/api/v1/services" */
        const char *label_selector;     /* NULL: none */
        const char *field_selector;     /* NULL: none */
        unsigned page_size;             /* list page size; 0: 500 */
        uint64_t idle_timeout_ms;       /* 0: 5 minutes */
        kube_keys_fn keys;              /* NULL: nothing is reported deleted after a relist */
        bool optional;                  /* a resource the server may not have (ServiceCIDRs): a list
                                         * answered 404 or 403 reports none of it and SYNCED, and is
                                         * tried again every 30 s */
};

/* The client borrows conn and loop; both must outlive it. Returns 0 or -errno. */
int kube_client_new(struct ev_loop *l, struct kube_conn *conn, struct kube_client **ret);
/* The client-side rate limit of list requests (clientConnection.qps and
 * .burst; client-go exempts watches): its token bucket; 0 means its
 * defaults (5 and 10), a negative qps no limit. The default until set. */
void kube_client_set_rate(struct kube_client *c, float qps, int32_t burst);

/* What requests ask for, as client-go's rest client does: Accept is
 * accept_types (clientConnection.acceptContentTypes) when set, else
 * content_type (clientConnection.contentType; NULL or "": protobuf) and
 * anything after it. Either format is read, whatever was asked for: a
 * response is read as its Content-Type (or its first bytes) says. Returns
 * 0, or -EINVAL when a value holds a control character. */
int kube_client_set_content_type(struct kube_client *c, const char *content_type, const char *accept_types);

struct kube_client *kube_client_free(struct kube_client *c);

/* Starts a reflector; events go to fn until the client is freed. */
int kube_watch_start(struct kube_client *c, const struct kube_watch_opts *o, kube_event_fn fn, void *userdata,
                     struct kube_watch **ret);

/* Reports every later request to fn (NULL: stops). */
void kube_client_set_observer(struct kube_client *c, kube_request_fn fn, void *userdata);

/* Counters for logs and tests. */
uint64_t kube_watch_lists(const struct kube_watch *w);     /* completed lists */
uint64_t kube_watch_restarts(const struct kube_watch *w);  /* watches restarted after an error or silence */
