/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reflector's bookkeeping (reflector.h): what is reported, waiting,
 * failing, recovering, and what an error response means.
 *
 * Principle of recovery: waiting is for failures, never for news. A watch
 * that ends after it delivered something, or after it lasted, is simply
 * opened again from the last resourceVersion, at once, however it ended; a
 * 410 (the version is gone) or a version the server refuses is a reason to
 * list again now. Only consecutive failures (no answer, 5xx, 429, a watch
 * that closes at once with nothing) back off, and the count starts over as
 * soon as a list completes or a watch delivers. A 429 or 5xx that says
 * when to come back (Retry-After) is taken at its word.
 */
#include "kube/reflector.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ev/ev.h"
#include "kube/decode.h"
#include "kube/proto.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/log.h"

void reflector_set_str(char **p, const char *v) {
        free(*p);
        *p = v ? xstrdup(v) : NULL;
}

void reflector_seen_clear(struct kube_watch *w) {
        void *v;
        for (size_t i = 0; hmap_next(&w->seen, &i, NULL, &v);)
                free(v);
        hmap_done(&w->seen);
}

void reflector_report_upsert(struct kube_watch *w, const json_t *obj, bool listing) {
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
        g->keys = xrealloc(g->keys, (g->n + 1) * sizeof *g->keys);
        g->keys[g->n++] = xstrdup(key);
}

/* Whatever the consumer holds but the list just ended did not have is
 * gone. Its keys are collected first: deleting changes what it iterates. */
void reflector_report_unlisted(struct kube_watch *w) {
        struct gone g = {.seen = &w->seen};
        if (w->keys)
                w->keys(w->userdata, collect_gone, &g);
        for (size_t j = 0; j < g.n; j++) {
                w->fn(w->userdata, KUBE_EVENT_DELETE, g.keys[j], NULL);
                free(g.keys[j]);
        }
        free(g.keys);
        reflector_seen_clear(w);
}

