/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the reflector: the consumer only ever sees "this object now
 * looks like this" and "this object is gone", in order, whatever happened
 * on the wire (pages, dropped watches, 410s, server restarts). The
 * reflector owns the bookkeeping for that: the last resourceVersion, and the
 * set of keys it has reported, so that a relist can report what vanished.
 */
#include "kube/client.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "ev/ev.h"
#include "kube/kubeconfig.h"
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
        CURL *easy;
        struct curl_slist *headers;
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
        struct kube_conn *conn;
        struct kube_rate rate;          /* --kube-api-qps, --kube-api-burst */
        CURLM *multi;
        struct ev_timer *curl_timer;
        struct kube_watch *watches;
        unsigned seed;
        kube_request_fn observer;
        void *observer_ud;
        char *host;             /* the server's host[:port], for the observer */
};

static void watch_begin_list(struct kube_watch *w);
static void watch_begin_watch(struct kube_watch *w);

/* --- libcurl multi-socket glue --- */

static void check_done(struct kube_client *c);

static void on_socket_event(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct kube_client *c = userdata;
        int flags = 0, running;
        (void) l;
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                flags |= CURL_CSELECT_IN;
        if (events & EPOLLOUT)
                flags |= CURL_CSELECT_OUT;
        if (events & EPOLLERR)
                flags |= CURL_CSELECT_ERR;
        curl_multi_socket_action(c->multi, fd, flags, &running);
        check_done(c);
}

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
        struct kube_client *c = userp;
        uint32_t events = 0;
        (void) easy;

        if (what == CURL_POLL_REMOVE) {
                ev_io_del(c->loop, fd);
                curl_multi_assign(c->multi, fd, NULL);
                return 0;
        }
        if (what & CURL_POLL_IN)
                events |= EPOLLIN;
        if (what & CURL_POLL_OUT)
                events |= EPOLLOUT;
        if (socketp) {
                ev_io_mod(c->loop, fd, events);
        } else {
                if (ev_io_add(c->loop, fd, events, on_socket_event, c) < 0)
                        return -1;
                curl_multi_assign(c->multi, fd, c);
        }
        return 0;
}

static void on_curl_timer(struct ev_loop *l, void *userdata) {
        struct kube_client *c = userdata;
        int running;
        (void) l;
        c->curl_timer = NULL;
        curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        check_done(c);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp) {
        struct kube_client *c = userp;
        (void) multi;
        c->curl_timer = ev_timer_cancel(c->loop, c->curl_timer);
        if (timeout_ms >= 0)
                c->curl_timer = ev_timer_add(c->loop, (uint64_t) timeout_ms, on_curl_timer, c);
        return 0;
}

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
        long code = 0;

        if (w->reported || !w->easy || !c->observer)
                return;
        w->reported = true;
        curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &code);
        c->observer(c->observer_ud, &(struct kube_request_report) {
                .method = "GET",
                .host = c->host,
                .code = code > 0 && code < 1000 ? (unsigned) code : 0,
                .watch = w->phase == PHASE_WATCH,
                .seconds = monotonic_s() - w->started,
                .waited = w->waited,
                .response_bytes = w->body.len,
        });
}

/* A watch is counted when its response headers are complete (the empty
 * line), as client-go counts it when the response starts. */
static size_t on_watch_header(char *data, size_t size, size_t nmemb, void *userdata) {
        struct kube_watch *w = userdata;
        size_t n = size * nmemb;

        if ((n == 2 && data[0] == '\r' && data[1] == '\n') || (n == 1 && data[0] == '\n'))
                report_request(w);
        return n;
}

void kube_client_set_observer(struct kube_client *c, kube_request_fn fn, void *userdata) {
        c->observer = fn;
        c->observer_ud = userdata;
}

