/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the reflector: the consumer only ever sees "this object now
 * looks like this" and "this object is gone", in order, whatever happened
 * on the wire (pages, dropped watches, 410s, server restarts). The
 * reflector owns the bookkeeping for that: the last resourceVersion, and the
 * set of keys it has reported, so that a relist can report what vanished.
 *
 * This file is the reflector's state machine (list pages, then a watch,
 * resumed, relisted, retried with backoff) and the client that holds the
 * reflectors. Below it: transport.c makes the HTTPS requests on the event
 * loop, watch-stream.c reads a watch's events, rate.c is the client-side
 * rate limit. Each request is reported to the observer (client-go's
 * metrics) from here, where its wait for the rate limit is known.
 */
#include "kube/client.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ev/ev.h"
#include "kube/rate.h"
#include "kube/transport.h"
#include "kube/watch-stream.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "util/log.h"

#define BACKOFF_BASE_MS 500
#define BACKOFF_CAP_MS 30000
#define DEFAULT_PAGE 500
#define DEFAULT_IDLE_MS (5 * 60 * 1000)
#define LIST_TIMEOUT_S 300

enum phase {
        PHASE_IDLE,
        PHASE_LIST,
        PHASE_WATCH,
};

struct kube_watch {
        struct kube_client *client;
        struct kube_watch *next;
        char *path, *label_selector, *field_selector;
        unsigned page_size;
        uint64_t idle_ms;
        kube_event_fn fn;
        void *userdata;

        enum phase phase;
        struct kube_request *req;       /* the request in flight, or NULL */
        struct buf body;        /* list: the page; watch: the partial line */
        char *rv;               /* last resourceVersion seen */
        char *cont;             /* list continue token */
        kube_keys_fn keys;
        struct hmap seen;       /* keys of the list in progress (owned strings) */
        unsigned attempts;      /* consecutive failures, for backoff */
        struct ev_timer *retry;
        struct ev_timer *idle;
        uint64_t n_lists, n_restarts;
        bool got_event;         /* the current watch delivered something */
        bool optional;          /* a 404 or 403 list means "none" (kube_watch_opts) */
        bool unserved;          /* the last list got one */
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
};

static void watch_begin_list(struct kube_watch *w);
static void watch_begin_watch(struct kube_watch *w);

/* --- helpers --- */

static char *object_key(const json_t *obj) {
        const json_t *md = json_object_get(obj, "metadata");
        const char *ns = json_string_value(json_object_get(md, "namespace"));
        const char *name = json_string_value(json_object_get(md, "name"));
        char *k;
        if (!name)
                return NULL;
        if (ns && *ns) {
                if (asprintf(&k, "%s/%s", ns, name) < 0)
                        return NULL;
        } else {
                k = strdup(name);
        }
        return k;
}

static void set_str(char **p, const char *v) {
        free(*p);
        *p = v ? strdup(v) : NULL;
}

static void seen_clear(struct kube_watch *w) {
        void *v;
        for (size_t i = 0; hmap_next(&w->seen, &i, NULL, &v);)
                free(v);
        hmap_done(&w->seen);
}

static void report_upsert(struct kube_watch *w, const json_t *obj, bool listing) {
        char *k = object_key(obj);
        if (!k) {
                log_warning("%s: object without metadata.name, ignoring", w->path);
                return;
        }
        w->fn(w->userdata, KUBE_EVENT_UPSERT, k, obj);
        if (listing && !hmap_get(&w->seen, k))
                hmap_put(&w->seen, k, k);
        else
                free(k);
}

static void report_delete(struct kube_watch *w, const char *key, const json_t *obj) {
        w->fn(w->userdata, KUBE_EVENT_DELETE, key, obj);
}

/* The consumer's keys that a relist did not list. */
struct gone {
        const struct hmap *seen;
        char **keys;
        size_t n;
};

static void collect_gone(const char *key, void *ctx) {
        struct gone *g = ctx;
        if (hmap_get(g->seen, key))
                return;
        char **more = realloc(g->keys, (g->n + 1) * sizeof *more);
        char *k = strdup(key);
        if (!more || !k)
                abort();
        g->keys = more;
        g->keys[g->n++] = k;
}

/* Whatever the consumer holds but the list just ended did not have is
 * gone. Its keys are collected first: deleting changes what it iterates. */
