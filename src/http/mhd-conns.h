/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The connections one HTTP server holds, and which one to let go of, so
 * that no client, and no crowd of clients, can keep a new one out
 * (http/mhd.c accepts, asks, and closes what this names):
 *
 *  - at most max connections are held, at most per_client of them from one
 *    client: an IPv4 address (also as ::ffff:a.b.c.d), or an IPv6 /64, what
 *    one host usually has;
 *  - a connection is idle while it waits for a request (from its connect,
 *    or from the end of its previous answer) and busy from a request's
 *    headers to the end of its answer; an idle one may wait wait_ms, then
 *    it is due to be closed, however slowly its headers trickle in;
 *  - a new connection over a limit is always taken: the connection that
 *    has waited longest makes room, the same client's when its share is
 *    full, anyone's when the server is; idle ones go before busy ones.
 *
 * Pure bookkeeping: the caller passes the clock (milliseconds) and closes
 * the connections named here.
 */
#include <stdbool.h>
#include <stdint.h>

struct sockaddr;
struct mhd_conns;
struct mhd_conn;

/* max > 0; per_client 0 means max. NULL when out of memory. */
struct mhd_conns *mhd_conns_new(unsigned max, unsigned per_client, uint64_t wait_ms);
/* Frees the set and any connection still in it. Accepts NULL; returns NULL. */
struct mhd_conns *mhd_conns_free(struct mhd_conns *set);

/* The connection to let go of before one from sa is taken, or NULL if
 * there is room. */
struct mhd_conn *mhd_conns_victim(const struct mhd_conns *set, const struct sockaddr *sa);
/* Records a connection just accepted on fd, idle since now_ms. NULL when
 * out of memory. */
struct mhd_conn *mhd_conns_add(struct mhd_conns *set, int fd, const struct sockaddr *sa, uint64_t now_ms);
/* A request's headers are in. */
void mhd_conns_busy(struct mhd_conn *c, uint64_t now_ms);
/* Its answer is out: waiting for the next request. */
void mhd_conns_idle(struct mhd_conn *c, uint64_t now_ms);
/* Being closed: it no longer counts against any limit, and busy() and
 * idle() leave it so. */
void mhd_conns_closing(struct mhd_conn *c);
/* Closed: forgets and frees it. */
void mhd_conns_remove(struct mhd_conn *c);

/* The idle connection that has waited longest, or NULL. */
struct mhd_conn *mhd_conns_oldest(const struct mhd_conns *set);
/* An idle connection that has waited its time out at now_ms (the longest
 * waiting first), or NULL. */
struct mhd_conn *mhd_conns_expired(const struct mhd_conns *set, uint64_t now_ms);
/* When the next idle connection is due, if any. */
bool mhd_conns_deadline(const struct mhd_conns *set, uint64_t *ret_ms);

int mhd_conn_fd(const struct mhd_conn *c);
/* Connections counted against the limits (idle and busy). */
unsigned mhd_conns_held(const struct mhd_conns *set);
