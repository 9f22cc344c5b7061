/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode's restarts (docs/userspace.md): the running process
 * listens on userspace.sock in --state-dir; a successor connects as it
 * starts (the running process turns not-ready), asks at its first sync and
 * is handed every listening and bound socket, and that sync adopts them,
 * so the socket objects and the connections queued on them never close.
 * And the stop without a successor.
 */
#include "proxy/userspace/mode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "config/config.h"
#include "ev/ev.h"
#include "userspace/synrecv.h"
#include "util/cleanup.h"
#include "util/log.h"

/* The socket a predecessor handed over for want, taken out of the list;
 * -1 if there is none. */
int userspace_adoptable(struct userspace_mode *b, const struct userspace_frontend *want) {
        for (size_t i = 0; i < b->n_adopt; i++) {
                struct handover_sock *s = &b->adopt[i];
                if (s->fd >= 0 && s->proto == want->proto && fwd_addr_equal(&s->addr, &want->addr)) {
                        int fd = s->fd;
                        s->fd = -1;
                        return fd;
                }
        }
        return -1;
}

/* After the family's first sync, the handed-over sockets it did not want
 * (a service deleted while no process ran) close. */
void userspace_close_unadopted(struct userspace_mode *b, uint8_t family) {
        size_t k = 0;

        for (size_t i = 0; i < b->n_adopt; i++) {
                struct handover_sock *s = &b->adopt[i];
                if (s->fd >= 0 && s->addr.ip.family == family) {
                        close(s->fd);
                        s->fd = -1;
                }
                if (s->fd >= 0)
                        b->adopt[k++] = *s;
        }
        b->n_adopt = k;
        if (k == 0) {
                free(b->adopt);
                b->adopt = NULL;
        }
}

static bool handover_path(const struct userspace_mode *b, char path[static 4096]) {
        const char *dir = b->env.config->state_dir;
        return dir && *dir && (size_t) snprintf(path, 4096, "%s/" HANDOVER_SOCK, dir) < 4096;
}

static void successor_close(struct userspace_mode *b) {
        if (b->successor_fd < 0)
                return;
        ev_io_del(b->env.loop, b->successor_fd);
        close(b->successor_fd);
        b->successor_fd = -1;
}

/* The successor asked: it gets every socket, this process stops taking
 * new connections and datagrams, and the core retires. */
static void give(struct userspace_mode *b) {
        size_t n = 0, cap = b->frontends.len;
        int *fds = calloc(cap ? cap : 1, sizeof *fds);
        const char *k;
        void *v;

        if (!fds)
                return;
        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v) && n < cap;) {
                struct frontend *fe = v;
                int s = fe->tcp ? fwd_tcp_listener(fe->tcp) : fe->udp ? fwd_udp_socket(fe->udp) : -1;
                if (s >= 0)
                        fds[n++] = s;
        }
        int r = handover_give(b->successor_fd, fds, n, HANDOVER_WAIT_MS);
        free(fds);
        successor_close(b);
        if (r < 0) {
                /* It binds beside this process instead (SO_REUSEPORT). */
                log_error_errno(r, "Failed to hand the service sockets to a successor");
                b->env.replacing(b->env.core, false);
                return;
        }
        log_info("Handed %zu service sockets to a successor", n);
        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v);) {
                struct frontend *fe = v;
                if (fe->tcp)
                        fwd_tcp_stop_accepting(fe->tcp);
                if (fe->udp)
                        fwd_udp_stop_reading(fe->udp);
        }
        ev_io_del(b->env.loop, b->handover_fd);
        close(b->handover_fd);
        b->handover_fd = -1;
        b->retired = true;
        b->env.handed_over(b->env.core);
}

static void on_successor_says(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct userspace_mode *b = userdata;
        (void) l, (void) fd, (void) events;

        int r = handover_wait(b->successor_fd);
        if (r == -EAGAIN)
                return;
        if (r == 1) {
                give(b);
                return;
        }
        log_info("The successor went away before taking over: this process serves on");
        successor_close(b);
        b->env.replacing(b->env.core, false);
}

/* A successor announces itself as it starts. Until it asks for the
 * sockets (at its first sync) this process serves on, but /healthz is not
 * ready: on the host network both answer on one port, and a readiness
 * probe must not pass for the new pod because the old one answered. */
