/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the forwarder: the kernel moves the bytes, the loop only
 * tells it when. Each direction of a connection is socket -> pipe ->
 * socket with splice(), so payload is never copied into kproxy's memory.
 * Sockets are registered edge-triggered for reading and writing at once,
 * and any event on either socket of a connection pumps both directions
 * until neither can move (EAGAIN on every side that has work): no
 * epoll_ctl per event, and no state where a wake-up is owed but not armed.
 * Each socket's readiness is remembered (set by its events, cleared by its
 * EAGAIN), so the pump makes no call that is known to fail.
 *
 * Bookkeeping is by bytes in each pipe (fill). A pipe can refuse data
 * before fill reaches its size (a socket's small segments each take a
 * pipe slot), which reads as EAGAIN; that is safe because the pump then
 * drains the pipe and, having made progress, reads again. So a read's
 * EAGAIN clears the socket's readiness only when the pipe was empty.
 *
 * Half-close: when one side's read ends (EOF) and its pipe is empty, the
 * other side gets shutdown(SHUT_WR); the connection ends when both
 * directions have done so. An error on either side (reset, broken pipe)
 * ends both with a reset, as the endpoint's RST would reach the client
 * through a NAT.
 *
 * Timeouts without a timer per connection: connections sit in two lists
 * in the order their clock started (connect start; last activity, moved
 * to the tail on each), and one sweep timer closes from the head while the
 * head is overdue. The timer runs only while there are connections.
 */
#include "userspace/fwd-tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ev/ev.h"
#include "userspace/fwd-addr.h"
#include "userspace/fwd-pipes.h"
#include "userspace/fwd-sock.h"
#include "util/cleanup.h"

/* Accepts per listener wake-up, so one busy service cannot starve the
 * others on the loop; the listener is level-triggered and wakes again. */
#define FWD_ACCEPT_BATCH 64
/* After EMFILE/ENFILE/ENOMEM the listener rests this long: the pending
 * connection stays in the backlog instead of spinning the loop. */
#define FWD_ACCEPT_PAUSE_MS 100
#define FWD_CONN_EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)

struct fwd_half {               /* one direction: from -> pipe -> to */
        int pipe[2];
        size_t fill;            /* bytes in the pipe */
        bool eof;               /* from has ended */
        bool shut;              /* to has had shutdown(SHUT_WR) */
};

struct fwd_conn {
        struct fwd_tcp *f;
        struct fwd_conn *prev, *next;   /* in f->connecting or f->established */
        int cfd, efd;                   /* client, endpoint */
        struct fwd_addr client, endpoint;
        struct fwd_half up, down;       /* client -> endpoint, endpoint -> client */
        bool c_rd, c_wr, e_rd, e_wr;    /* readable / writable, as far as known */
        uint64_t since;                 /* connect start, or last activity */
        int tries;
        bool established;
};

struct fwd_list {
        struct fwd_conn *head, *tail;
};

struct fwd_tcp {
        struct ev_loop *loop;
        int lfd;
        struct fwd_addr local;
        struct fwd_tcp_params params;
        size_t pipe_cap;
        fwd_tcp_pick_fn pick;
        void *userdata;
        struct fwd_tcp_stats stats;
        struct fwd_list connecting, established;
        struct ev_timer *sweep;
        struct ev_timer *pause;
};

static void list_append(struct fwd_list *l, struct fwd_conn *c) {
        c->prev = l->tail;
        c->next = NULL;
        if (l->tail)
                l->tail->next = c;
        else
                l->head = c;
        l->tail = c;
}

static void list_remove(struct fwd_list *l, struct fwd_conn *c) {
        if (c->prev)
                c->prev->next = c->next;
        else
                l->head = c->next;
        if (c->next)
                c->next->prev = c->prev;
        else
                l->tail = c->prev;
        c->prev = c->next = NULL;
}

static struct fwd_list *conn_list(struct fwd_conn *c) {
        return c->established ? &c->f->established : &c->f->connecting;
}

static void close_fd(int *fd) {
        if (*fd >= 0)
                close(*fd);
        *fd = -1;
}

