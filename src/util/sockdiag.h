/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * sock_diag (NETLINK_SOCK_DIAG) over libmnl, for inet sockets: a dump by
 * family, protocol and states, and SOCK_DESTROY of one socket. A handle
 * answers for the network namespace it was opened in.
 */
#include <stdint.h>

struct inet_diag_msg;
struct inet_diag_sockid;
struct sockdiag;

/* Opens a handle in the calling thread's network namespace. Returns 0 or
 * -errno. */
int sockdiag_open(struct sockdiag **ret);
/* Accepts NULL, returns NULL. */
struct sockdiag *sockdiag_close(struct sockdiag *d);

/* Calls each() for every socket of family (AF_INET or AF_INET6) and
 * protocol (IPPROTO_TCP, IPPROTO_UDP) in one of states (a mask of
 * 1 << TCP_ESTABLISHED, ...; the kernel lists TCP request sockets under
 * TCP_SYN_RECV). each() returns 0, or -errno to stop with that error.
 * Returns 0 or -errno. */
int sockdiag_dump(struct sockdiag *d, int family, int protocol, uint32_t states,
                  int (*each)(const struct inet_diag_msg *m, void *ctx), void *ctx);
/* Destroys the socket id names (as a dump gave it, cookie included): its
 * owner's next call fails with ECONNABORTED. Returns 0, -ENOENT if it is
 * gone, -EOPNOTSUPP without CONFIG_INET_DIAG_DESTROY, or -errno. Not from
 * inside a dump's each(). */
int sockdiag_destroy(struct sockdiag *d, int family, int protocol, const struct inet_diag_sockid *id);