static void report_unlisted(struct kube_watch *w) {
        struct gone g = {.seen = &w->seen};
        if (w->keys)
                w->keys(w->userdata, collect_gone, &g);
        for (size_t j = 0; j < g.n; j++) {
                report_delete(w, g.keys[j], NULL);
                free(g.keys[j]);
        }
        free(g.keys);
        seen_clear(w);
}

static uint64_t backoff_ms(struct kube_watch *w) {
        uint64_t d = BACKOFF_BASE_MS;
        for (unsigned i = 0; i < w->attempts && d < BACKOFF_CAP_MS; i++)
                d *= 2;
        if (d > BACKOFF_CAP_MS)
                d = BACKOFF_CAP_MS;
        /* Jitter in [d/2, d): many nodes reconnecting after an API server
         * restart must not arrive in lockstep. */
        return d / 2 + (uint64_t) rand_r(&w->client->seed) % (d / 2 + 1);
}

static void on_retry(struct ev_loop *l, void *userdata) {
        struct kube_watch *w = userdata;
        (void) l;
        w->retry = NULL;
        if (w->phase == PHASE_WATCH && w->rv)
                watch_begin_watch(w);
        else
                watch_begin_list(w);
}

/* --- the request observer --- */

static double monotonic_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* The current request, once: its status so far (0 when no response came). */
static void report_request(struct kube_watch *w) {
        struct kube_client *c = w->client;
        long code;

        if (w->reported || !w->req || !c->observer)
                return;
        w->reported = true;
        code = kube_request_status(w->req);
        c->observer(c->observer_ud, &(struct kube_request_report) {
                .method = "GET",
                .host = kube_transport_host(c->transport),
                .code = code > 0 && code < 1000 ? (unsigned) code : 0,
                .watch = w->phase == PHASE_WATCH,
                .seconds = monotonic_s() - w->started,
                .waited = w->waited,
                .response_bytes = w->body.len,
        });
}

/* A watch is counted when its response headers are complete, as client-go
 * counts it when the response starts. */
static void on_watch_headers(void *userdata) {
        report_request(userdata);
}

void kube_client_set_observer(struct kube_client *c, kube_request_fn fn, void *userdata) {
        c->observer = fn;
        c->observer_ud = userdata;
}

static void stop_transfer(struct kube_watch *w) {
        w->idle = ev_timer_cancel(w->client->loop, w->idle);
        w->req = kube_request_free(w->req);
        buf_clear(&w->body);
}

/* Schedules the next attempt of the current phase after a backoff. */
static void retry_later(struct kube_watch *w) {
        uint64_t d = backoff_ms(w);
        stop_transfer(w);
        w->attempts++;
        w->retry = ev_timer_cancel(w->client->loop, w->retry);
        w->retry = ev_timer_add(w->client->loop, d, on_retry, w);
        log_v(2, "%s: retrying in %llu ms", w->path, (unsigned long long) d);
}

static void relist(struct kube_watch *w) {
        stop_transfer(w);
        seen_clear(w);
        set_str(&w->rv, NULL);
        set_str(&w->cont, NULL);
        w->phase = PHASE_LIST;
        watch_begin_list(w);
}

/* --- watch stream --- */

static void on_idle(struct ev_loop *l, void *userdata) {
        struct kube_watch *w = userdata;
        (void) l;
        w->idle = NULL;
        log_warning("%s: watch silent for %llu ms, restarting it", w->path, (unsigned long long) w->idle_ms);
        w->n_restarts++;
        report_request(w);      /* a watch whose headers never came */
        stop_transfer(w);
        watch_begin_watch(w);
}

static void arm_idle(struct kube_watch *w) {
        w->idle = ev_timer_cancel(w->client->loop, w->idle);
        w->idle = ev_timer_add(w->client->loop, w->idle_ms, on_idle, w);
}