/* Closes a socket so that the peer sees a reset, not a FIN. */
static void close_reset(int *fd) {
        struct linger lg = {.l_onoff = 1, .l_linger = 0};

        if (*fd >= 0)
                (void) setsockopt(*fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        close_fd(fd);
}

static void fwd_sweep(struct ev_loop *l, void *userdata);

static void sweep_arm(struct fwd_tcp *f) {
        uint64_t period = 0;

        if (f->sweep || (!f->connecting.head && !f->established.head))
                return;
        if (f->params.idle_timeout_ms)
                period = f->params.idle_timeout_ms;
        if (f->params.connect_timeout_ms && (!period || f->params.connect_timeout_ms < period))
                period = f->params.connect_timeout_ms;
        if (!period)
                return;
        /* A quarter of the shortest timeout: a connection is closed at most
         * 25% late. */
        period = period / 4 ? period / 4 : 1;
        f->sweep = ev_timer_add(f->loop, period, fwd_sweep, f);
}

static void conn_free(struct fwd_conn *c, bool reset) {
        struct fwd_tcp *f = c->f;

        list_remove(conn_list(c), c);
        if (c->cfd >= 0)
                ev_io_del(f->loop, c->cfd);
        if (c->efd >= 0)
                ev_io_del(f->loop, c->efd);
        if (reset) {
                close_reset(&c->cfd);
                close_reset(&c->efd);
        } else {
                close_fd(&c->cfd);
                close_fd(&c->efd);
        }
        if (f->params.pipes) {
                /* After a clean end both pipes are empty: reusable. */
                fwd_pipes_put(f->params.pipes, c->up.pipe, !reset && c->up.fill == 0);
                fwd_pipes_put(f->params.pipes, c->down.pipe, !reset && c->down.fill == 0);
        } else {
                close_fd(&c->up.pipe[0]);
                close_fd(&c->up.pipe[1]);
                close_fd(&c->down.pipe[0]);
                close_fd(&c->down.pipe[1]);
        }
        f->stats.active--;
        free(c);
}

static void conn_touch(struct fwd_conn *c) {
        c->since = ev_now_ms(c->f->loop);
        if (c->f->established.tail != c) {
                list_remove(&c->f->established, c);
                list_append(&c->f->established, c);
        }
}

/* Moves what it can of one direction. Returns 1 if anything moved or
 * changed, 0 if nothing could, -errno on a socket error. */
static int half_pump(struct fwd_conn *c, struct fwd_half *h, int from, int to, bool *from_rd, bool *to_wr,
                     uint64_t *bytes) {
        const unsigned flags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
        int moved = 0;

        for (;;) {
                bool progress = false;
                if (!h->eof && h->fill < c->f->pipe_cap && *from_rd) {
                        ssize_t n = splice(from, NULL, h->pipe[1], NULL, c->f->pipe_cap - h->fill, flags);
                        if (n > 0) {
                                h->fill += (size_t) n;
                                progress = true;
                        } else if (n == 0) {
                                h->eof = true;
                                progress = true;
                        } else if (errno == EAGAIN) {
                                if (h->fill == 0)
                                        *from_rd = false;
                        } else if (errno != EINTR)
                                return -errno;
                }
                if (h->fill > 0 && *to_wr) {
                        ssize_t n = splice(h->pipe[0], NULL, to, NULL, h->fill, flags);
                        if (n > 0) {
                                h->fill -= (size_t) n;
                                *bytes += (uint64_t) n;
                                progress = true;
                        } else if (n < 0 && errno == EAGAIN) {
                                *to_wr = false;
                        } else if (n < 0 && errno != EINTR)
                                return -errno;
                }
                if (h->eof && h->fill == 0 && !h->shut) {
                        /* ENOTCONN: the peer is gone already; the other
                         * direction will find out. */
                        (void) shutdown(to, SHUT_WR);
                        h->shut = true;
                        progress = true;
                }
                if (!progress)
                        return moved;
                moved = 1;
        }
}

/* Pumps both directions until neither moves; frees c when both are shut
 * or on an error. */
static void conn_pump(struct fwd_conn *c) {
        struct fwd_tcp *f = c->f;
        bool any = false;

        for (;;) {
                int a = half_pump(c, &c->up, c->cfd, c->efd, &c->c_rd, &c->e_wr, &f->stats.bytes_to_endpoints);
                int b = a < 0 ? 0
                              : half_pump(c, &c->down, c->efd, c->cfd, &c->e_rd, &c->c_wr,
                                          &f->stats.bytes_to_clients);
                if (a < 0 || b < 0) {
                        f->stats.resets++;
                        conn_free(c, true);
                        return;
                }
                if (a == 0 && b == 0)
                        break;
                any = true;
        }
        if (c->up.shut && c->down.shut) {
                conn_free(c, false);
                return;
        }
        if (any)
                conn_touch(c);
}

static int socket_error(int fd) {
        int err = 0;
        socklen_t len = sizeof err;

        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                return -errno;
        return -err;
}

static void conn_io(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct fwd_conn *c = userdata;
        bool rd = events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR);
        bool wr = events & (EPOLLOUT | EPOLLHUP | EPOLLERR);
        (void) l;

        if (fd == c->cfd) {
                c->c_rd |= rd;
                c->c_wr |= wr;
        } else {
                c->e_rd |= rd;
                c->e_wr |= wr;
        }

        /* A reset with nothing left to move in its direction would
         * otherwise wait for the other side or the idle timeout. */
        if ((events & EPOLLERR) && socket_error(fd) < 0) {
                c->f->stats.resets++;
                conn_free(c, true);
                return;
        }
        conn_pump(c);
}

