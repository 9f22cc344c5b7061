/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Spare pipes for the TCP forwarders: a connection that ended cleanly
 * leaves its two pipes empty, and the next connection takes them instead
 * of making new ones (a pipe2() and, later, two close() calls saved per
 * pipe: a tenth of a short connection's system calls). One pool serves
 * every forwarder on a loop; it holds at most max pipes.
 */
#include <stddef.h>

struct fwd_pipes;

/* A pool of at most max pipes of size bytes (0: the kernel's default).
 * Returns 0, -EINVAL for max 0, or -ENOMEM. */
int fwd_pipes_new(size_t max, int size, struct fwd_pipes **ret);
/* Closes every pipe in the pool. Accepts NULL, returns NULL. */
struct fwd_pipes *fwd_pipes_free(struct fwd_pipes *p);

/* The bytes one pipe of the pool holds (what the kernel granted). */
size_t fwd_pipes_capacity(const struct fwd_pipes *p);
/* A pipe (non-blocking, close-on-exec) into ret: a spare one, or a new
 * one. Returns 0 or -errno. */
int fwd_pipes_get(struct fwd_pipes *p, int ret[2]);
/* Gives a pipe back: kept if empty is true and there is room, else
 * closed. pipe[] is set to -1 either way. */
void fwd_pipes_put(struct fwd_pipes *p, int pipe[2], int empty);
/* Spare pipes held now. */
size_t fwd_pipes_spare(const struct fwd_pipes *p);
