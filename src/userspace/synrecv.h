/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The TCP handshakes under way on this host (request sockets, SYN_RECV),
 * by local address and port, from sock_diag. Closing a listener resets
 * every handshake still on its way to the accept queue (the client's ACK
 * then finds no socket and is answered with RST), so a listener that
 * stops taking connections closes only once none of its own is left.
 */
#include <stdbool.h>

#include "util/cleanup.h"

struct fwd_addr;
struct synrecv;

/* Lists the handshakes under way, IPv4 and IPv6. Returns 0, or -errno
 * (-ENOENT, -EOPNOTSUPP: a kernel without tcp_diag). */
int synrecv_dump(struct synrecv **ret);
/* Whether a handshake is under way to local; an unspecified address
 * (a wildcard listener) matches any address with its port, either family. */
bool synrecv_has(const struct synrecv *s, const struct fwd_addr *local);
/* Accepts NULL, returns NULL. */
struct synrecv *synrecv_free(struct synrecv *s);
DEFINE_CLEANUP(struct synrecv, synrecv_free)
