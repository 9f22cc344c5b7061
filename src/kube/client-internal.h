/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A reflector's state, shared by the two halves of the API client:
 * client.c (the client, lists, and what every request's outcome means:
 * failing, recovering, listing again) and client-watch.c (a watch stream
 * and its events). Private to those two files.
 */
#include <stdbool.h>
#include <stdint.h>

#include "kube/client.h"
#include "kube/rate.h"
#include "kube/transport.h"
#include "kube/watch-stream.h"
#include "util/buf.h"
#include "util/hmap.h"

enum client_phase {
        CLIENT_PHASE_LIST,
        CLIENT_PHASE_WATCH,
};

/* What the pending retry timer is for. */
enum client_waiting {
        CLIENT_WAIT_NONE,
        CLIENT_WAIT_BACKOFF,            /* a failure's backoff: cut short when the server is back */
        CLIENT_WAIT_SERVER,             /* the server's Retry-After, or an unserved resource's 30 s */
        CLIENT_WAIT_THROTTLE,           /* a token of the client-side rate limit */
};

struct kube_watch {
        struct kube_client *client;
        struct kube_watch *next;
        char *path, *label_selector, *field_selector;
        unsigned page_size;
        uint64_t idle_ms;
        kube_event_fn fn;
        void *userdata;
        kube_keys_fn keys;
        bool optional;          /* a 404 or 403 list means "none" (kube_watch_opts) */

        enum client_phase phase;
        struct kube_request *req;       /* the request in flight, or NULL */
        struct buf body;                /* a list page, or an error response's Status */
        struct kube_watch_stream stream;        /* a watch's events */
        char *rv;               /* the last resourceVersion seen, as sent */
        bool rv_refused;        /* the server would not serve rv: list consistently ("") */
        bool paginated;         /* a "0" list came in pages: keep pages later (client-go) */
        char *list_rv;          /* the current list's resourceVersion parameter ("" none) */
        bool list_paged;        /* ... with a limit */
        unsigned pages;         /* ... pages read */
        char *cont;             /* its continue token */
        struct hmap seen;       /* keys of the list in progress (owned strings) */
        unsigned failures;      /* consecutive */
        unsigned short_watches; /* consecutive watches served and ended at once, empty */
        unsigned refusals;      /* watches refused for their version since one delivered */
        enum client_waiting waiting;
        struct ev_timer *retry;
        struct ev_timer *idle;
        struct ev_timer *settle;        /* a 200 watch that lasts is healthy, events or not */
        uint64_t n_lists, n_restarts;
        uint64_t watch_started; /* ev ms */
        bool got_event;         /* the current watch delivered something */
        long stop_code;         /* an ERROR event's code that ended the watch; 0 none */
        char *stop_text;        /* ... its reason and message */
        bool unserved;          /* the last list of an optional resource got 404/403 */
        bool reserved;          /* holds a rate-limiter token for its next request */
        double wait_started;    /* when the reserved token was asked for (monotonic seconds) */
        double waited;          /* the next request's wait for its token */
        double started;         /* the current request's start, its wait included (monotonic seconds) */
        bool reported;          /* ... has been reported to the observer */
};

struct kube_client {
        struct ev_loop *loop;
        struct kube_transport *transport;
        struct kube_rate rate;          /* --kube-api-qps, --kube-api-burst */
        struct kube_watch *watches;
        unsigned seed;
        kube_request_fn observer;
        void *observer_ud;
        unsigned n_failing;             /* reflectors whose last request failed */
        double down_since;              /* wall clock when the first of them began to */
        unsigned failed_requests;       /* since then */
};

/* client.c */
void client_set_str(char **p, const char *v);
/* An object the server says now looks like obj; listing: a list's. */
void client_report_upsert(struct kube_watch *w, const json_t *obj, bool listing);
/* The current request to the observer, once. */
void client_report_request(struct kube_watch *w);
/* Frees the request in flight and what it read. */
void client_stop_transfer(struct kube_watch *w);
int client_start_request(struct kube_watch *w, const char *url, long timeout_s, const struct kube_request_ops *ops);
/* The server's URL, the path and the selectors. */
void client_base_url(struct kube_watch *w, struct buf *url);
/* A request failed: the next attempt of the phase after the backoff, or
 * after retry_after_ms (> 0) as the server asked. */
void client_failed(struct kube_watch *w, const char *what, int64_t retry_after_ms);
/* The next attempt of the current phase, after ms. */
void client_retry_in(struct kube_watch *w, uint64_t ms, enum client_waiting why);
/* The server answered as it should: the backoff starts over. */
void client_healthy(struct kube_watch *w);
/* Lists again now: not older than rv, or (refused) consistently. */
void client_relist(struct kube_watch *w, bool refused);
/* An error response (code, its Status in body) to the current request:
 * lists again, waits or backs off, as it means. */
void client_status_error(struct kube_watch *w, long code);
/* The server refused the version asked for (410, 400/422/414, 504 too
 * large): lists again and returns true; false when it is no such refusal. */
bool client_version_refused(struct kube_watch *w, long code, bool too_large, const char *what);

/* client-watch.c */
/* Opens a watch from w->rv. */
void client_watch_begin(struct kube_watch *w);
