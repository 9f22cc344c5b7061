/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Userspace mode's frontends: a listening TCP or bound UDP socket per
 * address and port of the plan (userspace/plan.h), each with the picker
 * of its endpoints; the ClientIP affinity tables their service ports
 * share; the TCP frontends no longer wanted that finish their connections
 * (draining); the counters of those gone, so totals only grow; the sockets
 * a predecessor handed over, until a frontend adopts one; and the stop.
 * Private to proxy/userspace/; the bottom of its stack.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "userspace/fwd-addr.h"
#include "userspace/fwd-tcp.h"
#include "userspace/fwd-udp.h"
#include "util/buf.h"
#include "util/hmap.h"

struct ev_loop;
struct fwd_pipes;
struct handover_sock;
struct model;
struct picker;
struct us_frontends;
struct userspace_frontend;

#define US_CONNECT_TIMEOUT_MS 2000

struct us_frontend {
        char key[FWD_ADDR_STRLEN + 4];  /* the plan's: "tcp 10.96.0.10:80" */
        char *svc_key;                  /* the service it serves ("ns/name") */
        struct fwd_addr addr;           /* what it listens on */
        struct us_frontends *set;       /* the set it is in (its counters, affinities, loop) */
        struct us_frontend *next_draining;
        uint8_t family;
        int proto;
        struct picker *picker;
        struct fwd_tcp *tcp;
        struct fwd_udp *udp;
        struct buf line;                /* the plan's line, for /debug/backend */
        struct inet_cidr *sources;      /* the sources its socket's filter admits (none: all) */
        size_t n_sources;
        uint64_t gen;                   /* the sync that last wanted it */
        bool failed;                    /* could not bind: full syncs try again */
};

struct us_frontends {
        struct ev_loop *loop;
        struct fwd_pipes *pipes;        /* borrowed */
        uint64_t tcp_idle_ms, udp_idle_ms;
        struct hmap by_key;             /* key -> struct us_frontend */
        struct hmap affinities;         /* "ns/name:port" -> struct us_affinity */
        struct us_frontend *draining;   /* TCP frontends no longer wanted, finishing their connections */
        struct fwd_tcp_stats gone_tcp;  /* counters of frontends already freed */
        struct fwd_udp_stats gone_udp;
        uint64_t gen;                   /* the sync under way */
        size_t out_of_fds;              /* frontends this sync could not open for want of descriptors */
        struct handover_sock *adopt;    /* handed over by a predecessor, until a frontend adopts one */
        size_t n_adopt;
        bool stopping;                  /* the listeners refuse SYNs, then close */
        size_t listening;               /* stopping listeners still open (handshakes under way) */
};

void us_frontends_init(struct us_frontends *f, struct ev_loop *loop, struct fwd_pipes *pipes, uint64_t tcp_idle_ms,
                       uint64_t udp_idle_ms);
void us_frontends_done(struct us_frontends *f);

/* A sync begins: the frontends it wants are marked with a new generation. */
void us_frontends_begin(struct us_frontends *f);
/* The frontend want of the plan (a partial sync's only: the services it
 * plans) exists, with want's endpoints, sources and affinity; a new one,
 * or with retry one that could not bind, is opened (on a handed-over
 * socket when one matches). Returns 0 or -ENOMEM; a socket that cannot be
 * opened is logged, and the rest of the node goes on. */
int us_frontends_want(struct us_frontends *f, const struct model *model, const struct hmap *only, uint8_t family,
                      const struct userspace_frontend *want, bool retry);
/* After the plan: the family's frontends not wanted by this sync (of the
 * services in only, when given) retire; draining ones whose connections
 * ended go; affinity tables no frontend uses go; and "too many open files"
 * is logged once for the sync. */
void us_frontends_end(struct us_frontends *f, uint8_t family, const struct hmap *only);
/* Frees the draining frontends whose connections have all ended. */
void us_frontends_reap(struct us_frontends *f);

/* Takes the sockets a predecessor handed over (n of them, owned). */
void us_frontends_adopt(struct us_frontends *f, struct handover_sock *socks, size_t n);
/* After the family's first sync: the handed-over sockets it did not want
 * (a service deleted while no process ran) close. */
void us_frontends_close_unadopted(struct us_frontends *f, uint8_t family);

/* The listening and bound sockets, at most cap of them into fds; returns
 * how many. */
size_t us_frontends_sockets(const struct us_frontends *f, int *fds, size_t cap);
/* Handed over: no more accepting or reading (the connections go on). */
void us_frontends_stop_reading(struct us_frontends *f);
/* Stopping without a successor: each listener drops new SYNs and closes
 * once no handshake of its own is under way (us_frontends_settle()); UDP
 * sockets close at once. */
void us_frontends_stop(struct us_frontends *f);
/* Closes the stopping listeners that have no handshake under way (all of
 * them if the kernel cannot say); f->listening is how many stay open. */
void us_frontends_settle(struct us_frontends *f);

/* The counters of every frontend, open, draining and gone; n_fe: the open
 * sockets. */
void us_frontends_totals(const struct us_frontends *f, struct fwd_tcp_stats *tcp, struct fwd_udp_stats *udp,
                         size_t *n_fe);
/* UDP sessions whose last datagram, passed on at since (ms) or later,
 * has had no reply yet. */
size_t us_frontends_udp_awaiting(const struct us_frontends *f, uint64_t since);