/* The current request, once: its status so far (0 when no response came). */
void reflector_report_request(struct kube_watch *w) {
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

void reflector_stop_transfer(struct kube_watch *w) {
        w->idle = ev_timer_cancel(w->client->loop, w->idle);
        w->settle = ev_timer_cancel(w->client->loop, w->settle);
        w->req = kube_request_free(w->req);
        buf_clear(&w->body);
        kube_watch_stream_reset(&w->stream);
        w->stop_code = 0;
        reflector_set_str(&w->stop_text, NULL);
}

static void on_retry(struct ev_loop *l, void *userdata) {
        struct kube_watch *w = userdata;
        (void) l;
        w->retry = NULL;
        w->waiting = CLIENT_WAIT_NONE;
        w->client->resume(w);
}

void reflector_retry_in(struct kube_watch *w, uint64_t ms, enum client_waiting why) {
        reflector_stop_transfer(w);
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
void reflector_failed(struct kube_watch *w, const char *what, int64_t retry_after_ms) {
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
        reflector_retry_in(w, d, retry_after_ms > 0 ? CLIENT_WAIT_SERVER : CLIENT_WAIT_BACKOFF);
}

/* The server answered as it should (a list completed, a watch delivered):
 * the backoff starts over. When this ends the client's failing state, it
 * says so, and the other reflectors that wait out a backoff try now: the
 * server is back for them too. */
void reflector_healthy(struct kube_watch *w) {
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

/* List again: after a 410 from "not older than" rv (refused false: the
 * version is too old to watch from, not to list at), or because the server
 * would not take rv at all (refused: a consistent list). */
void reflector_relist(struct kube_watch *w, bool refused) {
        reflector_stop_transfer(w);
        reflector_seen_clear(w);
        reflector_set_str(&w->cont, NULL);
        if (refused)
                w->rv_refused = true;
        w->phase = CLIENT_PHASE_LIST;
        reflector_choose_list(w);
}

int reflector_start_request(struct kube_watch *w, const char *url, long timeout_s, const struct kube_request_ops *ops) {
        int r = kube_request_start(w->client->transport, url, timeout_s, ops, w, &w->req);
        if (r < 0)
                return r;
        w->started = clock_mono_s() - w->waited;         /* client-go times its wait too */
        w->reported = false;
        return 0;
}

void reflector_base_url(struct kube_watch *w, struct buf *url) {
        buf_clear(url);
        buf_puts(url, kube_transport_server(w->client->transport));
        buf_puts(url, w->path);
        if (w->label_selector)
                kube_url_param(url, "labelSelector", w->label_selector);
        if (w->field_selector)
                kube_url_param(url, "fieldSelector", w->field_selector);
}

/* What a new list asks for, as client-go's reflector: "0" first (the watch
 * cache may answer, whole); then not older than the last version seen,
 * whole unless the server paged a "0" list (no watch cache: pages keep
 * each request small); a consistent read, in pages, once the server
 * refused the version. A retry of a failed page asks the same again. */
void reflector_choose_list(struct kube_watch *w) {
        if (w->rv_refused) {
                reflector_set_str(&w->list_rv, "");
                w->list_paged = true;
        } else if (!w->rv) {
                reflector_set_str(&w->list_rv, "0");
                w->list_paged = true;
        } else {
                reflector_set_str(&w->list_rv, w->rv);
                w->list_paged = w->paginated;
        }
        w->pages = 0;
}

/* An error response's Status: "HTTP 500: message". too_large: its cause is
 * ResourceVersionTooLarge (the server is behind the version asked for). */
static void describe_status(struct kube_watch *w, long code, char *out, size_t outlen, bool *too_large) {
        const char *body = w->body.data ? w->body.data : "";
        json_t *st = NULL;
        char why[160];

        if (kube_proto_is(body, w->body.len))
                (void) kube_proto_object(body, w->body.len, &st, why, sizeof why);     /* none: no message */
        else
                st = json_loadb(body, w->body.len, 0, NULL);
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
bool reflector_version_refused(struct kube_watch *w, long code, bool too_large, const char *what,
                               enum reflector_next *next) {
        bool gone = code == 410, bad = code == 400 || code == 422 || code == 414;

        if (!gone && !bad && !(code == 504 && too_large))
                return false;
        *next = REFLECTOR_LIST;
        if (w->phase == CLIENT_PHASE_WATCH) {
                if (gone)
                        log_v(2, "%s: watch from resourceVersion %s: %s (410 Gone), relisting", w->path, w->rv, what);
                else
                        log_warning("%s: the API server refused resourceVersion \"%.64s\" (%s); relisting", w->path,
                                    w->rv, what);
                if (w->refusals++ == 0) {
                        reflector_relist(w, !gone);
                        return true;
                }
                /* Refused again before a watch delivered: the server
                 * refuses what it just listed. List again, but after a
                 * backoff, not in a loop. */
                reflector_stop_transfer(w);
                reflector_seen_clear(w);
                reflector_set_str(&w->cont, NULL);
                w->rv_refused |= !gone;
                reflector_failed(w, what, -1);     /* logged as the watch's */
                w->phase = CLIENT_PHASE_LIST;
                reflector_choose_list(w);
                *next = REFLECTOR_WAIT;
                return true;
        }
        if (w->cont) {
                /* The continue token expired: the whole list again, in one
                 * piece, as client-go's pager does. */
                log_v(2, "%s: list continue token refused (%s), listing again whole", w->path, what);
                reflector_stop_transfer(w);
                reflector_set_str(&w->cont, NULL);
                reflector_seen_clear(w);
                w->list_paged = false;
                w->pages = 0;
                return true;
        }
        if (*w->list_rv) {
                log_v(2, "%s: list at resourceVersion \"%.64s\" refused (%s), listing consistently", w->path,
                      w->list_rv, what);
                reflector_relist(w, true);
                return true;
        }
        return false;
}

enum reflector_next reflector_status_error(struct kube_watch *w, long code) {
        enum reflector_next next;
        char what[256];
        bool too_large;

        describe_status(w, code, what, sizeof what, &too_large);
        if (reflector_version_refused(w, code, too_large, what, &next))
                return next;
        if (code == 401) {
                log_v(2, "%s: 401 Unauthorized, re-reading the token", w->path);
                kube_transport_reload_token(w->client->transport);
        }
        /* client-go honours Retry-After on a 429 and any 5xx. */
        reflector_failed(w, what, code == 429 || code >= 500 ? kube_request_retry_after(w->req) : -1);
        return REFLECTOR_WAIT;
}
