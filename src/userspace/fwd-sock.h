/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The service sockets of the forwarders: opened bound to a service address,
 * or adopted from a predecessor process (handover.h). Both kinds are
 * non-blocking and close-on-exec, bound with SO_REUSEPORT so that a
 * successor can bind beside them, IPv6 ones IPV6_V6ONLY.
 */
#include "userspace/fwd-addr.h"

/* A socket of type SOCK_STREAM (also SO_REUSEADDR, and listening with
 * backlog) or SOCK_DGRAM bound to addr. Returns the fd, with the address
 * the kernel bound in ret_local (the port it chose for port 0), or -errno. */
int fwd_sock_open(const struct fwd_addr *addr, int type, int backlog, struct fwd_addr *ret_local);

/* Checks that fd is a socket the forwarder of type can serve (SOCK_STREAM:
 * a listening one; SOCK_DGRAM: a bound UDP one) and makes it non-blocking.
 * Returns 0 with its address in ret_local, -ENOTSOCK for another kind of
 * file, or -errno. */
int fwd_sock_adopt(int fd, int type, struct fwd_addr *ret_local);
