/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A reflector's state and bookkeeping, the bottom of the API client: the
 * last resourceVersion and the keys a list has seen, what is reported to
 * the consumer and to the request observer, the retry timer and its
 * backoff, the client's health (failing, recovering), and what an error
 * response means. Above it, the two phases read their responses and say
 * what comes next (client-list.c, client-watch.c); on top, client.c holds
 * the transport's callbacks and starts the next request. Nothing here
 * starts one: a retry timer that fires, or a watch gone silent, hands the
 * reflector to the client's resume function (given at creation, as an
 * event loop's callback is). Private to src/kube/client*.c.
 */
#include <stdbool.h>
#include <stdint.h>

#include "ev/ev.h"

#include "kube/client-types.h"
#include "kube/rate.h"
#include "kube/transport.h"
#include "kube/watch-stream.h"
#include "util/buf.h"
#include "util/hmap.h"

enum client_phase {
        CLIENT_PHASE_LIST,
        CLIENT_PHASE_WATCH,
};

/* What a response (or its end) leads to. */
enum reflector_next {
        REFLECTOR_WAIT,         /* nothing now: a retry timer is armed, or a request runs */
        REFLECTOR_LIST,         /* list now: the next page, or again (as w->list_rv and w->cont say) */
        REFLECTOR_WATCH,        /* watch from w->rv now */
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
        /* The client's one way to the next request: the current phase's
         * (a watch from w->rv, or a list), set by client.c. */
        void (*resume)(struct kube_watch *w);
};

void reflector_set_str(char **p, const char *v);
void reflector_seen_clear(struct kube_watch *w);
/* An object the server says now looks like obj; listing: a list's. */
void reflector_report_upsert(struct kube_watch *w, const json_t *obj, bool listing);
/* Whatever the consumer holds that the list just ended did not have is
 * reported gone. */
void reflector_report_unlisted(struct kube_watch *w);
/* The current request to the observer, once. */
void reflector_report_request(struct kube_watch *w);

/* Starts a request of the current phase (its callbacks in ops, userdata
 * w) and times it. Returns 0 or -errno. */
int reflector_start_request(struct kube_watch *w, const char *url, long timeout_s, const struct kube_request_ops *ops);
/* The server's URL, the path and the selectors. */
void reflector_base_url(struct kube_watch *w, struct buf *url);
/* Frees the request in flight and what it read. */
void reflector_stop_transfer(struct kube_watch *w);
/* The next attempt of the current phase (the client's resume()), after
 * ms; the transfer stops now. */
void reflector_retry_in(struct kube_watch *w, uint64_t ms, enum client_waiting why);
/* A request failed: the next attempt of the phase after the backoff, or
 * after retry_after_ms (> 0) as the server asked. */
void reflector_failed(struct kube_watch *w, const char *what, int64_t retry_after_ms);
/* The server answered as it should: the backoff starts over (and the
 * other reflectors that wait out a backoff try now). */
void reflector_healthy(struct kube_watch *w);

/* What a new list asks for (w->list_rv, w->list_paged), as client-go's
 * reflector: "0" first, then not older than the last version seen, or a
 * consistent read once the server refused that version. */
void reflector_choose_list(struct kube_watch *w);
/* Prepares a list from scratch: not older than rv, or (refused)
 * consistently. The caller lists (REFLECTOR_LIST). */
void reflector_relist(struct kube_watch *w, bool refused);
/* The server refused the version asked for (410, 400/422/414, 504 too
 * large): true, with what comes next in *next; false when it is no such
 * refusal. */
bool reflector_version_refused(struct kube_watch *w, long code, bool too_large, const char *what,
                               enum reflector_next *next);
/* An error response (code, its Status in w->body) to the current
 * request: lists again, waits or backs off, as it means. */
enum reflector_next reflector_status_error(struct kube_watch *w, long code);
