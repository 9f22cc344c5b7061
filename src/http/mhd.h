/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * One libmicrohttpd daemon on kproxy's event loop, listening on a socket
 * kproxy binds itself (so a failed bind reports its errno) and accepts
 * from itself (so a flood of connections cannot keep new clients out:
 * http/mhd-conns.h). Owners (the metrics server, the health server, each
 * health-check node port listener) see one call per complete request and
 * fill in a reply; the HTTP state machine, request bodies, timers, the
 * connection limits and the epoll plumbing stay in mhd.c.
 */
#include <stdbool.h>
#include <stdint.h>

#include "util/buf.h"

struct ev_loop;
struct inet_addr;
struct mhd_server;
struct mhd_request;

/* What the handler answers. The server fills in 200, no type, no nosniff,
 * no other headers and an empty body before the call; the body is sent as
 * is (HEAD drops it but keeps its Content-Length, as Go does). */
struct mhd_reply {
        unsigned status;
        const char *content_type;       /* a static string, or NULL for none */
        bool nosniff;                   /* send X-Content-Type-Options: nosniff */
        struct buf body;
        struct buf headers;             /* mhd_reply_add_header()'s; not for handlers */
};

/* What a server holds at once. A new client is always taken: when a limit
 * is reached, the connection that has waited longest for a request makes
 * room (http/mhd-conns.h). */
struct mhd_limits {
        unsigned connections;           /* held at once (> 0) */
        unsigned per_client;            /* of those, from one IPv4 address or IPv6 /64 */
        uint64_t wait_ms;               /* for a request's headers, from the connect or the previous answer */
        bool share_port;                /* SO_REUSEPORT: another process of this user may listen beside it */
};

/* How often upstream's servers retry a failed bind when
 * --bind-address-hard-fail is false (wait.Until's period). */
#define MHD_BIND_RETRY_MS 5000

typedef void (*mhd_handler_fn)(void *userdata, const struct mhd_request *req, struct mhd_reply *reply);

/* "IP:PORT" or "[IP]:PORT" (Go's SplitHostPort: an IPv6 address needs the
 * brackets). No host names, no zones, no empty port. Returns 0 or -EINVAL;
 * the outputs are written only on success. */
int mhd_parse_bind(const char *s, struct inet_addr *ret_addr, uint16_t *ret_port);

/* Binds addr:port (port 0: the kernel picks one) the way Go's net.Listen
 * does: an unspecified address, 0.0.0.0 as much as ::, is one dual-stack
 * socket (IPv4 only on a kernel without IPv6). Then starts the daemon and
 * registers it with the loop. name prefixes the server's own log lines
 * ("metrics server"); it is copied. limits bounds the connections held
 * (copied). fn is called on the loop thread for every request, with
 * userdata, which must outlive the server. Returns 0, or -errno
 * (-EADDRINUSE, -EADDRNOTAVAIL, -ENOMEM, ...) without logging: the caller
 * knows what the address was for. With retry_ms > 0, a failed bind is
 * logged instead and tried again every retry_ms while the server object
 * exists (upstream's behaviour without --bind-address-hard-fail); only
 * -ENOMEM is returned then. */
int mhd_server_new(struct ev_loop *l, const char *name, const struct inet_addr *addr, uint16_t port,
                   const struct mhd_limits *limits, uint64_t retry_ms, mhd_handler_fn fn, void *userdata,
                   struct mhd_server **ret);
/* Closes the listener and every connection. Accepts NULL; returns NULL. */
struct mhd_server *mhd_server_free(struct mhd_server *s);
/* The bound port (the kernel's choice when 0 was asked for); 0 while a
 * retried bind has not succeeded. */
uint16_t mhd_server_port(const struct mhd_server *s);
/* The connections held (counted against the limits); for tests. */
unsigned mhd_server_connections(const struct mhd_server *s);

/* The request's path, percent-decoded, without the query string. */
const char *mhd_request_path(const struct mhd_request *r);
const char *mhd_request_method(const struct mhd_request *r);
/* Calls fn for every query argument in order; value is NULL for a bare
 * "?key". The strings live as long as the request. */
void mhd_request_foreach_arg(const struct mhd_request *r,
                             void (*fn)(void *userdata, const char *key, const char *value), void *userdata);
/* Go's http.NotFound: 404, "404 page not found\n" as text/plain. */
void mhd_reply_not_found(struct mhd_reply *reply);
/* One more response header, sent after Content-Type and nosniff in the
 * order added. name and value are copied. */
void mhd_reply_add_header(struct mhd_reply *reply, const char *name, const char *value);
