/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A reflector's list: its pages (client-go's rate limit before each), their
 * items reported as they are read, then what the consumer held that the
 * list did not have reported gone, and the watch. An optional resource
 * the server does not serve (404) or show (403) is none, listed again
 * later.
 */
#include "kube/client-list.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ev/ev.h"
#include "kube/decode.h"
#include "kube/list-scan.h"
#include "kube/proto.h"
#include "util/clock.h"
#include "util/log.h"

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
        reflector_retry_in(w, wait, CLIENT_WAIT_THROTTLE);
        log_v(3, "%s: waiting %llu ms for client-side throttling (--kube-api-qps)", w->path,
              (unsigned long long) wait);
        return true;
}

bool client_list_data(struct kube_watch *w, const char *data, size_t n) {
        buf_put(&w->body, data, n);
        return true;
}

bool client_list_url(struct kube_watch *w, struct buf *url) {
        char n[16];

        if (throttled(w, CLIENT_PHASE_LIST))
                return false;
        w->phase = CLIENT_PHASE_LIST;
        reflector_base_url(w, url);
        if (w->cont) {
                /* The token holds the list's version; the server refuses both. */
                kube_url_param(url, "continue", w->cont);
        } else if (*w->list_rv) {
                kube_url_param(url, "resourceVersion", w->list_rv);
        }
        if (w->list_paged) {
                snprintf(n, sizeof n, "%u", w->page_size);
                kube_url_param(url, "limit", n);
        }
        return true;
}

static void report_item(void *userdata, const json_t *item) {
        reflector_report_upsert(userdata, item, true);
}

/* A list page's metadata and items, an item at a time: in protobuf as the
 * envelope says (whatever was asked for: a resource may answer JSON, and
 * the body's first bytes tell); in JSON where the body scans
 * (kube/list-scan.h), else parsed whole. Reports the items; the metadata
 * object into *ret_md (the caller's reference). Returns 0, or -1 with the
 * reason in why. */
static int report_page(struct kube_watch *w, json_t **ret_md, char why[160]) {
        const char *body = w->body.data ? w->body.data : "";
        struct kube_list_scan sc;
        json_error_t e;

        if (kube_proto_is(body, w->body.len))
                return kube_proto_list(body, w->body.len, ret_md, report_item, w, why, 160) < 0 ? -1 : 0;
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
                        reflector_report_upsert(w, item, true);
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
                reflector_report_upsert(w, item, true);
                json_decref(item);
        }
        if (!*ret_md && !why[0])
                snprintf(why, 160, "malformed list metadata: %.100s", e.text);
        kube_list_scan_done(&sc);
        return *ret_md ? 0 : -1;
}

/* A complete list page: report its items, then the next page or the watch. */
static enum reflector_next finish_list_page(struct kube_watch *w) {
        char why[160] = "";
        json_t *md = NULL;

        if (report_page(w, &md, why) < 0) {
                reflector_failed(w, why, -1);
                return REFLECTOR_WAIT;
        }
        const char *rv = json_string_value(json_object_get(md, "resourceVersion"));
        const char *cont = json_string_value(json_object_get(md, "continue"));
        if (!rv || !*rv) {
                reflector_failed(w, "malformed list: no resourceVersion", -1);
                json_decref(md);
                return REFLECTOR_WAIT;
        }
        reflector_stop_transfer(w);
        w->pages++;
        reflector_set_str(&w->rv, rv);
        if (cont && *cont) {
                reflector_set_str(&w->cont, cont);
                json_decref(md);
                return REFLECTOR_LIST;
        }
        json_decref(md);
        reflector_set_str(&w->cont, NULL);
        buf_done(&w->body);     /* a page's room (about 1 MB); watch events need little */

        size_t listed = w->seen.len;
        reflector_report_unlisted(w);
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
        reflector_healthy(w);
        log_v(2, "%s: listed %zu objects at resourceVersion %s", w->path, listed, w->rv);
        w->fn(w->userdata, KUBE_EVENT_SYNCED, NULL, NULL);
        return REFLECTOR_WATCH;
}

/* An optional resource this API server does not serve (404: older than
 * the resource) or will not show kproxy (403: RBAC without it): the
 * consumer holds none of it, and may go on; the list is tried again at the
 * backoff's cap, in case the server is upgraded or the role extended. Said
 * once, not per attempt. */
static enum reflector_next not_served(struct kube_watch *w, long code) {
        if (!w->unserved) {
                if (code == 404)
                        log_info("%s: not served by this API server (404); carrying on without it", w->path);
                else
                        log_warning("%s: 403 Forbidden: kproxy may not list it (its role lacks list and watch "
                                    "there); carrying on without it", w->path);
        }
        w->unserved = true;
        reflector_set_str(&w->cont, NULL);
        reflector_choose_list(w);
        reflector_seen_clear(w);
        reflector_report_unlisted(w);
        w->fn(w->userdata, KUBE_EVENT_SYNCED, NULL, NULL);
        reflector_healthy(w);
        reflector_retry_in(w, KUBE_BACKOFF_CAP_MS, CLIENT_WAIT_SERVER);
        log_v(4, "%s: HTTP %ld, listing again in %d ms", w->path, code, KUBE_BACKOFF_CAP_MS);
        return REFLECTOR_WAIT;
}

enum reflector_next client_list_done(struct kube_watch *w, enum kube_request_end end, const char *error) {
        long code = kube_request_status(w->req);

        reflector_report_request(w);
        if (end != KUBE_REQUEST_COMPLETE) {
                reflector_failed(w, error ? error : "failed", -1);
                return REFLECTOR_WAIT;
        }
        if (w->optional && (code == 404 || code == 403))
                return not_served(w, code);
        if (code != 200)
                return reflector_status_error(w, code);
        return finish_list_page(w);
}
