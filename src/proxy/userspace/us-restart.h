/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Userspace mode's restarts (docs/userspace.md): the running process
 * listens on userspace.sock in --state-dir; a successor connects as it
 * starts (the running process turns not-ready), asks at its first sync and
 * is handed every listening and bound socket of the frontends, which that
 * sync adopts, so the socket objects and the connections queued on them
 * never close. Private to proxy/userspace/; it works on the frontends
 * (us-frontends.h) and tells the core through the backend's env.
 */
#include <stdbool.h>

#include "proxy/backend.h"

struct us_frontends;

#define US_HANDOVER_SOCK "userspace.sock"
#define US_HANDOVER_WAIT_MS 2000        /* per message, from a predecessor handing over */

struct us_restart {
        const struct backend_env *env;  /* borrowed: the loop, --state-dir, the core's callbacks */
        struct us_frontends *fe;        /* borrowed: whose sockets go and come */
        int handover_fd;                /* listening for a successor; -1: none */
        int successor_fd;               /* a successor that announced itself; -1: none */
        int predecessor_fd;             /* the process this one replaces, announced to at start; -1: none */
        bool started;                   /* the first sync took a predecessor's sockets */
        bool retired;                   /* handed over, or stopping: syncs do nothing */
};

void us_restart_init(struct us_restart *rs, const struct backend_env *env, struct us_frontends *fe);
/* At start: a predecessor, if one runs, is told that this process will
 * replace it (it turns not-ready). */
void us_restart_announce(struct us_restart *rs);
/* At the first sync (once): a predecessor's sockets given to the
 * frontends to adopt, a successor listened for. Neither is fatal: without
 * them, a restart refuses connections for a moment, as a crash does. */
void us_restart_start(struct us_restart *rs);
/* Closes the hand-over's sockets (stopping, or destroying the backend). */
void us_restart_close(struct us_restart *rs);