static void on_successor(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct userspace_mode *b = userdata;
        (void) events;

        int c = handover_accept(fd);
        if (c == -EAGAIN)
                return;
        if (c < 0) {
                log_warning_errno(c, "Refused a connection to the hand-over socket");
                return;
        }
        if (b->successor_fd >= 0 || ev_io_add(l, c, EPOLLIN, on_successor_says, b) < 0) {
                log_warning("Another successor connected while one is starting: refused");
                close(c);
                return;
        }
        b->successor_fd = c;
        log_info("A successor is starting: /healthz is not ready until it has taken the service sockets");
        b->env.replacing(b->env.core, true);
}

void userspace_handover_announce(struct userspace_mode *b) {
        char path[4096];

        if (!handover_path(b, path))
                return;
        int r = handover_connect(path);
        if (r >= 0) {
                b->predecessor_fd = r;
                log_info("A kproxy serves this node: it hands its service sockets over at this process's first "
                         "sync");
        } else if (r != -ENOENT && r != -ECONNREFUSED) {
                log_warning_errno(r, "Failed to reach the process this one replaces");
        }
}

/* Takes a predecessor's sockets, if one is running, then listens for a
 * successor. Neither is fatal: without them, a restart refuses
 * connections for a moment, as a crash does. */
void userspace_handover_start(struct userspace_mode *b) {
        char path[4096];
        int r;

        if (!handover_path(b, path))
                return;
        if (b->predecessor_fd >= 0) {
                r = handover_take(b->predecessor_fd, HANDOVER_WAIT_MS, &b->adopt, &b->n_adopt);
                close(b->predecessor_fd);
                b->predecessor_fd = -1;
                if (r == 0)
                        log_info("Took %zu service sockets from the process this one replaces", b->n_adopt);
                else
                        log_warning_errno(r, "Failed to take the service sockets of the process this one replaces");
        }
        r = handover_listen(path);
        if (r < 0) {
                log_warning_errno(r, "Failed to listen on %s: a restart will refuse connections for a moment", path);
                return;
        }
        b->handover_fd = r;
        if (ev_io_add(b->env.loop, r, EPOLLIN, on_successor, b) < 0) {
                close(r);
                b->handover_fd = -1;
        }
}

void userspace_handover_close(struct userspace_mode *b) {
        successor_close(b);
        if (b->handover_fd >= 0) {
                ev_io_del(b->env.loop, b->handover_fd);
                close(b->handover_fd);
                b->handover_fd = -1;
        }
        if (b->predecessor_fd >= 0) {
                close(b->predecessor_fd);
                b->predecessor_fd = -1;
        }
}

/* Stopping without a successor: each listener drops new SYNs and closes
 * once no handshake of its own is under way (closing earlier would reset
 * it: userspace/synrecv.h), then refuses; UDP sockets close at once (port
 * unreachable); the open TCP connections go on while the core waits for
 * them (userspace_busy() closes the listeners as their handshakes end). */
void userspace_quiesce(struct userspace_mode *b) {
        const char *k;
        void *v;

        b->retired = true;
        b->stopping = true;
        userspace_handover_close(b);
        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v);) {
                struct frontend *fe = v;
                if (fe->tcp && fwd_tcp_listener(fe->tcp) >= 0) {
                        int r = fwd_tcp_refuse_syns(fe->tcp);
                        if (r < 0) {
                                log_warning_errno(r, "Failed to stop SYNs to %s: closing it now", fe->key);
                                fwd_tcp_close_listener(fe->tcp);
                        } else {
                                b->listening++;
                        }
                }
                userspace_udp_close(fe);
        }
        userspace_close_settled(b);
}

static void synrecv_freep(struct synrecv **s) {
        synrecv_free(*s);
}

/* Closes the stopping listeners that have no handshake under way (all of
 * them if the kernel cannot say). Returns how many stay open. */
size_t userspace_close_settled(struct userspace_mode *b) {
        _cleanup_(synrecv_freep) struct synrecv *s = NULL;
        size_t open = 0;
        const char *k;
        void *v;

        if (!b->stopping || !b->listening)
                return 0;
        int r = synrecv_dump(&s);
        if (r < 0)
                log_warning_errno(r, "Failed to list the TCP handshakes under way, closing the listeners now");
        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v);) {
                struct frontend *fe = v;
                struct fwd_addr local;
                if (!fe->tcp || fwd_tcp_listener(fe->tcp) < 0)
                        continue;
                fwd_tcp_local(fe->tcp, &local);
                if (s && synrecv_has(s, &local)) {
                        open++;
                        continue;
                }
                fwd_tcp_close_listener(fe->tcp);
        }
        b->listening = open;
        return open;
}