static int pipe_make(struct fwd_tcp *f, int p[2]) {
        if (f->params.pipes)
                return fwd_pipes_get(f->params.pipes, p);
        if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0)
                return -errno;
        if (f->params.pipe_size > 0)
                (void) fcntl(p[1], F_SETPIPE_SZ, f->params.pipe_size);
        return 0;
}

static void conn_try(struct fwd_conn *c);

static void conn_established(struct fwd_conn *c) {
        struct fwd_tcp *f = c->f;
        int r;

        list_remove(&f->connecting, c);
        c->established = true;
        c->c_rd = c->c_wr = c->e_rd = c->e_wr = true;
        c->since = ev_now_ms(f->loop);
        list_append(&f->established, c);
        r = pipe_make(f, c->up.pipe);
        if (r >= 0)
                r = pipe_make(f, c->down.pipe);
        if (r >= 0)
                r = ev_io_add(f->loop, c->cfd, FWD_CONN_EVENTS, conn_io, c);
        if (r < 0) {
                f->stats.resets++;
                conn_free(c, true);
                return;
        }
        conn_pump(c);
}

static void conn_connect_failed(struct fwd_conn *c) {
        struct fwd_tcp *f = c->f;

        f->stats.connect_errors++;
        ev_io_del(f->loop, c->efd);
        close_fd(&c->efd);
        if (c->tries >= 2) {
                f->stats.refused++;
                conn_free(c, true);
                return;
        }
        f->stats.retries++;
        conn_try(c);
}

static void conn_connect_io(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct fwd_conn *c = userdata;
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        (void) l;
        (void) events;

        if (c->established) {
                conn_io(l, fd, events, userdata);
                return;
        }
        if (socket_error(fd) < 0) {
                conn_connect_failed(c);
                return;
        }
        /* Still in progress (a stale wake-up): wait for the next. */
        if (getpeername(fd, (struct sockaddr *) &ss, &len) < 0)
                return;
        conn_established(c);
}

/* Picks an endpoint and starts connecting to it. On failure c is freed
 * (client reset) or, after a first failure, retried. */
static void conn_try(struct fwd_conn *c) {
        struct fwd_tcp *f = c->f;
        struct fwd_addr ep;
        struct sockaddr_storage ss;
        socklen_t len;
        int r;

        r = f->pick(f->userdata, &c->client, c->tries ? &c->endpoint : NULL, &ep);
        if (r >= 0)
                r = fwd_addr_to_sockaddr(&ep, &ss, &len);
        if (r < 0) {
                f->stats.refused++;
                conn_free(c, true);
                return;
        }
        c->endpoint = ep;
        c->tries++;
        /* The connect timeout starts again: to the tail of the list. */
        c->since = ev_now_ms(f->loop);
        list_remove(&f->connecting, c);
        list_append(&f->connecting, c);
        c->efd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
        if (c->efd < 0) {
                f->stats.refused++;
                conn_free(c, true);
                return;
        }
        r = connect(c->efd, (struct sockaddr *) &ss, len) < 0 ? -errno : 0;
        if (r == 0 || r == -EINPROGRESS)
                /* Registered for everything at once: the connect's
                 * completion is the first EPOLLOUT edge, and no
                 * epoll_ctl is needed when it comes. */
                r = ev_io_add(f->loop, c->efd, FWD_CONN_EVENTS, conn_connect_io, c) < 0 ? -EIO : r;
        if (r == 0)
                conn_established(c);
        else if (r != -EINPROGRESS)
                conn_connect_failed(c);
}

