/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A reflector's watch: the stream of events from the last resourceVersion,
 * each passed to the consumer as it arrives, and what its end means.
 *
 * Principle: a watch that delivered, or that lasted, ended for no reason
 * worth waiting over (the server's timeoutSeconds, a load balancer, a
 * dropped connection, "Transferred a partial file"): it is opened again at
 * once from the last version, and nothing is lost. One that closes at once
 * with nothing (client-go's "very short watch") is opened again at once
 * too, but the second in a row waits a backoff of its own, doubling while
 * watches keep ending so, so that a server or a proxy that does that to
 * every watch is not hammered. The server did serve such a watch, so it
 * is no failure: the errors before it are over, and their backoff starts
 * over (a burst of 500s, a cut, a 500 again: the first step, not the
 * third). An ERROR event is the watch's status, read as a response's
 * would be (reflector.c).
 */
#include "kube/client-watch.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ev/ev.h"
#include "kube/decode.h"
#include "kube/proto.h"
#include "util/log.h"

/* A watch that ends sooner than this without a single event failed; one
 * that lasts is healthy before its first event. */
#define SHORT_WATCH_MS 1000
/* An error Status is small; more of a non-200 body is not kept. */
#define ERROR_BODY_MAX (64 * 1024)

static void on_settled(struct ev_loop *l, void *userdata) {
        struct kube_watch *w = userdata;
        (void) l;
        w->settle = NULL;
        w->refusals = 0;
        w->short_watches = 0;
        reflector_healthy(w);
}

/* A watch is counted when its response headers are complete, as client-go
 * counts it when the response starts. One the server accepted and keeps
 * open is healthy once it has lasted, even before its first event (a
 * quiet resource sends only bookmarks, a minute apart). */
void client_watch_headers(struct kube_watch *w) {
        reflector_report_request(w);
        /* The framing is the response's: protobuf when asked for and
         * served, JSON lines otherwise (a resource without protobuf). */
        w->stream.framed = kube_proto_media(kube_request_content_type(w->req));
        if (kube_request_status(w->req) == 200) {
                w->settle = ev_timer_cancel(w->client->loop, w->settle);
                w->settle = ev_timer_add(w->client->loop, SHORT_WATCH_MS, on_settled, w);
        }
}

static void on_idle(struct ev_loop *l, void *userdata) {
        struct kube_watch *w = userdata;
        (void) l;
        w->idle = NULL;
        log_warning("%s: watch silent for %llu ms, restarting it", w->path, (unsigned long long) w->idle_ms);
        w->n_restarts++;
        reflector_report_request(w);      /* a watch whose headers never came */
        reflector_stop_transfer(w);
        w->client->resume(w);           /* a watch again, from w->rv */
}

static void arm_idle(struct kube_watch *w) {
        w->idle = ev_timer_cancel(w->client->loop, w->idle);
        w->idle = ev_timer_add(w->client->loop, w->idle_ms, on_idle, w);
}

/* An ERROR event ends the watch: the server closes it after one. */
static bool watch_error_event(struct kube_watch *w, const struct kube_watch_event *ev) {
        w->stop_code = ev->code ? ev->code : 500;
        reflector_set_str(&w->stop_text, NULL);
        if (asprintf(&w->stop_text, "%s%s%s", ev->reason ? ev->reason : "", ev->reason && ev->message ? ": " : "",
                     ev->message ? ev->message : "") < 0)
                abort();
        return false;
}

/* One watch event line. Returns false when the watch must stop. */
static bool handle_event_line(void *userdata, const char *line, size_t len) {
        struct kube_watch *w = userdata;
        struct kube_watch_event ev;
        bool go_on = true;
        char why[160];

        if ((w->stream.framed ? kube_proto_watch_event(line, len, &ev, why, sizeof why)
                              : kube_watch_event_parse(line, len, &ev, why, sizeof why)) < 0) {
                log_warning("%s: malformed watch event (%s), ignoring", w->path, why);
                return true;
        }
        switch (ev.type) {
        case KUBE_WATCH_INCOMPLETE:
                log_warning("%s: watch event without type or object, ignoring", w->path);
                break;
        case KUBE_WATCH_ERROR:
                go_on = watch_error_event(w, &ev);
                break;
        case KUBE_WATCH_BOOKMARK:
                break;          /* only the resourceVersion matters */
        case KUBE_WATCH_ADDED:
        case KUBE_WATCH_MODIFIED:
                reflector_report_upsert(w, ev.object, false);
                break;
        case KUBE_WATCH_DELETED: {
                char *k = kube_object_key(ev.object);
                if (k)
                        w->fn(w->userdata, KUBE_EVENT_DELETE, k, ev.object);
                free(k);
                break;
        }
        case KUBE_WATCH_UNKNOWN:
                log_warning("%s: unknown watch event type \"%.32s\", ignoring", w->path, ev.type_name);
                break;
        }
        /* An ERROR's object is a Status, not a version; an unusable
         * version (none, empty, not a string) is not remembered. */
        if (ev.rv && ev.type != KUBE_WATCH_ERROR)
                reflector_set_str(&w->rv, ev.rv);
        if (go_on && !w->got_event) {
                w->got_event = true;
                w->refusals = 0;
                w->short_watches = 0;
                reflector_healthy(w);
        }
        kube_watch_event_done(&ev);
        return go_on;
}

static void on_event_oversize(void *userdata, size_t len, const char *head, size_t head_len) {
        struct kube_watch *w = userdata;
        char what[400];

        if (w->stream.framed)
                kube_proto_event_describe(head, head_len, what, sizeof what);
        else
                kube_watch_event_describe(head, head_len, what, sizeof what);
        log_warning("%s: a watch event of %zu bytes (%s) is over the %zu MiB limit; skipped, the object keeps "
                    "its previous version, ignoring",
                    w->path, len, *what ? what : "unnamed", KUBE_WATCH_MAX_EVENT >> 20);
        w->got_event = true;
}

static const struct kube_watch_stream_ops stream_ops = {
        .line = handle_event_line,
        .oversize = on_event_oversize,
};

bool client_watch_data(struct kube_watch *w, const char *data, size_t n) {

        if (kube_request_status(w->req) != 200) {
                /* A Status, read at the end. */
                if (w->body.len < ERROR_BODY_MAX)
                        buf_put(&w->body, data, n < ERROR_BODY_MAX - w->body.len ? n : ERROR_BODY_MAX - w->body.len);
                return true;
        }
        arm_idle(w);
        return kube_watch_stream_feed(&w->stream, data, n, &stream_ops, w);
}

/* The stream ended, cleanly (timeoutSeconds) or not (error: why). */
static enum reflector_next watch_ended(struct kube_watch *w, const char *error) {
        uint64_t lasted = ev_now_ms(w->client->loop) - w->watch_started;

        w->n_restarts += error != NULL;
        /* The server served this watch and ended it without an ERROR:
         * the failures before it are over, and a refusal of the next one
         * is news (the history compacted meanwhile), not the server
         * refusing what it just listed, so it relists at once. A 200 that
         * ends in an ERROR event does not count: that is how
         * kube-apiserver refuses a watch. */
        w->refusals = 0;
        reflector_healthy(w);
        /* The first such watch is one cut, as a healthy one's: at once.
         * From the second in a row on, they back off. */
        if (!w->got_event && lasted < SHORT_WATCH_MS && w->short_watches++ > 0) {
                uint64_t d = kube_backoff_ms(w->short_watches - 1, &w->client->seed);
                log_v(2, "%s: watch ended%s%s after %llu ms without an event, again in %llu ms (short watch %u)",
                      w->path, error ? ": " : "", error ? error : "", (unsigned long long) lasted,
                      (unsigned long long) d, w->short_watches);
                reflector_retry_in(w, d, CLIENT_WAIT_BACKOFF);
                return REFLECTOR_WAIT;
        }
        if (w->got_event || lasted >= SHORT_WATCH_MS)
                w->short_watches = 0;
        log_v(2, "%s: watch ended%s%s after %llu ms, resuming at once from %s", w->path, error ? ": " : "",
              error ? error : "", (unsigned long long) lasted, w->rv);
        reflector_stop_transfer(w);
        return REFLECTOR_WATCH;
}

enum reflector_next client_watch_done(struct kube_watch *w, enum kube_request_end end, const char *error) {
        long code = kube_request_status(w->req);
        enum reflector_next next;

        reflector_report_request(w);
        if (w->stop_code) {
                /* An ERROR event: its Status says why, as a response's would. */
                char what[320];
                snprintf(what, sizeof what, "ERROR %ld %s", w->stop_code, w->stop_text);
                if (reflector_version_refused(w, w->stop_code, strstr(what, "Too large resource version") != NULL,
                                              what, &next))
                        return next;
                w->n_restarts++;
                reflector_failed(w, what, -1);
                return REFLECTOR_WAIT;
        }
        if (code == 200)
                return watch_ended(w, end == KUBE_REQUEST_COMPLETE ? NULL : error);
        w->n_restarts++;
        if (end == KUBE_REQUEST_COMPLETE)
                return reflector_status_error(w, code);
        reflector_failed(w, error ? error : "failed", -1);
        return REFLECTOR_WAIT;
}

void client_watch_url(struct kube_watch *w, struct buf *url) {
        char t[16];

        w->phase = CLIENT_PHASE_WATCH;
        w->got_event = false;
        w->watch_started = ev_now_ms(w->client->loop);
        reflector_base_url(w, url);
        kube_url_param(url, "watch", "1");
        kube_url_param(url, "resourceVersion", w->rv);
        kube_url_param(url, "allowWatchBookmarks", "true");
        /* Rotate watches every 5-10 minutes, as client-go does, so load
         * balancers in front of API servers spread them. */
        snprintf(t, sizeof t, "%u", 300 + (unsigned) rand_r(&w->client->seed) % 300);
        kube_url_param(url, "timeoutSeconds", t);
}

void client_watch_started(struct kube_watch *w) {
        arm_idle(w);
}
