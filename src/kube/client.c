/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the reflector: the consumer only ever sees "this object now
 * looks like this" and "this object is gone", in order, whatever happened
 * on the wire (pages, dropped watches, 410s, server restarts). The
 * reflector owns the bookkeeping for that: the last resourceVersion, and the
 * set of keys it has listed, so that a relist can report what vanished.
 *
 * Principle of recovery: waiting is for failures, never for news. A watch
 * that ends after it delivered something, or after it lasted, is simply
 * opened again from the last resourceVersion, at once, however it ended; a
 * 410 (the version is gone) or a version the server refuses is a reason to
 * list again now. Only consecutive failures (no answer, 5xx, 429, a watch
 * that closes at once with nothing) back off, and the count starts over as
 * soon as a list completes or a watch delivers. A 429 or 5xx that says
 * when to come back (Retry-After) is taken at its word.
 *
 * A resourceVersion is opaque text: it is remembered as sent and handed
 * back, never parsed or compared. The first list asks for
 * resourceVersion="0" (the API server's watch cache may answer it whole, as
 * client-go's reflector asks); later lists ask for "not older than" the
 * last version, and for a consistent read ("") once the server refused
 * that version.
 *
 * This file is the reflector's state machine (list pages, then a watch,
 * resumed, relisted, retried) and the client that holds the reflectors.
 * Below it: transport.c makes the HTTPS requests on the event loop,
 * watch-stream.c cuts a watch into events, rate.c paces the requests. Each
 * request is reported to the observer (client-go's metrics) from here,
 * where its wait for the rate limit is known.
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
#include "kube/client-internal.h"
#include "kube/decode.h"
#include "kube/list-scan.h"
#include "util/clock.h"
#include "util/log.h"

#define DEFAULT_PAGE 500
#define DEFAULT_IDLE_MS (5 * 60 * 1000)
#define LIST_TIMEOUT_S 300

static void watch_begin_list(struct kube_watch *w);
static void choose_list(struct kube_watch *w);

/* --- helpers --- */

void client_set_str(char **p, const char *v) {
        free(*p);
        *p = v ? strdup(v) : NULL;
        if (v && !*p)
                abort();
}

static void seen_clear(struct kube_watch *w) {
        void *v;
        for (size_t i = 0; hmap_next(&w->seen, &i, NULL, &v);)
                free(v);
        hmap_done(&w->seen);
}

void client_report_upsert(struct kube_watch *w, const json_t *obj, bool listing) {
        char *k = kube_object_key(obj);
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
                w->fn(w->userdata, KUBE_EVENT_DELETE, g.keys[j], NULL);
                free(g.keys[j]);
        }
        free(g.keys);
        seen_clear(w);
}

/* --- the request observer --- */

/* The current request, once: its status so far (0 when no response came). */
void client_report_request(struct kube_watch *w) {
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
                .watch = w->phase == CLIENT_PHASE_WATCH,
                .seconds = clock_mono_s() - w->started,
                .waited = w->waited,
                .response_bytes = w->body.len,
        });
}

void kube_client_set_observer(struct kube_client *c, kube_request_fn fn, void *userdata) {
        c->observer = fn;
        c->observer_ud = userdata;
}

/* --- waiting, failing, recovering --- */

void client_stop_transfer(struct kube_watch *w) {
        w->idle = ev_timer_cancel(w->client->loop, w->idle);
        w->settle = ev_timer_cancel(w->client->loop, w->settle);
        w->req = kube_request_free(w->req);
        buf_clear(&w->body);
        kube_watch_stream_reset(&w->stream);
        w->stop_code = 0;
        client_set_str(&w->stop_text, NULL);
}

static void on_retry(struct ev_loop *l, void *userdata) {
        struct kube_watch *w = userdata;
        (void) l;
        w->retry = NULL;
        w->waiting = CLIENT_WAIT_NONE;
        if (w->phase == CLIENT_PHASE_WATCH && w->rv)
                client_watch_begin(w);
        else
                watch_begin_list(w);
}

