/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the reflector: the consumer only ever sees "this object now
 * looks like this" and "this object is gone", in order, whatever happened
 * on the wire (pages, dropped watches, 410s, server restarts). The
 * reflector owns the bookkeeping for that: the last resourceVersion, and the
 * set of keys it has listed, so that a relist can report what vanished.
 *
 * Principle of recovery (reflector.c): waiting is for failures, never for
 * news.
 *
 * A resourceVersion is opaque text: it is remembered as sent and handed
 * back, never parsed or compared. The first list asks for
 * resourceVersion="0" (the API server's watch cache may answer it whole, as
 * client-go's reflector asks); later lists ask for "not older than" the
 * last version, and for a consistent read ("") once the server refused
 * that version.
 *
 * This file is the client that holds the reflectors, and the one place
 * that starts a reflector's requests: the transport's callbacks for a list
 * (client-list.c) and a watch (client-watch.c) pass each response to its
 * phase, which says what comes next (the next page, a watch, a relist, or
 * a wait on the retry timer), and this file starts it. Below the phases,
 * reflector.c keeps the bookkeeping (backoff, health, the retry timer,
 * reports, what an error status means); below that, transport.c makes the
 * HTTPS requests on the event loop, watch-stream.c cuts a watch into
 * events, rate.c paces the requests.
 */
#include "kube/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ev/ev.h"
#include "kube/client-list.h"
#include "kube/client-watch.h"
#include "kube/reflector.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/log.h"

#define DEFAULT_PAGE 500
#define DEFAULT_IDLE_MS (5 * 60 * 1000)
#define LIST_TIMEOUT_S 300

static void apply(struct kube_watch *w, enum reflector_next next);

void kube_client_set_observer(struct kube_client *c, kube_request_fn fn, void *userdata) {
        c->observer = fn;
        c->observer_ud = userdata;
}

/* --- the transport's callbacks --- */

static bool on_list_data(void *userdata, const char *data, size_t n) {
        return client_list_data(userdata, data, n);
}

static void on_list_done(void *userdata, enum kube_request_end end, const char *error) {
        struct kube_watch *w = userdata;
        apply(w, client_list_done(w, end, error));
}

static const struct kube_request_ops list_ops = {
        .data = on_list_data,
        .done = on_list_done,
};

static bool on_watch_data(void *userdata, const char *data, size_t n) {
        return client_watch_data(userdata, data, n);
}

static void on_watch_headers(void *userdata) {
        client_watch_headers(userdata);
}

static void on_watch_done(void *userdata, enum kube_request_end end, const char *error) {
        struct kube_watch *w = userdata;
        apply(w, client_watch_done(w, end, error));
}

static const struct kube_request_ops watch_ops = {
        .data = on_watch_data,
        .headers_done = on_watch_headers,
        .done = on_watch_done,
};

/* --- the next request --- */

static void begin_list(struct kube_watch *w) {
        struct buf url = BUF_INIT;

        if (client_list_url(w, &url)) {
                log_v(4, "GET %s", url.data);
                if (reflector_start_request(w, url.data, LIST_TIMEOUT_S, &list_ops) < 0)
                        reflector_failed(w, "out of memory", -1);
        }
        buf_done(&url);
}

static void begin_watch(struct kube_watch *w) {
        struct buf url = BUF_INIT;

        client_watch_url(w, &url);
        log_v(4, "GET %s", url.data);
        if (reflector_start_request(w, url.data, 0, &watch_ops) < 0)
                reflector_failed(w, "out of memory", -1);
        else
                client_watch_started(w);
        buf_done(&url);
}

static void apply(struct kube_watch *w, enum reflector_next next) {
        switch (next) {
        case REFLECTOR_WAIT:
                break;
        case REFLECTOR_LIST:
                begin_list(w);
                break;
        case REFLECTOR_WATCH:
                begin_watch(w);
                break;
        }
}

/* The retry timer fired, or a watch went silent: the current phase again
 * (a watch once there is a version to watch from). */
static void resume(struct kube_watch *w) {
        apply(w, w->phase == CLIENT_PHASE_WATCH && w->rv ? REFLECTOR_WATCH : REFLECTOR_LIST);
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
        c->resume = resume;
        c->seed = (unsigned) time(NULL) ^ (unsigned) getpid();
        kube_rate_init(&c->rate, 0, 0, ev_now_ms(l));
        *ret = c;
        return 0;
}

int kube_client_set_content_type(struct kube_client *c, const char *content_type, const char *accept_types) {
        _cleanup_free_ char *v = NULL;

        if (accept_types && *accept_types)
                return kube_transport_set_accept(c->transport, accept_types);
        if (!content_type || !*content_type)
                content_type = "application/vnd.kubernetes.protobuf";
        if (asprintf(&v, "%s, */*", content_type) < 0)
                abort();
        return kube_transport_set_accept(c->transport, v);
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
                reflector_stop_transfer(w);
                w->retry = ev_timer_cancel(c->loop, w->retry);
                reflector_seen_clear(w);
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
        reflector_choose_list(w);
        begin_list(w);
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