static void fwd_sweep(struct ev_loop *l, void *userdata) {
        struct fwd_tcp *f = userdata;
        uint64_t now = ev_now_ms(l);

        f->sweep = NULL;
        while (f->params.connect_timeout_ms && f->connecting.head &&
               now - f->connecting.head->since >= f->params.connect_timeout_ms)
                conn_connect_failed(f->connecting.head);
        while (f->params.idle_timeout_ms && f->established.head &&
               now - f->established.head->since >= f->params.idle_timeout_ms) {
                f->stats.idle_timeouts++;
                conn_free(f->established.head, false);
        }
        sweep_arm(f);
}

static void fwd_listen_io(struct ev_loop *l, int fd, uint32_t events, void *userdata);

static void fwd_accept_resume(struct ev_loop *l, void *userdata) {
        struct fwd_tcp *f = userdata;

        f->pause = NULL;
        (void) ev_io_mod(l, f->lfd, EPOLLIN);
}

/* One accepted client: its connection, and the first connect. */
static void fwd_accepted(struct fwd_tcp *f, int cfd, const struct sockaddr_storage *ss, socklen_t len) {
        struct fwd_conn *c = calloc(1, sizeof *c);

        if (!c) {
                close_reset(&cfd);
                f->stats.accept_errors++;
                return;
        }
        *c = (struct fwd_conn) {
                .f = f,
                .cfd = cfd,
                .efd = -1,
                .up.pipe = {-1, -1},
                .down.pipe = {-1, -1},
        };
        (void) fwd_addr_from_sockaddr((const struct sockaddr *) ss, len, &c->client);
        f->stats.accepted++;
        f->stats.active++;
        list_append(&f->connecting, c);
        conn_try(c);
        sweep_arm(f);
}

static void fwd_listen_io(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct fwd_tcp *f = userdata;
        (void) events;

        for (int i = 0; i < FWD_ACCEPT_BATCH; i++) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof ss;
                int cfd = accept4(fd, (struct sockaddr *) &ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd >= 0) {
                        fwd_accepted(f, cfd, &ss, len);
                        continue;
                }
                if (errno == EAGAIN || errno == EINTR)
                        return;
                f->stats.accept_errors++;
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                        /* Out of a resource: rest rather than spin on a
                         * backlog we cannot take from. */
                        if (!f->pause && ev_io_mod(l, fd, 0) >= 0)
                                f->pause = ev_timer_add(l, FWD_ACCEPT_PAUSE_MS, fwd_accept_resume, f);
                        return;
                }
                /* ECONNABORTED and the like: that client is gone; next. */
        }
}

struct fwd_tcp *fwd_tcp_free(struct fwd_tcp *f) {
        if (!f)
                return NULL;
        while (f->connecting.head)
                conn_free(f->connecting.head, true);
        while (f->established.head)
                conn_free(f->established.head, false);
        f->sweep = ev_timer_cancel(f->loop, f->sweep);
        f->pause = ev_timer_cancel(f->loop, f->pause);
        if (f->lfd >= 0) {
                ev_io_del(f->loop, f->lfd);
                close(f->lfd);
        }
        free(f);
        return NULL;
}

DEFINE_CLEANUP(struct fwd_tcp, fwd_tcp_free)