/* One watch event line. Returns false when the watch must stop (410). */
static bool handle_event_line(void *userdata, const char *line, size_t len) {
        struct kube_watch *w = userdata;
        struct kube_watch_event ev;
        const char *rv;
        bool go_on = true;
        char why[160];

        if (kube_watch_event_parse(line, len, &ev, why, sizeof why) < 0) {
                log_warning("%s: malformed watch event (%s), ignoring", w->path, why);
                return true;
        }
        rv = ev.rv;
        switch (ev.type) {
        case KUBE_WATCH_INCOMPLETE:
                log_warning("%s: watch event without type or object, ignoring", w->path);
                break;
        case KUBE_WATCH_ERROR:
                if (ev.code == 410) {
                        log_info("%s: resourceVersion %s is too old (410 Gone), relisting", w->path,
                                 w->rv ? w->rv : "?");
                        go_on = false;
                } else {
                        log_warning("%s: watch error %lld: %s, will retry", w->path, ev.code,
                                    ev.message ? ev.message : "");
                }
                rv = NULL;
                break;
        case KUBE_WATCH_BOOKMARK:
                break;          /* only the resourceVersion matters */
        case KUBE_WATCH_ADDED:
        case KUBE_WATCH_MODIFIED:
                report_upsert(w, ev.object, false);
                break;
        case KUBE_WATCH_DELETED: {
                char *k = object_key(ev.object);
                if (k)
                        report_delete(w, k, ev.object);
                free(k);
                break;
        }
        case KUBE_WATCH_UNKNOWN:
                log_warning("%s: unknown watch event type \"%.32s\", ignoring", w->path, ev.type_name);
                break;
        }
        if (rv)
                set_str(&w->rv, rv);
        w->got_event = true;
        kube_watch_event_done(&ev);
        return go_on;
}

static bool on_watch_data(void *userdata, const char *data, size_t n) {
        struct kube_watch *w = userdata;

        buf_put(&w->body, data, n);
        if (kube_request_status(w->req) != 200)
                return true;    /* an error Status: handled at completion */
        arm_idle(w);
        if (!kube_watch_stream_lines(&w->body, handle_event_line, w)) {
                /* 410: abort this transfer; completion relists. */
                w->phase = PHASE_LIST;
                return false;
        }
        return true;
}

static bool on_list_data(void *userdata, const char *data, size_t n) {
        struct kube_watch *w = userdata;
        buf_put(&w->body, data, n);
        return true;
}

/* --- requests --- */

static void on_transfer_done(void *userdata, enum kube_request_end end, const char *error);

static const struct kube_request_ops list_ops = {
        .data = on_list_data,
        .done = on_transfer_done,
};

static const struct kube_request_ops watch_ops = {
        .data = on_watch_data,
        .headers_done = on_watch_headers,
        .done = on_transfer_done,
};

static int start_request(struct kube_watch *w, const char *url, bool watching) {
        int r = kube_request_start(w->client->transport, url, watching ? 0 : LIST_TIMEOUT_S,
                                   watching ? &watch_ops : &list_ops, w, &w->req);
        if (r < 0)
                return r;
        w->started = monotonic_s() - w->waited;         /* client-go times its wait too */
        w->reported = false;
        return 0;
}

static void base_url(struct kube_watch *w, struct buf *url) {
        buf_clear(url);
        buf_puts(url, kube_transport_server(w->client->transport));
        buf_puts(url, w->path);
        if (w->label_selector)
                kube_url_param(url, "labelSelector", w->label_selector);
        if (w->field_selector)
                kube_url_param(url, "fieldSelector", w->field_selector);
}

/* client-go's client-side rate limit: every list request (a page) takes a
 * token first; watches do not (client-go exempts them on purpose). Without
 * a token, the list waits for its reserved one on the retry timer. */
static bool throttled(struct kube_watch *w, enum phase phase) {
        if (w->reserved) {
                w->reserved = false;
                w->waited = monotonic_s() - w->wait_started;
                return false;
        }
        uint64_t wait = kube_rate_take(&w->client->rate, ev_now_ms(w->client->loop));
        if (wait == 0) {
                w->waited = 0;
                return false;
        }
        w->wait_started = monotonic_s();
        stop_transfer(w);
        w->phase = phase;
        w->reserved = true;
        w->retry = ev_timer_cancel(w->client->loop, w->retry);
        w->retry = ev_timer_add(w->client->loop, wait, on_retry, w);
        log_v(3, "%s: waiting %llu ms for client-side throttling (--kube-api-qps)", w->path,
              (unsigned long long) wait);
        return true;
}

