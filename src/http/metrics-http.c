/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metrics server's paths, as upstream's metrics server serves them:
 * /metrics, /healthz (component-base's healthz with only its "ping"
 * check), /proxyMode and /configz; kproxy's own /debug/backend (what the
 * mode serves now, where it says), /debug/explain and /debug/rules (the
 * daemon's: docs/explain.md). Everything else is Go's 404.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "http/metrics-internal.h"
#include "http/metrics.h"
#include "http/mhd.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/inet.h"
#include "util/log.h"

/* component-base's healthz with no checks installs "ping", which always
 * passes: "ok", or with ?verbose the list of checks. ?exclude=NAME skips a
 * check; names that match none are listed in a warning, sorted and quoted. */
struct metrics_healthz_args {
        bool verbose;
        bool exclude_ping;
        size_t n_unknown;
        const char *unknown[16];
};

static void metrics_healthz_arg(void *userdata, const char *key, const char *value) {
        struct metrics_healthz_args *a = userdata;

        if (strcmp(key, "verbose") == 0)
                a->verbose = true;
        if (strcmp(key, "exclude") != 0)
                return;
        value = value ? value : "";
        if (strcmp(value, "ping") == 0) {
                a->exclude_ping = true;
                return;
        }
        for (size_t i = 0; i < a->n_unknown; i++)
                if (strcmp(a->unknown[i], value) == 0)
                        return;
        if (a->n_unknown < ELEMENTSOF(a->unknown))
                a->unknown[a->n_unknown++] = value;
}

static int metrics_strcmp(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* Go's %q, for the names of checks that could not be excluded. */
static void metrics_put_quoted(struct buf *b, const char *s) {
        buf_putc(b, '"');
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p == '"' || *p == '\\')
                        buf_printf(b, "\\%c", *p);
                else if (*p < 0x20 || *p >= 0x7f)
                        buf_printf(b, "\\x%02x", *p);
                else
                        buf_putc(b, (char) *p);
        }
        buf_putc(b, '"');
}

static void metrics_healthz(const struct mhd_request *req, struct mhd_reply *reply) {
        struct metrics_healthz_args a = {0};

        mhd_request_foreach_arg(req, metrics_healthz_arg, &a);
        reply->content_type = "text/plain; charset=utf-8";
        reply->nosniff = true;
        if (!a.verbose) {
                buf_puts(&reply->body, "ok");
                return;
        }
        buf_puts(&reply->body, a.exclude_ping ? "[+]ping excluded: ok\n" : "[+]ping ok\n");
        if (a.n_unknown > 0) {
                qsort(a.unknown, a.n_unknown, sizeof a.unknown[0], metrics_strcmp);
                buf_puts(&reply->body, "warn: some health checks cannot be excluded: no matches for ");
                for (size_t i = 0; i < a.n_unknown; i++) {
                        if (i > 0)
                                buf_putc(&reply->body, ',');
                        metrics_put_quoted(&reply->body, a.unknown[i]);
                }
                buf_putc(&reply->body, '\n');
        }
        buf_puts(&reply->body, "healthz check passed\n");
}

/* Paths are exact, as on upstream's PathRecorderMux, and the method is
 * ignored, as its handlers do. */
static void metrics_http_handle(void *userdata, const struct mhd_request *req, struct mhd_reply *reply) {
        const struct metrics *m = userdata;
        const struct kproxy_config *c = metrics_config(m);
        const char *path = mhd_request_path(req);

        if (strcmp(path, "/metrics") == 0) {
                /* What promhttp negotiates for a client that does not ask
                 * for protobuf; kproxy only speaks the text format. */
                reply->content_type = "text/plain; version=0.0.4; charset=utf-8";
                metrics_write(m, &reply->body);
        } else if (strcmp(path, "/healthz") == 0) {
                metrics_healthz(req, reply);
        } else if (strcmp(path, "/healthz/ping") == 0) {
                /* A bare check handler sets no type; Go sniffs text/plain. */
                reply->content_type = "text/plain; charset=utf-8";
                buf_puts(&reply->body, "ok");
        } else if (strcmp(path, "/proxyMode") == 0) {
                reply->content_type = "text/plain; charset=utf-8";
                reply->nosniff = true;
                buf_puts(&reply->body, proxy_mode_to_string(c->mode));
        } else if (strcmp(path, "/debug/backend") == 0) {
                reply->content_type = "text/plain; charset=utf-8";
                reply->nosniff = true;
                if (!metrics_describe_backend(m, &reply->body))
                        mhd_reply_not_found(reply);
        } else if (strcmp(path, "/debug/explain") == 0 || strcmp(path, "/debug/rules") == 0) {
                if (!metrics_debug(m, path, req, reply))
                        mhd_reply_not_found(reply);
        } else if (strcmp(path, "/configz") == 0) {
                int r;

                /* configz marshals a map of one component's config. */
                reply->content_type = "application/json";
                reply->nosniff = true;
                buf_puts(&reply->body, "{\"kubeproxy.config.k8s.io\":");
                r = config_format_json(c, &reply->body);
                buf_putc(&reply->body, '}');
                if (r < 0) {
                        /* Go's http.Error after a failed json.Marshal. */
                        buf_clear(&reply->body);
                        buf_printf(&reply->body, "error marshaling json: %s\n", strerror(-r));
                        reply->status = 500;
                        reply->content_type = "text/plain; charset=utf-8";
                }
        } else {
                mhd_reply_not_found(reply);
        }
}

/* ---- the server ---- */

/* Scrapers send one small request at a time; these only bound what
 * misbehaving clients can hold, and a new scrape always gets in
 * (http/mhd.h). */
static const struct mhd_limits metrics_limits = {
        .connections = 64,
        .per_client = 8,
        .wait_ms = 10000,
};

DEFINE_CLEANUP(struct metrics, metrics_free)

int metrics_new(struct ev_loop *l, const char *bind, const struct kproxy_config *c, const char *mode,
                struct metrics **ret) {
        _cleanup_(metrics_freep) struct metrics *m = NULL;
        struct mhd_server *srv;
        struct inet_addr a;
        uint16_t port;
        int r;

        assert(l);
        assert(c);
        assert(ret);

        if (!bind) {
                *ret = NULL;
                return 0;
        }
        r = mhd_parse_bind(bind, &a, &port);
        if (r < 0)
                return log_error_errno(r, "Invalid metrics bind address \"%s\" (must be IP:port)", bind);
        if (port == 0) {
                log_v(2, "Metrics server disabled (port 0 in \"%s\")", bind);
                *ret = NULL;
                return 0;
        }

        m = metrics_registry_new(c, mode);
        r = mhd_server_new(l, "metrics server", &a, port, &metrics_limits,
                           c->bind_address_hard_fail ? 0 : MHD_BIND_RETRY_MS, metrics_http_handle, m, &srv);
        if (r < 0)
                /* Upstream: "starting metrics server failed: listen tcp ...". */
                return log_error_errno(r, "Failed to start metrics server on %s", bind);
        metrics_attach_server(m, srv);

        log_v(3, "Starting metrics server on %s", bind);
        *ret = TAKE_PTR(m);
        return 0;
}

struct metrics *metrics_free(struct metrics *m) {
        if (!m)
                return NULL;
        mhd_server_free(metrics_server(m));
        metrics_registry_free(m);
        return NULL;
}

int metrics_port(const struct metrics *m) {
        return m ? mhd_server_port(metrics_server(m)) : 0;
}
