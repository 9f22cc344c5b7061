/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle: a session is a connected UDP socket. connect() makes the
 * kernel keep only the endpoint's datagrams for it and report the
 * endpoint's ICMP errors on it, so a reply needs no lookup: the socket
 * that received it names the session, and the session names the client.
 * Sessions sit in a list ordered by last activity; one sweep timer, armed
 * while there are sessions, ends the overdue ones from its head.
 *
 * A socket bound to the wildcard address (a node port on every address)
 * learns each datagram's destination (IP_PKTINFO) and sends the session's
 * replies from it, so the client hears from the address it wrote to.
 */
#include "userspace/fwd-udp.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ev/ev.h"
#include "userspace/fwd-addr.h"
#include "userspace/fwd-sock.h"
#include "util/cleanup.h"
#include "util/hmap.h"

/* Datagrams per wake-up of one socket, so a flood on one service cannot
 * starve the rest of the loop (the sockets are level-triggered). */
#define FWD_UDP_BATCH 64

struct fwd_session {
        struct fwd_udp *f;
        struct fwd_session *prev, *next;        /* by last activity, oldest first */
        int fd;                                 /* connected to endpoint */
        struct fwd_addr client, endpoint;
        struct inet_addr dst;                   /* the address the client wrote to (wildcard sockets) */
        struct sockaddr_storage client_sa;
        socklen_t client_len;
        uint64_t last;
        bool awaiting;                          /* the last datagram went to the endpoint: no reply yet */
        char key[FWD_ADDR_STRLEN];              /* the client, as text: the map's key */
};

struct fwd_udp {
        struct ev_loop *loop;
        int fd;
        struct fwd_addr local;
        bool wildcard;                          /* bound to 0.0.0.0 or ::: replies name their source */
        struct fwd_udp_params params;
        fwd_udp_pick_fn pick;
        void *userdata;
        struct fwd_udp_stats stats;
        struct hmap sessions;                   /* client text -> struct fwd_session */
        struct fwd_session *head, *tail;
        struct ev_timer *sweep;
        unsigned char buf[65536];
};

static void session_unlink(struct fwd_udp *f, struct fwd_session *s) {
        if (s->prev)
                s->prev->next = s->next;
        else
                f->head = s->next;
        if (s->next)
                s->next->prev = s->prev;
        else
                f->tail = s->prev;
        s->prev = s->next = NULL;
}

static void session_append(struct fwd_udp *f, struct fwd_session *s) {
        s->prev = f->tail;
        s->next = NULL;
        if (f->tail)
                f->tail->next = s;
        else
                f->head = s;
        f->tail = s;
}

static void session_touch(struct fwd_session *s) {
        struct fwd_udp *f = s->f;

        s->last = ev_now_ms(f->loop);
        if (f->tail != s) {
                session_unlink(f, s);
                session_append(f, s);
        }
}

static void session_free(struct fwd_session *s) {
        struct fwd_udp *f = s->f;

        session_unlink(f, s);
        hmap_remove(&f->sessions, s->key);
        if (s->fd >= 0) {
                ev_io_del(f->loop, s->fd);
                close(s->fd);
        }
        f->stats.active--;
        free(s);
}

static void fwd_udp_sweep(struct ev_loop *l, void *userdata) {
        struct fwd_udp *f = userdata;
        uint64_t now = ev_now_ms(l);

        f->sweep = NULL;
        while (f->head && now - f->head->last >= f->params.idle_timeout_ms) {
                f->stats.idle_timeouts++;
                session_free(f->head);
        }
        if (f->head) {
                uint64_t period = f->params.idle_timeout_ms / 4;
                f->sweep = ev_timer_add(l, period ? period : 1, fwd_udp_sweep, f);
        }
}

/* Sends n bytes of f->buf to s's client from the service socket: from the
 * address the client wrote to. */
static ssize_t reply(struct fwd_udp *f, struct fwd_session *s, size_t n) {
        union {
                char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
                struct cmsghdr align;
        } control = {0};
        struct iovec iov = {f->buf, n};
        struct msghdr msg = {.msg_name = &s->client_sa, .msg_namelen = s->client_len, .msg_iov = &iov,
                             .msg_iovlen = 1};

        if (f->wildcard && s->dst.family) {
                struct cmsghdr *c = (struct cmsghdr *) control.buf;
                msg.msg_control = control.buf;
                if (s->dst.family == 4) {
                        struct in_pktinfo pi = {0};
                        memcpy(&pi.ipi_spec_dst, s->dst.bytes, 4);
                        c->cmsg_level = IPPROTO_IP;
                        c->cmsg_type = IP_PKTINFO;
                        c->cmsg_len = CMSG_LEN(sizeof pi);
                        memcpy(CMSG_DATA(c), &pi, sizeof pi);
                        msg.msg_controllen = CMSG_SPACE(sizeof pi);
                } else {
                        struct in6_pktinfo pi = {0};
                        memcpy(&pi.ipi6_addr, s->dst.bytes, 16);
                        c->cmsg_level = IPPROTO_IPV6;
                        c->cmsg_type = IPV6_PKTINFO;
                        c->cmsg_len = CMSG_LEN(sizeof pi);
                        memcpy(CMSG_DATA(c), &pi, sizeof pi);
                        msg.msg_controllen = CMSG_SPACE(sizeof pi);
                }
        }
        return sendmsg(f->fd, &msg, MSG_DONTWAIT);
}