static void stop_transfer(struct kube_watch *w) {
        w->idle = ev_timer_cancel(w->client->loop, w->idle);
        if (w->easy) {
                curl_multi_remove_handle(w->client->multi, w->easy);
                curl_easy_cleanup(w->easy);
                w->easy = NULL;
        }
        curl_slist_free_all(w->headers);
        w->headers = NULL;
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
static bool handle_event_line(struct kube_watch *w, const char *line, size_t len) {
        json_error_t e;
        json_t *ev = json_loadb(line, len, 0, &e);
        const char *type;
        const json_t *obj;
        bool go_on = true;

        if (!ev || !json_is_object(ev)) {
                log_warning("%s: malformed watch event (%s), ignoring", w->path, ev ? "not an object" : e.text);
                json_decref(ev);
                return true;
        }
        type = json_string_value(json_object_get(ev, "type"));
        obj = json_object_get(ev, "object");
        const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
        if (!type || !json_is_object(obj)) {
                log_warning("%s: watch event without type or object, ignoring", w->path);
        } else if (strcmp(type, "ERROR") == 0) {
                json_int_t code = json_integer_value(json_object_get(obj, "code"));
                const char *msg = json_string_value(json_object_get(obj, "message"));
                if (code == 410) {
                        log_info("%s: resourceVersion %s is too old (410 Gone), relisting", w->path,
                                 w->rv ? w->rv : "?");
                        go_on = false;
                } else {
                        log_warning("%s: watch error %lld: %s, will retry", w->path, (long long) code,
                                    msg ? msg : "");
                }
                rv = NULL;
        } else if (strcmp(type, "BOOKMARK") == 0) {
                /* Only the resourceVersion matters. */
        } else if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0) {
                report_upsert(w, obj, false);
        } else if (strcmp(type, "DELETED") == 0) {
                char *k = object_key(obj);
                if (k)
                        report_delete(w, k, obj);
                free(k);
        } else {
                log_warning("%s: unknown watch event type \"%.32s\", ignoring", w->path, type);
        }
        if (rv)
                set_str(&w->rv, rv);
        w->got_event = true;
        json_decref(ev);
        return go_on;
}

static size_t on_watch_data(char *data, size_t size, size_t nmemb, void *userdata) {
        struct kube_watch *w = userdata;
        size_t n = size * nmemb;
        long code = 0;

        curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &code);
        buf_put(&w->body, data, n);
        if (code != 200)
                return n;       /* an error Status: handled at completion */
        arm_idle(w);
        size_t start = 0;
        for (size_t i = 0; i < w->body.len; i++) {
                if (w->body.data[i] != '\n')
                        continue;
                if (i > start && !handle_event_line(w, w->body.data + start, i - start)) {
                        /* 410: abort this transfer; completion relists. */
                        w->phase = PHASE_LIST;
                        return 0;
                }
                start = i + 1;
        }
        memmove(w->body.data, w->body.data + start, w->body.len - start);
        buf_truncate(&w->body, w->body.len - start);
        return n;
}

static size_t on_list_data(char *data, size_t size, size_t nmemb, void *userdata) {
        struct kube_watch *w = userdata;
        buf_put(&w->body, data, size * nmemb);
        return size * nmemb;
}

/* --- requests --- */

static void append_param(struct buf *url, const char *name, const char *value) {
        char *esc = curl_easy_escape(NULL, value, 0);
        buf_printf(url, "%c%s=%s", strchr(url->data, '?') ? '&' : '?', name, esc ? esc : "");
        curl_free(esc);
}

static int start_request(struct kube_watch *w, const char *url, bool watching) {
        struct kube_client *c = w->client;
        struct kube_conn *conn = c->conn;
        CURL *e = curl_easy_init();
        if (!e)
                return -ENOMEM;

        w->headers = curl_slist_append(NULL, "Accept: application/json");
        if (conn->token) {
                struct buf h = BUF_INIT;
                buf_printf(&h, "Authorization: Bearer %s", conn->token);
                w->headers = curl_slist_append(w->headers, h.data);
                explicit_bzero(h.data, h.len);
                buf_done(&h);
        }
        curl_easy_setopt(e, CURLOPT_URL, url);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, w->headers);
        curl_easy_setopt(e, CURLOPT_USERAGENT, "kproxy/" KPROXY_VERSION);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https,http");
        curl_easy_setopt(e, CURLOPT_PRIVATE, w);
        if (conn->ca_pem) {
                struct curl_blob ca = {conn->ca_pem, conn->ca_pem_len, CURL_BLOB_NOCOPY};
                curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &ca);
        }
        if (conn->cert_pem && conn->key_pem) {
                struct curl_blob cert = {conn->cert_pem, conn->cert_pem_len, CURL_BLOB_NOCOPY};
                struct curl_blob key = {conn->key_pem, conn->key_pem_len, CURL_BLOB_NOCOPY};
                curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cert);
                curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
                curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &key);
                curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
        }
        if (conn->insecure) {
                curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
                curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
        }
        if (watching) {
                curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_watch_data);
                curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_watch_header);
                curl_easy_setopt(e, CURLOPT_HEADERDATA, w);
        } else {
                curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_list_data);
                curl_easy_setopt(e, CURLOPT_TIMEOUT, (long) LIST_TIMEOUT_S);
        }
        curl_easy_setopt(e, CURLOPT_WRITEDATA, w);
        w->easy = e;
        w->started = monotonic_s() - w->waited;         /* client-go times its wait too */
        w->reported = false;
        if (curl_multi_add_handle(c->multi, e) != CURLM_OK) {
                stop_transfer(w);
                return -ENOMEM;
        }
        return 0;
}

