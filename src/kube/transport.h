/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * HTTPS GETs to one API server on kproxy's event loop (transport.c):
 * libcurl's multi-socket API driven by ev, each request with the
 * connection's TLS settings and bearer token. What a response means is the
 * caller's (the reflector in client.c); libcurl stays behind this header.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct buf;
struct ev_loop;
struct kube_conn;
struct kube_request;
struct kube_transport;

/* How a request ended. COMPLETE: the response was read to its end, whatever
 * its HTTP status (kube_request_status()); ABORTED: the data callback
 * stopped it; FAILED: no complete response (connection, TLS, timeout), with
 * libcurl's reason. */
enum kube_request_end {
        KUBE_REQUEST_COMPLETE,
        KUBE_REQUEST_ABORTED,
        KUBE_REQUEST_FAILED,
};

/* What the request's owner hears, from the event loop. data: body bytes as
 * they arrive; false stops the transfer (ABORTED). headers_done (may be
 * NULL): the response's headers are complete. done: the transfer ended;
 * error is libcurl's reason unless it is COMPLETE (NULL then). The owner
 * may free the request, and start others, from done. */
struct kube_request_ops {
        bool (*data)(void *userdata, const char *data, size_t n);
        void (*headers_done)(void *userdata);
        void (*done)(void *userdata, enum kube_request_end end, const char *error);
};

/* The transport borrows l and conn, which must outlive it. Returns 0 or
 * -ENOMEM. */
int kube_transport_new(struct ev_loop *l, struct kube_conn *conn, struct kube_transport **ret);
/* Every request must have been freed first. Accepts NULL; returns NULL. */
struct kube_transport *kube_transport_free(struct kube_transport *t);

/* The server's URL ("https://host:port"), and its host[:port] as
 * client-go's metrics label it. */
const char *kube_transport_server(const struct kube_transport *t);
const char *kube_transport_host(const struct kube_transport *t);
/* The host[:port] of a server URL: what lies between "://" (and any
 * "user@") and the path. Owned; NULL when out of memory. */
char *kube_transport_host_of(const char *server);
/* What client-go asks for by default (clientConnection.contentType's
 * default, application/vnd.kubernetes.protobuf, then anything): the
 * Accept header until kube_transport_set_accept(). */
#define KUBE_ACCEPT_DEFAULT "application/vnd.kubernetes.protobuf, */*"
/* The Accept header's value for later requests. Returns 0, or -EINVAL when
 * it holds a control character (CR, LF: it would be a header of its own). */
int kube_transport_set_accept(struct kube_transport *t, const char *value);
/* Re-reads the bearer token, when the connection has a token file: after a
 * 401, since service-account tokens rotate. */
void kube_transport_reload_token(struct kube_transport *t);

/* Starts a GET of url. timeout_s: the whole request's limit, 0 for none (a
 * watch). Returns 0 or -ENOMEM; *ret is the request, owned by the caller. */
int kube_request_start(struct kube_transport *t, const char *url, long timeout_s, const struct kube_request_ops *ops,
                       void *userdata, struct kube_request **ret);
/* The HTTP status so far, as libcurl reports it; 0 before (or without) a
 * response. */
long kube_request_status(const struct kube_request *r);
/* The response's Content-Type as sent, once its headers are in; NULL
 * before, or without one. Borrowed from the request. */
const char *kube_request_content_type(const struct kube_request *r);
/* The response's Retry-After (RFC 9110 10.2.3), in milliseconds from now;
 * -1 when it sent none, or one that is neither delay-seconds nor an HTTP
 * date. */
int64_t kube_request_retry_after(const struct kube_request *r);
/* A Retry-After value read at wall-clock time now_ms (milliseconds since
 * the epoch: a date is a whole second, and the wait until it is not):
 * delay-seconds, or an HTTP date (0 when it is past). Returns
 * milliseconds, or -1 when value is NULL, empty or neither form. Pure. */
int64_t kube_retry_after_ms(const char *value, int64_t now_ms);
/* Stops the transfer if it runs and frees the request; no callback is
 * called after. Accepts NULL; returns NULL. */
struct kube_request *kube_request_free(struct kube_request *r);

/* Appends "?name=value" (or "&name=value" when url has a query already),
 * the value URL-escaped. */
void kube_url_param(struct buf *url, const char *name, const char *value);