/* The destination address of a datagram received with pktinfo, or an
 * address without a family. */
static struct inet_addr datagram_dst(struct msghdr *msg) {
        struct inet_addr a = {0};

        for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
                if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
                        struct in_pktinfo pi;
                        memcpy(&pi, CMSG_DATA(c), sizeof pi);
                        a.family = 4;
                        memcpy(a.bytes, &pi.ipi_addr, 4);
                } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
                        struct in6_pktinfo pi;
                        memcpy(&pi, CMSG_DATA(c), sizeof pi);
                        a.family = 6;
                        memcpy(a.bytes, &pi.ipi6_addr, 16);
                }
        }
        return a;
}

/* A reply (or an ICMP error) on a session's socket. */
static void session_io(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct fwd_session *s = userdata;
        struct fwd_udp *f = s->f;
        (void) l;
        (void) events;

        for (int i = 0; i < FWD_UDP_BATCH; i++) {
                ssize_t n = recv(fd, f->buf, sizeof f->buf, MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == ECONNREFUSED) {
                                /* Port unreachable: end the session, so the
                                 * client's next datagram picks again. */
                                f->stats.refused++;
                                session_free(s);
                        }
                        return;
                }
                /* From the service socket: the reply's source is the
                 * service address the client wrote to. */
                if (reply(f, s, (size_t) n) < 0) {
                        f->stats.dropped++;
                        continue;
                }
                f->stats.to_clients++;
                f->stats.bytes_to_clients += (uint64_t) n;
                s->awaiting = false;
                session_touch(s);
        }
}

/* A new session for client, connected to the endpoint the callback picks.
 * Returns NULL when there is none (no endpoint, the limit, no socket). */
static struct fwd_session *session_new(struct fwd_udp *f, const struct sockaddr_storage *ss, socklen_t len,
                                       const struct fwd_addr *client, const char *key) {
        _cleanup_free_ struct fwd_session *s = NULL;
        struct sockaddr_storage ep;
        socklen_t eplen;
        struct fwd_addr endpoint;

        if (f->stats.active >= f->params.max_sessions)
                return NULL;
        if (f->pick(f->userdata, client, &endpoint) < 0 || fwd_addr_to_sockaddr(&endpoint, &ep, &eplen) < 0)
                return NULL;
        s = calloc(1, sizeof *s);
        if (!s)
                return NULL;
        *s = (struct fwd_session) {.f = f, .client = *client, .endpoint = endpoint, .client_sa = *ss,
                                   .client_len = len};
        strcpy(s->key, key);
        s->fd = socket(ep.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
        if (s->fd < 0)
                return NULL;
        if (connect(s->fd, (struct sockaddr *) &ep, eplen) < 0 ||
            ev_io_add(f->loop, s->fd, EPOLLIN, session_io, s) < 0) {
                close(s->fd);
                return NULL;
        }
        hmap_put(&f->sessions, s->key, s);
        session_append(f, s);
        f->stats.sessions++;
        f->stats.active++;
        if (!f->sweep) {
                uint64_t period = f->params.idle_timeout_ms / 4;
                f->sweep = ev_timer_add(f->loop, period ? period : 1, fwd_udp_sweep, f);
        }
        return TAKE_PTR(s);
}

/* Datagrams from clients to the service address. */
static void fwd_udp_io(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct fwd_udp *f = userdata;
        (void) l;
        (void) events;

        for (int i = 0; i < FWD_UDP_BATCH; i++) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof ss;
                struct fwd_addr client;
                struct fwd_session *s;
                char key[FWD_ADDR_STRLEN];
                union {
                        char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
                        struct cmsghdr align;
                } control;
                struct iovec iov = {f->buf, sizeof f->buf};
                struct msghdr msg = {.msg_name = &ss, .msg_namelen = len, .msg_iov = &iov, .msg_iovlen = 1,
                                     .msg_control = control.buf,
                                     .msg_controllen = f->wildcard ? sizeof control.buf : 0};
                ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);

                if (n < 0)
                        return;
                len = msg.msg_namelen;
                if (fwd_addr_from_sockaddr((struct sockaddr *) &ss, len, &client) < 0)
                        continue;
                fwd_addr_format(&client, key);
                s = hmap_get(&f->sessions, key);
                if (!s) {
                        s = session_new(f, &ss, len, &client, key);
                        if (s && f->wildcard)
                                s->dst = datagram_dst(&msg);
                }
                if (!s) {
                        f->stats.dropped++;
                        continue;
                }
                if (send(s->fd, f->buf, (size_t) n, MSG_DONTWAIT) < 0) {
                        f->stats.dropped++;
                        /* An earlier datagram's port unreachable, reported
                         * here rather than to session_io(). */
                        if (errno == ECONNREFUSED) {
                                f->stats.refused++;
                                session_free(s);
                        }
                        continue;
                }
                f->stats.to_endpoints++;
                f->stats.bytes_to_endpoints += (uint64_t) n;
                s->awaiting = true;
                session_touch(s);
        }
}

