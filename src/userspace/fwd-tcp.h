/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A TCP forwarder for one service address and port: a listening socket
 * (SO_REUSEPORT, so a successor can bind beside it: docs/userspace.md), and
 * for each accepted connection a non-blocking connect to an endpoint that
 * a callback picks, then the bytes moved both ways with splice() through a
 * pipe per direction, on the ev/ loop. One endpoint that fails to connect
 * is replaced by another, once; a connection idle too long is closed.
 */
#include <stdint.h>

struct ev_loop;
struct fwd_addr;
struct fwd_pipes;
struct fwd_tcp;

/* Picks the endpoint for a client's connection: failed is NULL on the
 * first try, and on the retry the endpoint that did not answer. Returns 0
 * with ret filled, or a -errno (-ENOENT: none) that resets the client. */
typedef int (*fwd_tcp_pick_fn)(void *userdata, const struct fwd_addr *client, const struct fwd_addr *failed,
                               struct fwd_addr *ret);

struct fwd_tcp_params {
        uint64_t idle_timeout_ms;       /* no bytes either way this long: closed; 0 never */
        uint64_t connect_timeout_ms;    /* a connect not answered this long fails; 0: the kernel's */
        int backlog;                    /* listen(); 0: SOMAXCONN */
        int pipe_size;                  /* bytes per direction (F_SETPIPE_SZ); 0: the kernel's 64 KiB */
        struct fwd_pipes *pipes;        /* borrowed: spare pipes shared by forwarders (its size
                                         * then wins over pipe_size); NULL: none */
};

struct fwd_tcp_stats {
        uint64_t accepted;              /* connections accepted */
        uint64_t active;                /* open now, connecting or established */
        uint64_t bytes_to_endpoints;
        uint64_t bytes_to_clients;
        uint64_t accept_errors;         /* accept() failures other than "nothing to accept" */
        uint64_t connect_errors;        /* connects to endpoints that failed (each try) */
        uint64_t retries;               /* second tries after a failed connect */
        uint64_t refused;               /* clients reset: no endpoint, or no try connected */
        uint64_t idle_timeouts;
        uint64_t resets;                /* connections ended by an error on one side, passed on as RST */
};

/* Listens on addr and forwards on l. The forwarder borrows l and the pick
 * callback's userdata for its lifetime. Returns 0, -EINVAL for bad params,
 * or -errno from socket/bind/listen (-EADDRNOTAVAIL: the address is not on
 * this host yet). */
int fwd_tcp_new(struct ev_loop *l, const struct fwd_addr *addr, const struct fwd_tcp_params *params,
                fwd_tcp_pick_fn pick, void *userdata, struct fwd_tcp **ret);
/* The same around a listening socket fd handed over by a predecessor
 * (userspace/handover.h); takes fd on success only. Returns 0, -EINVAL,
 * -ENOTSOCK if fd is not a listening TCP socket, or -errno. */
int fwd_tcp_adopt(struct ev_loop *l, int fd, const struct fwd_tcp_params *params, fwd_tcp_pick_fn pick,
                  void *userdata, struct fwd_tcp **ret);
/* Closes the listener and every connection (established ones end with a
 * FIN to both sides). Accepts NULL, returns NULL. */
struct fwd_tcp *fwd_tcp_free(struct fwd_tcp *f);

/* The address the listener is bound to (its port, when addr's was 0). */
void fwd_tcp_local(const struct fwd_tcp *f, struct fwd_addr *ret);
void fwd_tcp_get_stats(const struct fwd_tcp *f, struct fwd_tcp_stats *ret);

/* The listening socket (borrowed: to hand over), -1 once stopped. */
int fwd_tcp_listener(const struct fwd_tcp *f);
/* Closes this process's copy of the listener: no more accepts here, while
 * open connections go on (a predecessor draining after a hand-over). */
void fwd_tcp_stop_accepting(struct fwd_tcp *f);
/* The same where nobody else holds the listener (a stop, a service
 * without endpoints any more): the connections already queued on it are
 * taken and forwarded first, as closing it would reset them; new ones are
 * refused from then on. */
void fwd_tcp_close_listener(struct fwd_tcp *f);
/* The listener drops new SYNs from now on (their clients retry in a
 * second) and goes on accepting: the handshakes already under way finish
 * into its queue. Before a close that must reset none of them
 * (userspace/synrecv.h says when none is left). Returns 0 or -errno. */
int fwd_tcp_refuse_syns(struct fwd_tcp *f);