static void watch_begin_list(struct kube_watch *w) {
        struct buf url = BUF_INIT;
        char n[16];

        if (throttled(w, PHASE_LIST))
                return;
        w->phase = PHASE_LIST;
        base_url(w, &url);
        snprintf(n, sizeof n, "%u", w->page_size);
        kube_url_param(&url, "limit", n);
        if (w->cont)
                kube_url_param(&url, "continue", w->cont);
        log_v(4, "GET %s", url.data);
        if (start_request(w, url.data, false) < 0)
                retry_later(w);
        buf_done(&url);
}

static void watch_begin_watch(struct kube_watch *w) {
        struct buf url = BUF_INIT;
        char t[16];

        w->phase = PHASE_WATCH;
        w->got_event = false;
        base_url(w, &url);
        kube_url_param(&url, "watch", "1");
        kube_url_param(&url, "resourceVersion", w->rv);
        kube_url_param(&url, "allowWatchBookmarks", "true");
        /* Rotate watches every 5-10 minutes, as client-go does, so load
         * balancers in front of API servers spread them. */
        snprintf(t, sizeof t, "%u", 300 + (unsigned) rand_r(&w->client->seed) % 300);
        kube_url_param(&url, "timeoutSeconds", t);
        log_v(4, "GET %s", url.data);
        if (start_request(w, url.data, true) < 0)
                retry_later(w);
        else
                arm_idle(w);
        buf_done(&url);
}

/* A complete list page: report its items, then the next page or the watch. */
static void finish_list_page(struct kube_watch *w) {
        json_error_t e;
        json_t *list = json_loadb(w->body.data, w->body.len, 0, &e);
        const json_t *items = json_object_get(list, "items");
        const json_t *md = json_object_get(list, "metadata");
        const char *rv = json_string_value(json_object_get(md, "resourceVersion"));
        const char *cont = json_string_value(json_object_get(md, "continue"));
        size_t i;
        const json_t *item;

        if (!list || !json_is_array(items) || !rv) {
                log_warning("%s: malformed list response (%s), will retry", w->path,
                            list ? "no items or resourceVersion" : e.text);
                json_decref(list);
                set_str(&w->cont, NULL);
                retry_later(w);
                return;
        }
        stop_transfer(w);
        json_array_foreach(items, i, item)
                report_upsert(w, item, true);
        set_str(&w->rv, rv);
        if (cont && *cont) {
                set_str(&w->cont, cont);
                json_decref(list);
                watch_begin_list(w);
                return;
        }
        json_decref(list);
        set_str(&w->cont, NULL);
        buf_done(&w->body);     /* a page's room (about 1 MB); watch events need little */

        size_t listed = w->seen.len;
        report_unlisted(w);
        w->attempts = 0;
        w->n_lists++;
        if (w->unserved)
                log_info("%s: served again, listed", w->path);
        w->unserved = false;
        log_v(2, "%s: listed %zu objects at resourceVersion %s", w->path, listed, w->rv);
        w->fn(w->userdata, KUBE_EVENT_SYNCED, NULL, NULL);
        watch_begin_watch(w);
}

/* An optional resource this API server does not serve (404: older than
 * the resource) or will not show kproxy (403: RBAC without it): the
 * consumer holds none of it, and may go on; the list is tried again at the
 * backoff's cap, in case the server is upgraded or the role extended. Said
 * once, not per attempt. */
static void not_served(struct kube_watch *w, long code) {
        if (!w->unserved) {
                if (code == 404)
                        log_info("%s: not served by this API server (404); carrying on without it", w->path);
                else
                        log_warning("%s: 403 Forbidden: kproxy may not list it (its role lacks list and watch "
                                    "there); carrying on without it", w->path);
        }
        w->unserved = true;
        seen_clear(w);
        report_unlisted(w);
        w->fn(w->userdata, KUBE_EVENT_SYNCED, NULL, NULL);
        stop_transfer(w);
        w->retry = ev_timer_cancel(w->client->loop, w->retry);
        w->retry = ev_timer_add(w->client->loop, BACKOFF_CAP_MS, on_retry, w);
        log_v(4, "%s: HTTP %ld, listing again in %d ms", w->path, code, BACKOFF_CAP_MS);
}

static void log_status(struct kube_watch *w, long code) {
        json_t *st = json_loadb(w->body.data ? w->body.data : "", w->body.len, 0, NULL);
        const char *msg = json_string_value(json_object_get(st, "message"));
        log_warning("%s: HTTP %ld%s%s, will retry", w->path, code, msg ? ": " : "", msg ? msg : "");
        json_decref(st);
}

