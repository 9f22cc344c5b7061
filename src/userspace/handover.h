/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Restarts without a closed port: a running kproxy hands its listening
 * sockets to its successor over a unix socket (SCM_RIGHTS), so the same
 * socket objects, with their accept queues and UDP receive queues, go on
 * serving (docs/userspace.md). The predecessor listens on a path in
 * --state-dir; the successor connects as it starts, which tells the
 * predecessor that it is being replaced (its /healthz turns not-ready, so
 * only the process that will serve the node passes a readiness probe),
 * asks for the sockets at its first sync, takes every socket, and adopts
 * those it wants. A successor that disconnects before asking leaves the
 * predecessor serving as before.
 */
#include <stddef.h>
#include <stdint.h>

#include "userspace/fwd-addr.h"

struct handover_sock {
        int fd;                 /* owned by whoever holds the struct */
        int proto;              /* IPPROTO_TCP or IPPROTO_UDP */
        struct fwd_addr addr;   /* what it is bound to, read from the socket itself */
};

/* Binds a unix seqpacket socket at path (replacing a stale one; mode
 * 0600) and listens. Returns the fd (non-blocking, for the event loop) or -errno;
 * -ENAMETOOLONG for a path longer than sun_path. */
int handover_listen(const char *path);

/* Predecessor: accepts a successor on lfd (a process of this user only:
 * -EPERM for another). Returns its connection (non-blocking, for the event
 * loop), -EAGAIN if nobody is connecting, or -errno. */
int handover_accept(int lfd);
/* Predecessor: reads what the successor on c says. Returns 1 when it asks
 * for the sockets, 0 when it has gone (or said something else: it is not
 * a successor), -EAGAIN while it says nothing, or -errno. */
int handover_wait(int c);
/* Predecessor: sends the successor on c the n sockets in fds, then an end
 * marker. Sends block, at most timeout_ms each: the process is leaving, and
 * a successor is reading. The caller keeps its own copies of fds (closing
 * them does not close the sockets the successor now holds). Returns 0 or
 * -errno. */
int handover_give(int c, const int *fds, size_t n, int timeout_ms);

/* Successor: connects to the predecessor at path. Returns the connection
 * (its being open is what tells the predecessor), -ENOENT or -ECONNREFUSED
 * when no predecessor is there, or -errno. */
int handover_connect(const char *path);
/* Successor: asks the predecessor on c for its sockets and receives every
 * one until the end marker, waiting at most timeout_ms for each message.
 * Each socket's protocol and address are read from the socket
 * (getsockname, SO_PROTOCOL); sockets that are neither a listening TCP
 * socket nor a bound UDP socket are closed and left out. Returns 0 with
 * *ret (owned; its fds too) and *ret_n; -EBADMSG when the stream is not a
 * hand-over (every received fd closed); -ETIMEDOUT; or -errno. */
int handover_take(int c, int timeout_ms, struct handover_sock **ret, size_t *ret_n);

/* Closes the fds of socks[0..n) and frees socks. Accepts NULL. */
void handover_socks_free(struct handover_sock *socks, size_t n);