static void base_url(struct kube_watch *w, struct buf *url) {
        buf_clear(url);
        buf_puts(url, w->client->conn->server);
        buf_puts(url, w->path);
        if (w->label_selector)
                append_param(url, "labelSelector", w->label_selector);
        if (w->field_selector)
                append_param(url, "fieldSelector", w->field_selector);
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
        append_param(&url, "limit", n);
        if (w->cont)
                append_param(&url, "continue", w->cont);
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
        append_param(&url, "watch", "1");
        append_param(&url, "resourceVersion", w->rv);
        append_param(&url, "allowWatchBookmarks", "true");
        /* Rotate watches every 5-10 minutes, as client-go does, so load
         * balancers in front of API servers spread them. */
        snprintf(t, sizeof t, "%u", 300 + (unsigned) rand_r(&w->client->seed) % 300);
        append_param(&url, "timeoutSeconds", t);
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

static void finish_transfer(struct kube_watch *w, CURLcode res) {
        long code = 0;
        curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &code);
        report_request(w);

        /* A 410 status, or a 410 ERROR event in the stream (the data callback
         * then switched the phase to LIST and aborted the transfer). */
        if (code == 410 || (res == CURLE_WRITE_ERROR && w->phase == PHASE_LIST)) {
                log_info("%s: 410 Gone, relisting", w->path);
                w->n_restarts++;
                relist(w);
                return;
        }
        if (code == 401) {
                log_warning("%s: 401 Unauthorized, re-reading the token and retrying", w->path);
                if (w->client->conn->token_file)
                        kube_conn_reload_token(w->client->conn);
                retry_later(w);
                return;
        }
        if (res != CURLE_OK) {
                log_warning("%s: %s: %s, will retry", w->path, w->phase == PHASE_LIST ? "list" : "watch",
                            curl_easy_strerror(res));
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

static void check_done(struct kube_client *c) {
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(c->multi, &left))) {
                if (m->msg != CURLMSG_DONE)
                        continue;
                struct kube_watch *w = NULL;
                curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **) &w);
                if (w && w->easy == m->easy_handle)
                        finish_transfer(w, m->data.result);
        }
}

/* --- lifecycle --- */

/* client-go's label: the URL's host, with its port when the URL has one
 * ("https://10.96.0.1:443/x" gives "10.96.0.1:443"). */
static char *server_host(const char *server) {
        const char *p = server ? strstr(server, "://") : NULL;
        p = p ? p + 3 : server ? server : "";
        size_t n = strcspn(p, "/?#");
        const char *at = memchr(p, '@', n);
        if (at) {
                n -= (size_t) (at + 1 - p);
                p = at + 1;
        }
        return strndup(p, n);
}

int kube_client_new(struct ev_loop *l, struct kube_conn *conn, struct kube_client **ret) {
        static bool global_init;
        struct kube_client *c;

        if (!global_init) {
                if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                        return -ENOMEM;
                global_init = true;
        }
        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        c->loop = l;
        c->conn = conn;
        c->seed = (unsigned) time(NULL) ^ (unsigned) getpid();
        kube_rate_init(&c->rate, 0, 0, ev_now_ms(l));
        c->host = server_host(conn->server);
        if (!c->host) {
                free(c);
                return -ENOMEM;
        }
        c->multi = curl_multi_init();
        if (!c->multi) {
                free(c->host);
                free(c);
                return -ENOMEM;
        }
        curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
        curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
        curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
        curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
        *ret = c;
        return 0;
}

void kube_client_set_rate(struct kube_client *c, float qps, int32_t burst) {
        kube_rate_init(&c->rate, qps, burst, ev_now_ms(c->loop));
}

/* golang.org/x/time/rate's reservations: tokens refill at qps up to burst,
 * and a request that finds none reserves the next one, so waiters queue in
 * order of arrival. */
void kube_rate_init(struct kube_rate *r, float qps, int32_t burst, uint64_t now_ms) {
        /* client-go's defaults for 0; a negative qps turns the limit off. */
        r->qps = qps == 0 ? 5 : qps;
        r->burst = burst <= 0 ? 10 : (double) burst;
        r->tokens = r->burst;
        r->last_ms = now_ms;
}

uint64_t kube_rate_take(struct kube_rate *r, uint64_t now_ms) {
        if (r->qps < 0)
                return 0;
        if (now_ms > r->last_ms) {
                r->tokens += (double) (now_ms - r->last_ms) * r->qps / 1000;
                if (r->tokens > r->burst)
                        r->tokens = r->burst;
                r->last_ms = now_ms;
        }
        r->tokens -= 1;
        return r->tokens >= 0 ? 0 : (uint64_t) (-r->tokens * 1000 / r->qps + 0.999);
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
        c->curl_timer = ev_timer_cancel(c->loop, c->curl_timer);
        curl_multi_cleanup(c->multi);
        free(c->host);
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