void client_retry_in(struct kube_watch *w, uint64_t ms, enum client_waiting why) {
        client_stop_transfer(w);
        w->retry = ev_timer_cancel(w->client->loop, w->retry);
        w->retry = ev_timer_add(w->client->loop, ms, on_retry, w);
        if (!w->retry)
                abort();
        w->waiting = why;
}

static void format_clock(double t, char *out, size_t outlen) {
        time_t s = (time_t) t;
        struct tm tm;
        localtime_r(&s, &tm);
        size_t n = strftime(out, outlen, "%H:%M:%S", &tm);
        snprintf(out + n, outlen - n, ".%03d", (int) ((t - (double) s) * 1000));
}

/* A request failed: the reflector tries again after its backoff, or after
 * retry_after_ms when the server said so (> 0). Said once at V(0) when the
 * client goes from all-well to failing; each attempt only at V(2). */
void client_failed(struct kube_watch *w, const char *what, int64_t retry_after_ms) {
        struct kube_client *c = w->client;
        uint64_t d;

        c->failed_requests++;
        if (w->failures++ == 0) {
                if (c->n_failing++ == 0) {
                        char at[32];
                        c->down_since = clock_wall_s();
                        c->failed_requests = 1;
                        format_clock(c->down_since, at, sizeof at);
                        log_warning("API server unreachable since %s (%s %s: %s), retrying with backoff", at,
                                    w->phase == CLIENT_PHASE_LIST ? "list" : "watch", w->path, what);
                }
        }
        if (retry_after_ms > 0)
                d = retry_after_ms < KUBE_BACKOFF_CAP_MS ? (uint64_t) retry_after_ms : KUBE_BACKOFF_CAP_MS;
        else
                d = kube_backoff_ms(w->failures, &c->seed);
        log_v(2, "%s: %s %s, retrying in %llu ms%s (failure %u)", w->path, w->phase == CLIENT_PHASE_LIST ? "list" : "watch",
              what, (unsigned long long) d, retry_after_ms > 0 ? " as the server asked" : "", w->failures);
        client_retry_in(w, d, retry_after_ms > 0 ? CLIENT_WAIT_SERVER : CLIENT_WAIT_BACKOFF);
}

/* The server answered as it should (a list completed, a watch delivered):
 * the backoff starts over. When this ends the client's failing state, it
 * says so, and the other reflectors that wait out a backoff try now: the
 * server is back for them too. */
void client_healthy(struct kube_watch *w) {
        struct kube_client *c = w->client;

        if (w->failures == 0)
                return;
        w->failures = 0;
        if (--c->n_failing == 0)
                log_info("API server recovered after %.1f s (%u failed requests)", clock_wall_s() - c->down_since,
                         c->failed_requests);
        for (struct kube_watch *o = c->watches; o; o = o->next) {
                if (o == w || o->waiting != CLIENT_WAIT_BACKOFF)
                        continue;
                o->retry = ev_timer_cancel(c->loop, o->retry);
                o->retry = ev_timer_add(c->loop, 0, on_retry, o);
                if (!o->retry)
                        abort();
        }
}

/* List again now: after a 410 from "not older than" rv (refused false: the
 * version is too old to watch from, not to list at), or because the server
 * would not take rv at all (refused: a consistent list). */
void client_relist(struct kube_watch *w, bool refused) {
        client_stop_transfer(w);
        seen_clear(w);
        client_set_str(&w->cont, NULL);
        if (refused)
                w->rv_refused = true;
        w->phase = CLIENT_PHASE_LIST;
        choose_list(w);
        watch_begin_list(w);
}

/* --- requests --- */

int client_start_request(struct kube_watch *w, const char *url, long timeout_s, const struct kube_request_ops *ops) {
        int r = kube_request_start(w->client->transport, url, timeout_s, ops, w, &w->req);
        if (r < 0)
                return r;
        w->started = clock_mono_s() - w->waited;         /* client-go times its wait too */
        w->reported = false;
        return 0;
}