static void on_transfer_done(void *userdata, enum kube_request_end end, const char *error) {
        struct kube_watch *w = userdata;
        long code = kube_request_status(w->req);
        report_request(w);

        /* A 410 status, or a 410 ERROR event in the stream (the data callback
         * then switched the phase to LIST and aborted the transfer). */
        if (code == 410 || (end == KUBE_REQUEST_ABORTED && w->phase == PHASE_LIST)) {
                log_info("%s: 410 Gone, relisting", w->path);
                w->n_restarts++;
                relist(w);
                return;
        }
        if (code == 401) {
                log_warning("%s: 401 Unauthorized, re-reading the token and retrying", w->path);
                kube_transport_reload_token(w->client->transport);
                retry_later(w);
                return;
        }
        if (end != KUBE_REQUEST_COMPLETE) {
                log_warning("%s: %s: %s, will retry", w->path, w->phase == PHASE_LIST ? "list" : "watch", error);
                if (w->phase == PHASE_WATCH)
                        w->n_restarts++;
                retry_later(w);
                return;
        }
        if (w->optional && w->phase == PHASE_LIST && (code == 404 || code == 403)) {
                not_served(w, code);
                return;
        }
        if (code != 200) {
                log_status(w, code);
                if (w->phase == PHASE_WATCH)
                        w->n_restarts++;
                retry_later(w);
                return;
        }
        if (w->phase == PHASE_LIST) {
                finish_list_page(w);
                return;
        }
        /* The server ended the watch (timeoutSeconds): resume at once. A
         * watch that ended without sending anything counts as a failure, so a
         * server that closes every watch at once is not hammered. */
        log_v(4, "%s: watch ended, resuming at %s", w->path, w->rv);
        if (!w->got_event) {
                retry_later(w);
                return;
        }
        w->attempts = 0;
        stop_transfer(w);
        watch_begin_watch(w);
}

/* --- lifecycle --- */

int kube_client_new(struct ev_loop *l, struct kube_conn *conn, struct kube_client **ret) {
        struct kube_client *c = calloc(1, sizeof *c);
        int r;

        if (!c)
                return -ENOMEM;
        r = kube_transport_new(l, conn, &c->transport);
        if (r < 0) {
                free(c);
                return r;
        }
        c->loop = l;
        c->seed = (unsigned) time(NULL) ^ (unsigned) getpid();
        kube_rate_init(&c->rate, 0, 0, ev_now_ms(l));
        *ret = c;
        return 0;
}

void kube_client_set_rate(struct kube_client *c, float qps, int32_t burst) {
        kube_rate_init(&c->rate, qps, burst, ev_now_ms(c->loop));
}

struct kube_client *kube_client_free(struct kube_client *c) {
        if (!c)
                return NULL;
        while (c->watches) {
                struct kube_watch *w = c->watches;
                c->watches = w->next;
                stop_transfer(w);
                w->retry = ev_timer_cancel(c->loop, w->retry);
                seen_clear(w);
                buf_done(&w->body);
                free(w->path);
                free(w->label_selector);
                free(w->field_selector);
                free(w->rv);
                free(w->cont);
                free(w);
        }
        kube_transport_free(c->transport);
        free(c);
        return NULL;
}

int kube_watch_start(struct kube_client *c, const struct kube_watch_opts *o, kube_event_fn fn, void *userdata,
                     struct kube_watch **ret) {
        struct kube_watch *w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        w->client = c;
        w->path = strdup(o->path);
        w->label_selector = o->label_selector ? strdup(o->label_selector) : NULL;
        w->field_selector = o->field_selector ? strdup(o->field_selector) : NULL;
        w->page_size = o->page_size ? o->page_size : DEFAULT_PAGE;
        w->idle_ms = o->idle_timeout_ms ? o->idle_timeout_ms : DEFAULT_IDLE_MS;
        w->fn = fn;
        w->keys = o->keys;
        w->optional = o->optional;
        w->userdata = userdata;
        w->next = c->watches;
        c->watches = w;
        watch_begin_list(w);
        if (ret)
                *ret = w;
        return 0;
}

uint64_t kube_watch_lists(const struct kube_watch *w) {
        return w->n_lists;
}

uint64_t kube_watch_restarts(const struct kube_watch *w) {
        return w->n_restarts;
}
