/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP forwarder (userspace/fwd-tcp.c) over loopback with real sockets:
 * its loop runs in a thread of its own, and the test's clients and
 * endpoints are blocking sockets in the main thread and helper threads.
 * Every wait is for a state (accept, EOF, a reset, the loop's stop), never
 * for a length of time; the one timed check is the idle timeout itself.
 *
 *  - bulk: 24 MiB each way at once, compared byte for byte, each side's
 *    end (EOF) arriving after exactly its peer's bytes;
 *  - half-close: a client's FIN reaches the endpoint while the way back
 *    stays open (IPv4 and IPv6);
 *  - a refused endpoint is retried on the next, and so is one that does
 *    not answer within the connect timeout; two refusals, or no endpoint,
 *    reset the client;
 *  - the idle timeout closes a quiet connection, not a busy one;
 *  - a listener refusing SYNs finishes the handshake under way (held
 *    half-way by tcp-held.h) and drops a new one, which is refused once
 *    the listener closes;
 *  - 300 connections at once, each echoed, with a pool of spare pipes;
 *  - after each test: no connection left open, fds back to where they were.
 */
#include "userspace/fwd-addr.h"
#include "userspace/fwd-pipes.h"
#include "userspace/fwd-tcp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ev/ev.h"
#include "tcp-held.h"
#include "test.h"
#include "util/inet.h"

static int count_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        int n = 0;

        if (!d)
                return -1;
        while (readdir(d))
                n++;
        closedir(d);
        return n;
}

static uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

static struct fwd_addr loopback(int family, uint16_t port) {
        struct fwd_addr a = {.port = port};

        CHECK(inet_addr_parse(family == 6 ? "::1" : "127.0.0.1", &a.ip) == 0);
        return a;
}