void client_base_url(struct kube_watch *w, struct buf *url) {
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
static bool throttled(struct kube_watch *w, enum client_phase phase) {
        if (w->reserved) {
                w->reserved = false;
                w->waited = clock_mono_s() - w->wait_started;
                return false;
        }
        uint64_t wait = kube_rate_take(&w->client->rate, ev_now_ms(w->client->loop));
        if (wait == 0) {
                w->waited = 0;
                return false;
        }
        w->wait_started = clock_mono_s();
        w->phase = phase;
        w->reserved = true;
        client_retry_in(w, wait, CLIENT_WAIT_THROTTLE);
        log_v(3, "%s: waiting %llu ms for client-side throttling (--kube-api-qps)", w->path,
              (unsigned long long) wait);
        return true;
}

/* What a new list asks for, as client-go's reflector: "0" first (the watch
 * cache may answer, whole); then not older than the last version seen,
 * whole unless the server paged a "0" list (no watch cache: pages keep
 * each request small); a consistent read, in pages, once the server
 * refused the version. A retry of a failed page asks the same again. */
static void choose_list(struct kube_watch *w) {
        if (w->rv_refused) {
                client_set_str(&w->list_rv, "");
                w->list_paged = true;
        } else if (!w->rv) {
                client_set_str(&w->list_rv, "0");
                w->list_paged = true;
        } else {
                client_set_str(&w->list_rv, w->rv);
                w->list_paged = w->paginated;
        }
        w->pages = 0;
}

static bool on_list_data(void *userdata, const char *data, size_t n) {
        struct kube_watch *w = userdata;
        buf_put(&w->body, data, n);
        return true;
}

static void on_list_done(void *userdata, enum kube_request_end end, const char *error);

static const struct kube_request_ops list_ops = {
        .data = on_list_data,
        .done = on_list_done,
};

static void watch_begin_list(struct kube_watch *w) {
        struct buf url = BUF_INIT;
        char n[16];

        if (throttled(w, CLIENT_PHASE_LIST))
                return;
        w->phase = CLIENT_PHASE_LIST;
        client_base_url(w, &url);
        if (w->cont) {
                /* The token holds the list's version; the server refuses both. */
                kube_url_param(&url, "continue", w->cont);
        } else if (*w->list_rv) {
                kube_url_param(&url, "resourceVersion", w->list_rv);
        }
        if (w->list_paged) {
                snprintf(n, sizeof n, "%u", w->page_size);
                kube_url_param(&url, "limit", n);
        }
        log_v(4, "GET %s", url.data);
        if (client_start_request(w, url.data, LIST_TIMEOUT_S, &list_ops) < 0)
                client_failed(w, "out of memory", -1);
        buf_done(&url);
}

/* A list page's metadata and items, an item at a time where the body
 * scans (kube/list-scan.h), else parsed whole. Reports the items; the
 * metadata object into *ret_md (the caller's reference). Returns 0, or -1
 * with the reason in why. */
static int report_page(struct kube_watch *w, json_t **ret_md, char why[160]) {
        const char *body = w->body.data ? w->body.data : "";
        struct kube_list_scan sc;
        json_error_t e;

        if (kube_list_scan(body, w->body.len, &sc) < 0 || !sc.has_items || !sc.metadata.len) {
                json_t *list = json_loadb(body, w->body.len, 0, &e);
                const json_t *items = json_object_get(list, "items"), *item;
                size_t i;
                if (!list || !json_is_array(items)) {
                        snprintf(why, 160, "%.150s", list ? "malformed list: no items" : e.text);
                        json_decref(list);
                        return -1;
                }
                *ret_md = json_incref(json_object_get(list, "metadata"));
                json_array_foreach(items, i, item)
                        client_report_upsert(w, item, true);
                json_decref(list);
                return 0;
        }
        *ret_md = json_loadb(body + sc.metadata.off, sc.metadata.len, 0, &e);
        for (size_t i = 0; i < sc.n_items && *ret_md; i++) {
                json_t *item = json_loadb(body + sc.items[i].off, sc.items[i].len, JSON_DECODE_ANY, &e);
                if (!item) {
                        snprintf(why, 160, "malformed list item %zu: %.100s", i, e.text);
                        json_decref(*ret_md);
                        *ret_md = NULL;
                        break;
                }
                client_report_upsert(w, item, true);
                json_decref(item);
        }
        if (!*ret_md && !why[0])
                snprintf(why, 160, "malformed list metadata: %.100s", e.text);
        kube_list_scan_done(&sc);
        return *ret_md ? 0 : -1;
}

/* A complete list page: report its items, then the next page or the watch. */
static void finish_list_page(struct kube_watch *w) {
        char why[160] = "";
        json_t *md = NULL;

        if (report_page(w, &md, why) < 0) {
                client_failed(w, why, -1);
                return;
        }
        const char *rv = json_string_value(json_object_get(md, "resourceVersion"));
        const char *cont = json_string_value(json_object_get(md, "continue"));
        if (!rv || !*rv) {
                client_failed(w, "malformed list: no resourceVersion", -1);
                json_decref(md);
                return;
        }
        client_stop_transfer(w);
        w->pages++;
        client_set_str(&w->rv, rv);
        if (cont && *cont) {
                client_set_str(&w->cont, cont);
                json_decref(md);
                watch_begin_list(w);
                return;
        }
        json_decref(md);
        client_set_str(&w->cont, NULL);
        buf_done(&w->body);     /* a page's room (about 1 MB); watch events need little */

        size_t listed = w->seen.len;
        report_unlisted(w);
        /* A "0" list answered in pages: this server has no watch cache for
         * it, so later lists are paged too (client-go's paginatedResult). */
        if (strcmp(w->list_rv, "0") == 0 && w->pages > 1)
                w->paginated = true;
        w->pages = 0;
        w->rv_refused = false;
        w->n_lists++;
        if (w->unserved)
                log_info("%s: served again, listed", w->path);
        w->unserved = false;
        client_healthy(w);
        log_v(2, "%s: listed %zu objects at resourceVersion %s", w->path, listed, w->rv);
        w->fn(w->userdata, KUBE_EVENT_SYNCED, NULL, NULL);
        client_watch_begin(w);
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
        client_set_str(&w->cont, NULL);
        choose_list(w);
        seen_clear(w);
        report_unlisted(w);
        w->fn(w->userdata, KUBE_EVENT_SYNCED, NULL, NULL);
        client_healthy(w);
        client_retry_in(w, KUBE_BACKOFF_CAP_MS, CLIENT_WAIT_SERVER);
        log_v(4, "%s: HTTP %ld, listing again in %d ms", w->path, code, KUBE_BACKOFF_CAP_MS);
}

/* An error response's Status: "HTTP 500: message". too_large: its cause is
 * ResourceVersionTooLarge (the server is behind the version asked for). */
static void describe_status(struct kube_watch *w, long code, char *out, size_t outlen, bool *too_large) {
        json_t *st = json_loadb(w->body.data ? w->body.data : "", w->body.len, 0, NULL);
        const char *msg = json_string_value(json_object_get(st, "message"));
        const json_t *causes = json_object_get(json_object_get(st, "details"), "causes");
        size_t i;
        const json_t *cause;

        *too_large = msg && strstr(msg, "Too large resource version");
        json_array_foreach(causes, i, cause)
                if (json_is_string(json_object_get(cause, "reason")) &&
                    strcmp(json_string_value(json_object_get(cause, "reason")), "ResourceVersionTooLarge") == 0)
                        *too_large = true;
        snprintf(out, outlen, "HTTP %ld%s%.200s", code, msg ? ": " : "", msg ? msg : "");
        json_decref(st);
}

/* The server refused what the request asked for (400, 422, 414: not a
 * version it can read; 410: one too old; 504 ResourceVersionTooLarge: one
 * it has not reached). Returns true when that was handled by listing
 * again: never a lost update, and never a retry of the same refusal. */
bool client_version_refused(struct kube_watch *w, long code, bool too_large, const char *what) {
        bool gone = code == 410, bad = code == 400 || code == 422 || code == 414;

        if (!gone && !bad && !(code == 504 && too_large))
                return false;
        if (w->phase == CLIENT_PHASE_WATCH) {
                if (gone)
                        log_v(2, "%s: watch from resourceVersion %s: %s (410 Gone), relisting", w->path, w->rv, what);
                else
                        log_warning("%s: the API server refused resourceVersion \"%.64s\" (%s); relisting", w->path,
                                    w->rv, what);
                if (w->refusals++ == 0) {
                        client_relist(w, !gone);
                        return true;
                }
                /* Refused again before a watch delivered: the server
                 * refuses what it just listed. List again, but after a
                 * backoff, not in a loop. */
                client_stop_transfer(w);
                seen_clear(w);
                client_set_str(&w->cont, NULL);
                w->rv_refused |= !gone;
                client_failed(w, what, -1);     /* logged as the watch's */
                w->phase = CLIENT_PHASE_LIST;
                choose_list(w);
                return true;
        }
        if (w->cont) {
                /* The continue token expired: the whole list again, in one
                 * piece, as client-go's pager does. */
                log_v(2, "%s: list continue token refused (%s), listing again whole", w->path, what);
                client_stop_transfer(w);
                client_set_str(&w->cont, NULL);
                seen_clear(w);
                w->list_paged = false;
                w->pages = 0;
                watch_begin_list(w);
                return true;
        }
        if (*w->list_rv) {
                log_v(2, "%s: list at resourceVersion \"%.64s\" refused (%s), listing consistently", w->path,
                      w->list_rv, what);
                client_relist(w, true);
                return true;
        }
        return false;
}

void client_status_error(struct kube_watch *w, long code) {
        char what[256];
        bool too_large;

        describe_status(w, code, what, sizeof what, &too_large);
        if (client_version_refused(w, code, too_large, what))
                return;
        if (code == 401) {
                log_v(2, "%s: 401 Unauthorized, re-reading the token", w->path);
                kube_transport_reload_token(w->client->transport);
        }
        /* client-go honours Retry-After on a 429 and any 5xx. */
        client_failed(w, what, code == 429 || code >= 500 ? kube_request_retry_after(w->req) : -1);
}

static void on_list_done(void *userdata, enum kube_request_end end, const char *error) {
        struct kube_watch *w = userdata;
        long code = kube_request_status(w->req);

        client_report_request(w);
        if (end != KUBE_REQUEST_COMPLETE)
                client_failed(w, error ? error : "failed", -1);
        else if (w->optional && (code == 404 || code == 403))
                not_served(w, code);
        else if (code != 200)
                client_status_error(w, code);
        else
                finish_list_page(w);
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
                client_stop_transfer(w);
                w->retry = ev_timer_cancel(c->loop, w->retry);
                seen_clear(w);
                buf_done(&w->body);
                free(w->path);
                free(w->label_selector);
                free(w->field_selector);
                free(w->rv);
                free(w->list_rv);
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
        if (!w->path || (o->label_selector && !w->label_selector) || (o->field_selector && !w->field_selector)) {
                free(w->path);
                free(w->label_selector);
                free(w->field_selector);
                free(w);
                return -ENOMEM;
        }
        w->page_size = o->page_size ? o->page_size : DEFAULT_PAGE;
        w->idle_ms = o->idle_timeout_ms ? o->idle_timeout_ms : DEFAULT_IDLE_MS;
        w->fn = fn;
        w->keys = o->keys;
        w->optional = o->optional;
        w->userdata = userdata;
        w->next = c->watches;
        c->watches = w;
        choose_list(w);
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