size_t fwd_udp_drop_endpoint(struct fwd_udp *f, const struct fwd_addr *endpoint) {
        struct fwd_session *s, *next;
        size_t n = 0;

        for (s = f->head; s; s = next) {
                next = s->next;
                if (fwd_addr_equal(&s->endpoint, endpoint)) {
                        session_free(s);
                        n++;
                }
        }
        return n;
}

struct fwd_udp *fwd_udp_free(struct fwd_udp *f) {
        if (!f)
                return NULL;
        while (f->head)
                session_free(f->head);
        hmap_done(&f->sessions);
        f->sweep = ev_timer_cancel(f->loop, f->sweep);
        if (f->fd >= 0) {
                ev_io_del(f->loop, f->fd);
                close(f->fd);
        }
        free(f);
        return NULL;
}

DEFINE_CLEANUP(struct fwd_udp, fwd_udp_free)

/* The forwarder around a bound socket fd, taken only on success. */
static int fwd_udp_make(struct ev_loop *l, int fd, const struct fwd_addr *local, const struct fwd_udp_params *params,
                        fwd_udp_pick_fn pick, void *userdata, struct fwd_udp **ret) {
        _cleanup_(fwd_udp_freep) struct fwd_udp *f = calloc(1, sizeof *f);
        int r;

        if (!f)
                return -ENOMEM;
        *f = (struct fwd_udp) {
                .loop = l,
                .fd = -1,
                .local = *local,
                .params = *params,
                .pick = pick,
                .userdata = userdata,
                .sessions = HMAP_INIT_KEY_ARRAY(struct fwd_session, key),
        };
        if (!f->params.max_sessions)
                f->params.max_sessions = 65536;
        if (inet_addr_is_unspecified(&local->ip)) {
                const int one = 1;
                f->wildcard = true;
                if (local->ip.family == 4 ? setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one) < 0
                                          : setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one) < 0)
                        return -errno;
        }
        r = ev_io_add(l, fd, EPOLLIN, fwd_udp_io, f);
        if (r < 0)
                return r;
        f->fd = fd;
        *ret = TAKE_PTR(f);
        return 0;
}

static bool params_valid(struct ev_loop *l, const struct fwd_udp_params *params, fwd_udp_pick_fn pick) {
        return l && params && pick && params->idle_timeout_ms > 0;
}

int fwd_udp_new(struct ev_loop *l, const struct fwd_addr *addr, const struct fwd_udp_params *params,
                fwd_udp_pick_fn pick, void *userdata, struct fwd_udp **ret) {
        struct fwd_addr local;
        int fd, r;

        if (!addr || !params_valid(l, params, pick))
                return -EINVAL;
        fd = fwd_sock_open(addr, SOCK_DGRAM, 0, &local);
        if (fd < 0)
                return fd;
        r = fwd_udp_make(l, fd, &local, params, pick, userdata, ret);
        if (r < 0)
                close(fd);
        return r;
}

int fwd_udp_adopt(struct ev_loop *l, int fd, const struct fwd_udp_params *params, fwd_udp_pick_fn pick,
                  void *userdata, struct fwd_udp **ret) {
        struct fwd_addr local;
        int r;

        if (fd < 0 || !params_valid(l, params, pick))
                return -EINVAL;
        r = fwd_sock_adopt(fd, SOCK_DGRAM, &local);
        if (r < 0)
                return r;
        return fwd_udp_make(l, fd, &local, params, pick, userdata, ret);
}

int fwd_udp_socket(const struct fwd_udp *f) {
        return f->fd;
}

void fwd_udp_stop_reading(struct fwd_udp *f) {
        ev_io_del(f->loop, f->fd);
}

/* The list is in order of last activity: from its tail back to the first
 * session older than since_ms. */
size_t fwd_udp_awaiting(const struct fwd_udp *f, uint64_t since_ms) {
        size_t n = 0;

        for (const struct fwd_session *s = f->tail; s && s->last >= since_ms; s = s->prev)
                n += s->awaiting;
        return n;
}

void fwd_udp_local(const struct fwd_udp *f, struct fwd_addr *ret) {
        *ret = f->local;
}

void fwd_udp_get_stats(const struct fwd_udp *f, struct fwd_udp_stats *ret) {
        *ret = f->stats;
}
