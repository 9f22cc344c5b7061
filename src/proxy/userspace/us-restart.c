/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode's restarts (docs/userspace.md): the running process
 * listens on userspace.sock in --state-dir; a successor connects as it
 * starts (the running process turns not-ready), asks at its first sync and
 * is handed every listening and bound socket, and that sync adopts them,
 * so the socket objects and the connections queued on them never close.
 */
#include "proxy/userspace/us-restart.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "config/config.h"
#include "ev/ev.h"
#include "proxy/userspace/us-frontends.h"
#include "userspace/handover.h"
#include "util/alloc.h"
#include "util/log.h"

void us_restart_init(struct us_restart *rs, const struct backend_env *env, struct us_frontends *fe) {
        *rs = (struct us_restart) {.env = env, .fe = fe, .handover_fd = -1, .successor_fd = -1, .predecessor_fd = -1};
}

static bool handover_path(const struct us_restart *rs, char path[static 4096]) {
        const char *dir = rs->env->config->state_dir;
        return dir && *dir && (size_t) snprintf(path, 4096, "%s/" US_HANDOVER_SOCK, dir) < 4096;
}

static void successor_close(struct us_restart *rs) {
        if (rs->successor_fd < 0)
                return;
        ev_io_del(rs->env->loop, rs->successor_fd);
        close(rs->successor_fd);
        rs->successor_fd = -1;
}

/* The successor asked: it gets every socket, this process stops taking
 * new connections and datagrams, and the core retires. */
static void give(struct us_restart *rs) {
        size_t cap = rs->fe->by_key.len;
        int *fds = xcalloc(cap ? cap : 1, sizeof *fds);
        size_t n = us_frontends_sockets(rs->fe, fds, cap);
        int r = handover_give(rs->successor_fd, fds, n, US_HANDOVER_WAIT_MS);
        free(fds);
        successor_close(rs);
        if (r < 0) {
                /* It binds beside this process instead (SO_REUSEPORT). */
                log_error_errno(r, "Failed to hand the service sockets to a successor");
                rs->env->replacing(rs->env->core, false);
                return;
        }
        log_info("Handed %zu service sockets to a successor", n);
        us_frontends_stop_reading(rs->fe);
        ev_io_del(rs->env->loop, rs->handover_fd);
        close(rs->handover_fd);
        rs->handover_fd = -1;
        rs->retired = true;
        rs->env->handed_over(rs->env->core);
}

static void on_successor_says(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct us_restart *rs = userdata;
        (void) l, (void) fd, (void) events;

        int r = handover_wait(rs->successor_fd);
        if (r == -EAGAIN)
                return;
        if (r == 1) {
                give(rs);
                return;
        }
        log_info("The successor went away before taking over: this process serves on");
        successor_close(rs);
        rs->env->replacing(rs->env->core, false);
}

/* A successor announces itself as it starts. Until it asks for the
 * sockets (at its first sync) this process serves on, but /healthz is not
 * ready: on the host network both answer on one port, and a readiness
 * probe must not pass for the new pod because the old one answered. */
static void on_successor(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct us_restart *rs = userdata;
        (void) events;

        int c = handover_accept(fd);
        if (c == -EAGAIN)
                return;
        if (c < 0) {
                log_warning_errno(c, "Refused a connection to the hand-over socket");
                return;
        }
        if (rs->successor_fd >= 0 || ev_io_add(l, c, EPOLLIN, on_successor_says, rs) < 0) {
                log_warning("Another successor connected while one is starting: refused");
                close(c);
                return;
        }
        rs->successor_fd = c;
        log_info("A successor is starting: /healthz is not ready until it has taken the service sockets");
        rs->env->replacing(rs->env->core, true);
}

void us_restart_announce(struct us_restart *rs) {
        char path[4096];

        if (!handover_path(rs, path))
                return;
        int r = handover_connect(path);
        if (r >= 0) {
                rs->predecessor_fd = r;
                log_info("A kproxy serves this node: it hands its service sockets over at this process's first "
                         "sync");
        } else if (r != -ENOENT && r != -ECONNREFUSED) {
                log_warning_errno(r, "Failed to reach the process this one replaces");
        }
}

/* Takes a predecessor's sockets, if one is running, then listens for a
 * successor. Neither is fatal: without them, a restart refuses
 * connections for a moment, as a crash does. */
void us_restart_start(struct us_restart *rs) {
        char path[4096];
        int r;

        if (rs->started)
                return;
        rs->started = true;
        if (!handover_path(rs, path))
                return;
        if (rs->predecessor_fd >= 0) {
                struct handover_sock *socks = NULL;
                size_t n = 0;
                r = handover_take(rs->predecessor_fd, US_HANDOVER_WAIT_MS, &socks, &n);
                close(rs->predecessor_fd);
                rs->predecessor_fd = -1;
                if (r == 0)
                        us_frontends_adopt(rs->fe, socks, n);
                if (r == 0)
                        log_info("Took %zu service sockets from the process this one replaces", n);
                else
                        log_warning_errno(r, "Failed to take the service sockets of the process this one replaces");
        }
        r = handover_listen(path);
        if (r < 0) {
                log_warning_errno(r, "Failed to listen on %s: a restart will refuse connections for a moment", path);
                return;
        }
        rs->handover_fd = r;
        if (ev_io_add(rs->env->loop, r, EPOLLIN, on_successor, rs) < 0) {
                close(r);
                rs->handover_fd = -1;
        }
}

void us_restart_close(struct us_restart *rs) {
        successor_close(rs);
        if (rs->handover_fd >= 0) {
                ev_io_del(rs->env->loop, rs->handover_fd);
                close(rs->handover_fd);
                rs->handover_fd = -1;
        }
        if (rs->predecessor_fd >= 0) {
                close(rs->predecessor_fd);
                rs->predecessor_fd = -1;
        }
}
