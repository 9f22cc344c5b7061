/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A UDP forwarder for one service address and port: a socket bound to it
 * (SO_REUSEPORT), and a session per client address: an upstream socket
 * connected to the endpoint a callback picked for that client, its
 * replies sent back from the service socket, so from the service address
 * the client wrote to. A session ends after idle_timeout_ms without a
 * datagram either way (conntrack's UDP timeout, in userspace), when its
 * endpoint refuses (ICMP port unreachable: the next datagram picks
 * again), or when fwd_udp_drop_endpoint() names its endpoint.
 */
#include <stddef.h>
#include <stdint.h>

struct ev_loop;
struct fwd_addr;
struct fwd_udp;

/* Picks the endpoint for a new client session. Returns 0 with ret filled,
 * or -errno (-ENOENT: none; the datagram is dropped). */
typedef int (*fwd_udp_pick_fn)(void *userdata, const struct fwd_addr *client, struct fwd_addr *ret);

struct fwd_udp_params {
        uint64_t idle_timeout_ms;       /* required, > 0 */
        size_t max_sessions;            /* beyond it new clients' datagrams are dropped; 0: 65536 */
};

struct fwd_udp_stats {
        uint64_t sessions;              /* created */
        uint64_t active;                /* open now */
        uint64_t to_endpoints, to_clients;              /* datagrams passed on */
        uint64_t bytes_to_endpoints, bytes_to_clients;
        uint64_t dropped;               /* no endpoint, session limit, or a failed send */
        uint64_t refused;               /* sessions ended by the endpoint's port unreachable */
        uint64_t idle_timeouts;
};

/* Binds addr and forwards on l (borrowed, as is userdata). Returns 0,
 * -EINVAL for bad params, or -errno from socket/bind. */
int fwd_udp_new(struct ev_loop *l, const struct fwd_addr *addr, const struct fwd_udp_params *params,
                fwd_udp_pick_fn pick, void *userdata, struct fwd_udp **ret);
/* The same around a bound UDP socket fd handed over by a predecessor
 * (userspace/handover.h); takes fd on success only. Returns 0, -EINVAL,
 * -ENOTSOCK if fd is not a bound UDP socket, or -errno. */
int fwd_udp_adopt(struct ev_loop *l, int fd, const struct fwd_udp_params *params, fwd_udp_pick_fn pick,
                  void *userdata, struct fwd_udp **ret);
/* Closes the socket and every session. Accepts NULL, returns NULL. */
struct fwd_udp *fwd_udp_free(struct fwd_udp *f);

/* Ends every session to endpoint at once (an endpoint gone from the
 * cluster: the stale-UDP lesson). Returns how many ended. */
size_t fwd_udp_drop_endpoint(struct fwd_udp *f, const struct fwd_addr *endpoint);

void fwd_udp_local(const struct fwd_udp *f, struct fwd_addr *ret);
void fwd_udp_get_stats(const struct fwd_udp *f, struct fwd_udp_stats *ret);

/* The service socket (borrowed: to hand over). */
int fwd_udp_socket(const struct fwd_udp *f);
/* After a hand-over: this process reads no more datagrams from clients
 * (the successor does), but keeps the socket to send its sessions'
 * replies until they end. */
void fwd_udp_stop_reading(struct fwd_udp *f);
/* Sessions whose last datagram went to the endpoint at or after since_ms
 * (on the loop's clock) and has had no reply yet: a process that handed
 * over waits for them before it exits. */
size_t fwd_udp_awaiting(const struct fwd_udp *f, uint64_t since_ms);