/* A blocking socket bound to a loopback port; listening if listening. */
static int bound(int family, bool listening, struct fwd_addr *ret) {
        struct fwd_addr a = loopback(family, 0);
        struct sockaddr_storage ss;
        socklen_t len;
        int fd = socket(family == 6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        CHECK(fd >= 0);
        CHECK(fwd_addr_to_sockaddr(&a, &ss, &len) == 0);
        CHECK(bind(fd, (struct sockaddr *) &ss, len) == 0);
        if (listening)
                CHECK(listen(fd, 512) == 0);
        len = sizeof ss;
        CHECK(getsockname(fd, (struct sockaddr *) &ss, &len) == 0);
        CHECK(fwd_addr_from_sockaddr((struct sockaddr *) &ss, len, ret) == 0);
        return fd;
}

static int dial(const struct fwd_addr *a) {
        struct sockaddr_storage ss;
        socklen_t len;
        int fd;

        CHECK(fwd_addr_to_sockaddr(a, &ss, &len) == 0);
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(fd >= 0);
        CHECK(connect(fd, (struct sockaddr *) &ss, len) == 0);
        return fd;
}

/* Reads until EOF or an error, at most cap bytes kept. Returns the count
 * read, or -errno of the error that ended it. */
static ssize_t read_all(int fd, char *buf, size_t cap) {
        size_t got = 0;

        for (;;) {
                ssize_t n = read(fd, buf + got, cap - got);
                if (n == 0)
                        return (ssize_t) got;
                if (n < 0)
                        return errno == EINTR ? 0 : -errno;
                got += (size_t) n;
                if (got == cap)
                        return (ssize_t) got;
        }
}

/* ---- the forwarder in a thread ---- */

struct rig {
        struct ev_loop *loop;
        struct fwd_tcp *fwd;
        struct fwd_addr service;
        struct fwd_addr eps[4];
        size_t n_eps;
        unsigned picks;
        int stop[2];
        pthread_t thread;
};

/* The first endpoint, then the first that is not the one that failed. */
static int rig_pick(void *userdata, const struct fwd_addr *client, const struct fwd_addr *failed,
                    struct fwd_addr *ret) {
        struct rig *r = userdata;
        (void) client;

        size_t n = __atomic_load_n(&r->n_eps, __ATOMIC_SEQ_CST);

        r->picks++;
        for (size_t i = 0; i < n; i++)
                if (!failed || !fwd_addr_equal(failed, &r->eps[i])) {
                        *ret = r->eps[i];
                        return 0;
                }
        return -ENOENT;
}

static void rig_stop_io(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        (void) fd;
        (void) events;
        (void) userdata;
        ev_stop(l);
}

static void *rig_run(void *p) {
        struct rig *r = p;
        CHECK(ev_run(r->loop) == 0);
        return NULL;
}

static void rig_start(struct rig *r, int family, const struct fwd_tcp_params *params) {
        struct fwd_addr any = loopback(family, 0);

        r->loop = ev_loop_new();
        CHECK(r->loop);
        CHECK(pipe2(r->stop, O_CLOEXEC) == 0);
        CHECK(ev_io_add(r->loop, r->stop[0], EPOLLIN, rig_stop_io, r) == 0);
        CHECK(fwd_tcp_new(r->loop, &any, params, rig_pick, r, &r->fwd) == 0);
        fwd_tcp_local(r->fwd, &r->service);
        CHECK(r->service.port != 0);
        CHECK(pthread_create(&r->thread, NULL, rig_run, r) == 0);
}

static struct fwd_tcp_stats rig_stop(struct rig *r) {
        struct fwd_tcp_stats st;

        CHECK(write(r->stop[1], "x", 1) == 1);
        CHECK(pthread_join(r->thread, NULL) == 0);
        fwd_tcp_get_stats(r->fwd, &st);
        r->fwd = fwd_tcp_free(r->fwd);
        ev_io_del(r->loop, r->stop[0]);
        close(r->stop[0]);
        close(r->stop[1]);
        r->loop = ev_loop_free(r->loop);
        return st;
}

static const struct fwd_tcp_params defaults = {.idle_timeout_ms = 60000, .connect_timeout_ms = 5000};

/* ---- bulk: a pseudo-random stream each way ---- */

static uint64_t xorshift(uint64_t *s) {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

static void stream_fill(uint64_t *state, unsigned char *buf, size_t n) {
        for (size_t i = 0; i < n; i += 8) {
                uint64_t v = xorshift(state);
                memcpy(buf + i, &v, n - i < 8 ? n - i : 8);
        }
}

struct bulk {
        int fd;
        uint64_t send_seed, recv_seed;
        size_t n;               /* bytes each way */
        size_t got;             /* received before EOF */
        bool same;              /* and all as the peer's stream */
        bool sent;
};

static void *bulk_writer(void *p) {
        struct bulk *b = p;
        static __thread unsigned char buf[65536];
        uint64_t s = b->send_seed;

        for (size_t done = 0; done < b->n;) {
                size_t k = b->n - done < sizeof buf ? b->n - done : sizeof buf;
                stream_fill(&s, buf, k);
                for (size_t off = 0; off < k;) {
                        ssize_t w = write(b->fd, buf + off, k - off);
                        if (w <= 0)
                                return NULL;
                        off += (size_t) w;
                }
                done += k;
        }
        b->sent = shutdown(b->fd, SHUT_WR) == 0;
        return NULL;
}

/* Sends b->n bytes while reading the peer's until EOF. The expected bytes
 * are made in the same 64 KiB chunks as the peer's writer makes them. */
static void bulk_run(struct bulk *b) {
        static __thread unsigned char want[65536], got[65536];
        uint64_t s = b->recv_seed;
        size_t have = 0, used = 0, made = 0;
        pthread_t w;

        b->same = true;
        b->got = 0;
        CHECK(pthread_create(&w, NULL, bulk_writer, b) == 0);
        for (;;) {
                ssize_t n = read(b->fd, got, sizeof got);
                if (n <= 0)
                        break;
                for (ssize_t i = 0; i < n && b->same; i++) {
                        if (used == have) {
                                size_t k = b->n - made < sizeof want ? b->n - made : sizeof want;
                                if (k == 0) {
                                        b->same = false;        /* more than the peer sent */
                                        break;
                                }
                                stream_fill(&s, want, k);
                                made += k;
                                have = k;
                                used = 0;
                        }
                        if (got[i] != want[used++])
                                b->same = false;
                }
                b->got += (size_t) n;
        }
        CHECK(pthread_join(w, NULL) == 0);
}

static void *bulk_server(void *p) {
        struct bulk *b = p;
        int lfd = b->fd;

        b->fd = accept(lfd, NULL, NULL);
        CHECK(b->fd >= 0);
        bulk_run(b);
        close(b->fd);
        return NULL;
}

static void test_bulk_both_ways(void) {
        int before = count_fds();
        struct rig r = {0};
        struct fwd_tcp_stats st;
        const size_t n = 24u << 20;
        struct bulk server = {.send_seed = 0x5eed1, .recv_seed = 0xc11e47, .n = n};
        struct bulk client = {.send_seed = 0xc11e47, .recv_seed = 0x5eed1, .n = n};
        pthread_t t;
        int lfd = bound(4, true, &r.eps[0]);

        r.n_eps = 1;
        rig_start(&r, 4, &defaults);
        server.fd = lfd;
        CHECK(pthread_create(&t, NULL, bulk_server, &server) == 0);
        client.fd = dial(&r.service);
        bulk_run(&client);
        CHECK(pthread_join(t, NULL) == 0);
        close(client.fd);
        close(lfd);
        CHECK(client.sent && server.sent);
        CHECK(client.got == n && client.same);
        CHECK(server.got == n && server.same);
        st = rig_stop(&r);
        CHECK(st.accepted == 1 && st.active == 0);
        CHECK(st.bytes_to_endpoints == n && st.bytes_to_clients == n);
        CHECK(st.connect_errors == 0 && st.resets == 0 && st.accept_errors == 0);
        CHECK(count_fds() == before);
}

/* ---- half-close ---- */

static void *halfclose_server(void *p) {
        int *fd = p, c = accept(*fd, NULL, NULL);
        char buf[64] = "got:";
        ssize_t n;

        CHECK(c >= 0);
        /* Read to EOF first: only the client's FIN, passed on, ends this. */
        n = read_all(c, buf + 4, sizeof buf - 5);
        CHECK(n == 4);
        if (n > 0)
                CHECK(write(c, buf, 4 + (size_t) n) == 4 + n);
        close(c);
        return NULL;
}

static void halfclose(int family) {
        int before = count_fds();
        struct rig r = {0};
        struct fwd_tcp_stats st;
        char buf[64] = {0};
        pthread_t t;
        int lfd = bound(family, true, &r.eps[0]), c;

        r.n_eps = 1;
        rig_start(&r, family, &defaults);
        CHECK(pthread_create(&t, NULL, halfclose_server, &lfd) == 0);
        c = dial(&r.service);
        CHECK(write(c, "ping", 4) == 4);
        CHECK(shutdown(c, SHUT_WR) == 0);
        CHECK(read_all(c, buf, sizeof buf - 1) == 8);
        CHECK_STREQ(buf, "got:ping");
        CHECK(pthread_join(t, NULL) == 0);
        close(c);
        close(lfd);
        st = rig_stop(&r);
        CHECK(st.accepted == 1 && st.active == 0 && st.resets == 0);
        CHECK(st.bytes_to_endpoints == 4 && st.bytes_to_clients == 8);
        CHECK(count_fds() == before);
}

static void test_half_close_ipv4(void) {
        halfclose(4);
}

static void test_half_close_ipv6(void) {
        int fd = socket(AF_INET6, SOCK_STREAM, 0);
        struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
        bool have = fd >= 0 && bind(fd, (struct sockaddr *) &s6, sizeof s6) == 0;

        if (fd >= 0)
                close(fd);
        if (!have) {
                printf("test_half_close_ipv6: no IPv6 loopback here, skipped\n");
                return;
        }
        halfclose(6);
}

/* ---- connect failures ---- */

static void *hello_server(void *p) {
        int *fd = p, c = accept(*fd, NULL, NULL);

        CHECK(c >= 0);
        CHECK(write(c, "hello", 5) == 5);
        close(c);
        return NULL;
}

static void test_refused_endpoint_retried(void) {
        int before = count_fds();
        struct rig r = {0};
        struct fwd_tcp_stats st;
        char buf[16] = {0};
        pthread_t t;
        /* Bound, not listening: a connect to it is refused (RST). */
        int dead = bound(4, false, &r.eps[0]);
        int lfd = bound(4, true, &r.eps[1]), c;

        r.n_eps = 2;
        rig_start(&r, 4, &defaults);
        CHECK(pthread_create(&t, NULL, hello_server, &lfd) == 0);
        c = dial(&r.service);
        CHECK(read_all(c, buf, sizeof buf - 1) == 5);
        CHECK_STREQ(buf, "hello");
        CHECK(pthread_join(t, NULL) == 0);
        close(c);
        st = rig_stop(&r);
        CHECK(r.picks == 2);
        CHECK(st.connect_errors == 1 && st.retries == 1 && st.refused == 0);
        CHECK(st.accepted == 1 && st.active == 0);
        close(dead);
        close(lfd);
        CHECK(count_fds() == before);
}

/* Accepts n connections on *fd and says hello on each. */
struct hellos {
        int fd, n;
};

static void *hellos_server(void *p) {
        struct hellos *h = p;
        for (int i = 0; i < h->n; i++) {
                int c = accept(h->fd, NULL, NULL);
                CHECK(c >= 0);
                CHECK(write(c, "hello", 5) == 5);
                close(c);
        }
        return NULL;
}

/* Connections the kernel queued on the listener before it closes are
 * forwarded, not reset; the next connection is refused. */
static void test_close_listener_takes_the_queue(void) {
        int before = count_fds();
        struct rig r = {0};
        struct fwd_tcp_stats st;
        struct hellos h = {.n = 5};
        struct fwd_addr any = loopback(4, 0);
        int c[5], late;
        pthread_t t;

        h.fd = bound(4, true, &r.eps[0]);
        r.n_eps = 1;
        r.loop = ev_loop_new();
        CHECK(pipe2(r.stop, O_CLOEXEC) == 0);
        CHECK(ev_io_add(r.loop, r.stop[0], EPOLLIN, rig_stop_io, &r) == 0);
        CHECK(fwd_tcp_new(r.loop, &any, &defaults, rig_pick, &r, &r.fwd) == 0);
        fwd_tcp_local(r.fwd, &r.service);
        /* The loop is not running: the five wait in the accept queue. */
        for (int i = 0; i < 5; i++)
                c[i] = dial(&r.service);
        fwd_tcp_close_listener(r.fwd);
        late = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_storage ss;
        socklen_t len;
        CHECK(fwd_addr_to_sockaddr(&r.service, &ss, &len) == 0);
        CHECK(connect(late, (struct sockaddr *) &ss, len) < 0 && errno == ECONNREFUSED);
        close(late);
        CHECK(pthread_create(&t, NULL, hellos_server, &h) == 0);
        CHECK(pthread_create(&r.thread, NULL, rig_run, &r) == 0);
        for (int i = 0; i < 5; i++) {
                char buf[16] = {0};
                CHECK(read_all(c[i], buf, sizeof buf - 1) == 5);
                CHECK_STREQ(buf, "hello");
                close(c[i]);
        }
        CHECK(pthread_join(t, NULL) == 0);
        st = rig_stop(&r);
        CHECK(st.accepted == 5 && st.refused == 0 && st.resets == 0);
        close(h.fd);
        CHECK(count_fds() == before);
}

/* A listener refusing SYNs drops a new client's (which retransmits it)
 * while a handshake already under way completes and is forwarded; closed
 * once none is left, it resets nothing, and the new client's next SYN
 * is refused. */
static void test_refuse_syns_finishes_handshakes(void) {
        int before = count_fds();
        struct rig r = {0};
        struct hellos h = {.n = 1};
        struct fwd_tcp_stats st;
        struct sockaddr_storage ss;
        socklen_t len = sizeof(int);
        char buf[16] = {0};
        unsigned retrans = 0;
        pthread_t t;
        int held, late, err = 0;

        h.fd = bound(4, true, &r.eps[0]);
        r.n_eps = 1;
        rig_start(&r, 4, &defaults);
        CHECK(pthread_create(&t, NULL, hellos_server, &h) == 0);
        held = tcp_held_connect(&r.service);
        while (!tcp_held_listed(&r.service))
                poll(NULL, 0, 5);
        CHECK(fwd_tcp_refuse_syns(r.fwd) == 0);
        late = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        CHECK(fwd_addr_to_sockaddr(&r.service, &ss, &len) == 0);
        CHECK(connect(late, (struct sockaddr *) &ss, len) < 0 && errno == EINPROGRESS);
        /* The held one completes at the listener's next SYN-ACK and is
         * forwarded; the late one's SYN went unanswered. */
        tcp_held_release(held);
        CHECK(fcntl(held, F_SETFL, 0) == 0);
        struct pollfd pfd = {.fd = held, .events = POLLIN};
        CHECK(poll(&pfd, 1, 10000) == 1);
        CHECK(read_all(held, buf, sizeof buf - 1) == 5);
        CHECK_STREQ(buf, "hello");
        CHECK(pthread_join(t, NULL) == 0);
        while (tcp_held_state(late, &retrans) == TCP_SYN_SENT && retrans == 0)
                poll(NULL, 0, 5);
        CHECK(tcp_held_state(late, NULL) == TCP_SYN_SENT);
        CHECK(!tcp_held_listed(&r.service));
        /* Closed now (the loop stopped first: it owns the listener), the
         * late client's retransmitted SYN meets no listener. */
        CHECK(write(r.stop[1], "x", 1) == 1);
        CHECK(pthread_join(r.thread, NULL) == 0);
        fwd_tcp_close_listener(r.fwd);
        pfd = (struct pollfd) {.fd = late, .events = POLLOUT};
        CHECK(poll(&pfd, 1, 10000) == 1);
        len = sizeof err;
        CHECK(getsockopt(late, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == ECONNREFUSED);
        fwd_tcp_get_stats(r.fwd, &st);
        CHECK(st.accepted == 1 && st.resets == 0 && st.refused == 0);
        r.fwd = fwd_tcp_free(r.fwd);
        ev_io_del(r.loop, r.stop[0]);
        close(r.stop[0]);
        close(r.stop[1]);
        r.loop = ev_loop_free(r.loop);
        close(held);
        close(late);
        close(h.fd);
        CHECK(count_fds() == before);
}

static void test_all_refused_resets_client(void) {
        int before = count_fds();
        struct rig r = {0};
        struct fwd_tcp_stats st;
        char buf[16];
        int dead1 = bound(4, false, &r.eps[0]);
        int dead2 = bound(4, false, &r.eps[1]), c;

        r.n_eps = 2;
        rig_start(&r, 4, &defaults);
        c = dial(&r.service);
        CHECK(read_all(c, buf, sizeof buf) == -ECONNRESET);
        close(c);
        /* No endpoint at all: reset without a connect. */
        __atomic_store_n(&r.n_eps, 0, __ATOMIC_SEQ_CST);
        c = dial(&r.service);
        CHECK(read_all(c, buf, sizeof buf) == -ECONNRESET);
        close(c);
        st = rig_stop(&r);
        CHECK(st.accepted == 2 && st.refused == 2);
        CHECK(st.connect_errors == 2 && st.retries == 1);
        CHECK(st.active == 0);
        close(dead1);
        close(dead2);
        CHECK(count_fds() == before);
}

/* An endpoint that never answers: a listener with a full accept queue
 * drops SYNs. The connect times out and the next endpoint is tried. */
static void test_connect_timeout_retried(void) {
        int before = count_fds();
        const struct fwd_tcp_params params = {.idle_timeout_ms = 60000, .connect_timeout_ms = 300};
        struct rig r = {0};
        struct fwd_tcp_stats st;
        struct fwd_addr mute;
        struct sockaddr_storage ss;
        socklen_t len;
        struct pollfd pfd;
        char buf[16] = {0};
        pthread_t t;
        uint64_t start;
        int full = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), filler, c;
        int lfd = bound(4, true, &r.eps[1]);
        struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

        CHECK(full >= 0 && bind(full, (struct sockaddr *) &any, sizeof any) == 0 && listen(full, 0) == 0);
        len = sizeof ss;
        CHECK(getsockname(full, (struct sockaddr *) &ss, &len) == 0);
        CHECK(fwd_addr_from_sockaddr((struct sockaddr *) &ss, len, &mute) == 0);
        /* One connection fills a backlog of 0; wait until it is in. */
        filler = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        CHECK(fwd_addr_to_sockaddr(&mute, &ss, &len) == 0);
        CHECK(connect(filler, (struct sockaddr *) &ss, len) == 0 || errno == EINPROGRESS);
        pfd = (struct pollfd) {.fd = filler, .events = POLLOUT};
        CHECK(poll(&pfd, 1, 5000) == 1);
        r.eps[0] = mute;
        r.n_eps = 2;
        rig_start(&r, 4, &params);
        CHECK(pthread_create(&t, NULL, hello_server, &lfd) == 0);
        start = now_ms();
        c = dial(&r.service);
        CHECK(read_all(c, buf, sizeof buf - 1) == 5);
        CHECK_STREQ(buf, "hello");
        CHECK(now_ms() - start >= 300);
        CHECK(pthread_join(t, NULL) == 0);
        close(c);
        st = rig_stop(&r);
        CHECK(st.connect_errors == 1 && st.retries == 1 && st.refused == 0 && st.active == 0);
        close(filler);
        close(full);
        close(lfd);
        CHECK(count_fds() == before);
}

/* ---- idle timeout ---- */

struct idle_server {
        int lfd;
        int quiet;              /* accepted, never written to */
        bool quiet_eof;         /* it ended (the forwarder closed it) */
};

/* The first connection stays quiet until it ends; the second is echoed
 * until the client closes it. */
static void *idle_server(void *p) {
        struct idle_server *s = p;
        char buf[64];
        int busy;
        ssize_t n;

        s->quiet = accept(s->lfd, NULL, NULL);
        busy = accept(s->lfd, NULL, NULL);
        CHECK(s->quiet >= 0 && busy >= 0);
        while ((n = read(busy, buf, sizeof buf)) > 0)
                CHECK(write(busy, buf, (size_t) n) == n);
        close(busy);
        s->quiet_eof = read_all(s->quiet, buf, sizeof buf) == 0;
        close(s->quiet);
        return NULL;
}

static void test_idle_timeout(void) {
        int before = count_fds();
        const struct fwd_tcp_params params = {.idle_timeout_ms = 400, .connect_timeout_ms = 5000};
        struct idle_server srv = {0};
        struct rig r = {0};
        struct fwd_tcp_stats st;
        struct pollfd pfd;
        char buf[16];
        pthread_t t;
        uint64_t start, quiet_end;
        int quiet, busy, echoed = 0, pings = 0;

        srv.lfd = bound(4, true, &r.eps[0]);
        r.n_eps = 1;
        rig_start(&r, 4, &params);
        CHECK(pthread_create(&t, NULL, idle_server, &srv) == 0);
        start = now_ms();
        quiet = dial(&r.service);
        busy = dial(&r.service);
        /* A ping every 100 ms for 1.2 s, three idle timeouts' worth:
         * activity keeps the busy connection open, while the quiet one is
         * closed (EOF) after the timeout, not before. */
        quiet_end = 0;
        while (now_ms() - start < 1200) {
                pfd = (struct pollfd) {.fd = quiet, .events = POLLIN};
                CHECK(write(busy, "p", 1) == 1);
                if (read(busy, buf, 1) == 1)
                        echoed++;
                if (quiet_end)
                        (void) poll(NULL, 0, 100);
                else if (poll(&pfd, 1, 100) == 1)
                        quiet_end = now_ms();
                pings++;
        }
        CHECK(pings >= 3 && echoed == pings);
        CHECK(read_all(quiet, buf, sizeof buf) == 0);
        CHECK(quiet_end - start >= 400 && quiet_end - start < 1200);
        close(busy);
        CHECK(pthread_join(t, NULL) == 0);
        CHECK(srv.quiet_eof);
        close(quiet);
        close(srv.lfd);
        st = rig_stop(&r);
        CHECK(st.idle_timeouts == 1);
        CHECK(st.accepted == 2 && st.active == 0);
        CHECK(count_fds() == before);
}

/* ---- many at once ---- */

#define MANY 300

/* Echoes each connection and ends it after the client's FIN, all in one
 * poll() loop, until MANY connections have ended. */
static void *many_server(void *p) {
        int lfd = *(int *) p, ended = 0, n = 1;
        struct pollfd pfd[MANY + 1] = {{.fd = lfd, .events = POLLIN}};

        while (ended < MANY) {
                CHECK(poll(pfd, (nfds_t) n, 10000) > 0);
                if ((pfd[0].revents & POLLIN) && n < MANY + 1) {
                        int c = accept(lfd, NULL, NULL);
                        CHECK(c >= 0);
                        pfd[n++] = (struct pollfd) {.fd = c, .events = POLLIN};
                }
                for (int i = 1; i < n; i++) {
                        char buf[256];
                        ssize_t k;
                        if (pfd[i].fd < 0 || !pfd[i].revents)
                                continue;
                        k = read(pfd[i].fd, buf, sizeof buf);
                        if (k > 0) {
                                CHECK(write(pfd[i].fd, buf, (size_t) k) == k);
                                continue;
                        }
                        close(pfd[i].fd);
                        pfd[i].fd = -1;
                        ended++;
                }
        }
        return NULL;
}

/* With a pool of spare pipes, which then holds its maximum: each clean
 * end gave its pipes back (empty, so the next connections' bytes are
 * their own; test_half_close after it checks that). */
static void test_many_concurrent(void) {
        int before = count_fds();
        struct rig r = {0};
        struct fwd_tcp_stats st;
        struct fwd_tcp_params params = defaults;
        struct fwd_pipes *pool = NULL;
        static int c[MANY];
        pthread_t t;
        int lfd = bound(4, true, &r.eps[0]), ok = 0, hfd;
        char got[64] = {0};

        CHECK(fwd_pipes_new(64, 0, &pool) == 0);
        params.pipes = pool;
        r.n_eps = 1;
        rig_start(&r, 4, &params);
        CHECK(pthread_create(&t, NULL, many_server, &lfd) == 0);
        /* All open before any ends. */
        for (int i = 0; i < MANY; i++) {
                char msg[32];
                int len = snprintf(msg, sizeof msg, "connection %d", i);
                c[i] = dial(&r.service);
                CHECK(write(c[i], msg, (size_t) len) == len);
        }
        for (int i = 0; i < MANY; i++)
                CHECK(shutdown(c[i], SHUT_WR) == 0);
        for (int i = 0; i < MANY; i++) {
                char msg[32], buf[64] = {0};
                snprintf(msg, sizeof msg, "connection %d", i);
                if (read_all(c[i], buf, sizeof buf - 1) == (ssize_t) strlen(msg) && strcmp(buf, msg) == 0)
                        ok++;
                close(c[i]);
        }
        CHECK(ok == MANY);
        CHECK(pthread_join(t, NULL) == 0);
        /* Reused pipes carry a new connection's bytes, and only those. */
        CHECK(pthread_create(&t, NULL, halfclose_server, &lfd) == 0);
        hfd = dial(&r.service);
        CHECK(write(hfd, "ping", 4) == 4 && shutdown(hfd, SHUT_WR) == 0);
        CHECK(read_all(hfd, got, sizeof got - 1) == 8);
        CHECK_STREQ(got, "got:ping");
        CHECK(pthread_join(t, NULL) == 0);
        close(hfd);
        close(lfd);
        st = rig_stop(&r);
        CHECK(st.accepted == MANY + 1 && st.active == 0);
        CHECK(st.resets == 0 && st.accept_errors == 0 && st.connect_errors == 0);
        CHECK(fwd_pipes_spare(pool) == 64);
        pool = fwd_pipes_free(pool);
        CHECK(count_fds() == before);
}

/* ---- bad input ---- */

static void test_bad_params(void) {
        struct ev_loop *l = ev_loop_new();
        struct fwd_tcp *f = NULL;
        struct fwd_addr none = {0}, lo = loopback(4, 0);
        const struct fwd_tcp_params bad = {.backlog = -1};
        struct rig r = {0};

        CHECK(fwd_tcp_new(l, &lo, &bad, rig_pick, &r, &f) == -EINVAL);
        CHECK(fwd_tcp_new(l, &lo, &defaults, NULL, &r, &f) == -EINVAL);
        CHECK(fwd_tcp_new(l, &none, &defaults, rig_pick, &r, &f) == -EAFNOSUPPORT);
        CHECK(!f);
        CHECK(fwd_tcp_free(NULL) == NULL);
        ev_loop_free(l);
}

int main(void) {
        /* A write to a reset peer must be an error, not a signal. */
        signal(SIGPIPE, SIG_IGN);
        /* A forwarder that loses a FIN or a connection leaves a test
         * waiting for ever: that is a failure too (SIGALRM ends the run). */
        alarm(120);
        TEST_RUN(test_bulk_both_ways);
        TEST_RUN(test_half_close_ipv4);
        TEST_RUN(test_half_close_ipv6);
        TEST_RUN(test_refused_endpoint_retried);
        TEST_RUN(test_all_refused_resets_client);
        TEST_RUN(test_close_listener_takes_the_queue);
        TEST_RUN(test_refuse_syns_finishes_handshakes);
        TEST_RUN(test_connect_timeout_retried);
        TEST_RUN(test_idle_timeout);
        TEST_RUN(test_many_concurrent);
        TEST_RUN(test_bad_params);
        TEST_DONE();
}