/* The forwarder around a listening socket lfd, taken only on success. */
static int fwd_tcp_make(struct ev_loop *l, int lfd, const struct fwd_addr *local, const struct fwd_tcp_params *params,
                        fwd_tcp_pick_fn pick, void *userdata, struct fwd_tcp **ret) {
        _cleanup_(fwd_tcp_freep) struct fwd_tcp *f = calloc(1, sizeof *f);
        int r;

        if (!f)
                return -ENOMEM;
        f->loop = l;
        f->lfd = -1;
        f->local = *local;
        f->params = *params;
        f->pick = pick;
        f->userdata = userdata;
        f->pipe_cap = 65536;
        if (params->pipes)
                f->pipe_cap = fwd_pipes_capacity(params->pipes);
        else if (params->pipe_size > 0) {
                /* What the kernel granted (a power of two of pages, at most
                 * /proc/sys/fs/pipe-max-size for an unprivileged process). */
                int p[2];
                if (pipe2(p, O_CLOEXEC) < 0)
                        return -errno;
                r = fcntl(p[1], F_SETPIPE_SZ, params->pipe_size);
                r = r > 0 ? r : fcntl(p[1], F_GETPIPE_SZ);
                close(p[0]);
                close(p[1]);
                if (r > 0)
                        f->pipe_cap = (size_t) r;
        }
        r = ev_io_add(l, lfd, EPOLLIN, fwd_listen_io, f);
        if (r < 0)
                return r;
        f->lfd = lfd;
        *ret = TAKE_PTR(f);
        return 0;
}

static bool params_valid(struct ev_loop *l, const struct fwd_tcp_params *params, fwd_tcp_pick_fn pick) {
        return l && params && pick && params->backlog >= 0 && params->pipe_size >= 0;
}

int fwd_tcp_new(struct ev_loop *l, const struct fwd_addr *addr, const struct fwd_tcp_params *params,
                fwd_tcp_pick_fn pick, void *userdata, struct fwd_tcp **ret) {
        struct fwd_addr local;
        int fd, r;

        if (!addr || !params_valid(l, params, pick))
                return -EINVAL;
        fd = fwd_sock_open(addr, SOCK_STREAM, params->backlog ? params->backlog : SOMAXCONN, &local);
        if (fd < 0)
                return fd;
        r = fwd_tcp_make(l, fd, &local, params, pick, userdata, ret);
        if (r < 0)
                close(fd);
        return r;
}

int fwd_tcp_adopt(struct ev_loop *l, int fd, const struct fwd_tcp_params *params, fwd_tcp_pick_fn pick,
                  void *userdata, struct fwd_tcp **ret) {
        struct fwd_addr local;
        int r;

        if (fd < 0 || !params_valid(l, params, pick))
                return -EINVAL;
        r = fwd_sock_adopt(fd, SOCK_STREAM, &local);
        if (r < 0)
                return r;
        return fwd_tcp_make(l, fd, &local, params, pick, userdata, ret);
}

int fwd_tcp_listener(const struct fwd_tcp *f) {
        return f->lfd;
}

void fwd_tcp_close_listener(struct fwd_tcp *f) {
        if (f->lfd < 0)
                return;
        for (;;) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof ss;
                int cfd = accept4(f->lfd, (struct sockaddr *) &ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd >= 0)
                        fwd_accepted(f, cfd, &ss, len);
                else if (errno != EINTR && errno != ECONNABORTED)
                        break;
        }
        fwd_tcp_stop_accepting(f);
}

/* A socket filter sees a TCP segment from its header on: byte 13 holds
 * the flags. A SYN without ACK opens a handshake; everything else (the
 * ACK that completes one, data, RST) passes. */
int fwd_tcp_refuse_syns(struct fwd_tcp *f) {
        static struct sock_filter drop_syn[] = {
                BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 13),
                BPF_STMT(BPF_ALU | BPF_AND | BPF_K, TH_SYN | TH_ACK),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TH_SYN, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, 0),
                BPF_STMT(BPF_RET | BPF_K, UINT32_MAX),
        };
        const struct sock_fprog prog = {.len = ELEMENTSOF(drop_syn), .filter = drop_syn};

        if (f->lfd < 0)
                return 0;
        if (setsockopt(f->lfd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) < 0)
                return -errno;
        return 0;
}

void fwd_tcp_stop_accepting(struct fwd_tcp *f) {
        if (f->lfd < 0)
                return;
        ev_io_del(f->loop, f->lfd);
        close(f->lfd);
        f->lfd = -1;
        f->pause = ev_timer_cancel(f->loop, f->pause);
}

void fwd_tcp_local(const struct fwd_tcp *f, struct fwd_addr *ret) {
        *ret = f->local;
}

void fwd_tcp_get_stats(const struct fwd_tcp *f, struct fwd_tcp_stats *ret) {
        *ret = f->stats;
}
