/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The connection book (http/mhd-conns.c) on its own, with a clock passed by
 * hand; then an http/mhd.c server with small limits on a real loop over
 * loopback, against clients that hold connections: a burst past the limit
 * that then closes (which once left the server deaf for good), idle floods
 * from one client and from many, slow headers, a kept-alive connection
 * that stays idle, a slow request body, and running out of file
 * descriptors. Clients are forked children with blocking sockets; the
 * parent runs the loop, and waits for states (a marker from the child, the
 * server's count of connections), never for time.
 */
#include "http/mhd-conns.h"
#include "http/mhd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ev/ev.h"
#include "http-client.h"
#include "test.h"
#include "util/buf.h"
#include "util/inet.h"

/* ---- the book ---- */

static struct sockaddr_storage sa(const char *ip) {
        struct sockaddr_storage ss = {0};

        if (strchr(ip, ':')) {
                struct sockaddr_in6 *s6 = (struct sockaddr_in6 *) &ss;
                s6->sin6_family = AF_INET6;
                CHECK(inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1);
        } else {
                struct sockaddr_in *s4 = (struct sockaddr_in *) &ss;
                s4->sin_family = AF_INET;
                CHECK(inet_pton(AF_INET, ip, &s4->sin_addr) == 1);
        }
        return ss;
}

static struct mhd_conn *add(struct mhd_conns *set, int fd, const char *ip, uint64_t now) {
        struct sockaddr_storage ss = sa(ip);
        struct mhd_conn *c = mhd_conns_add(set, fd, (struct sockaddr *) &ss, now);

        CHECK(c && mhd_conn_fd(c) == fd);
        return c;
}

static struct mhd_conn *victim(const struct mhd_conns *set, const char *ip) {
        struct sockaddr_storage ss = sa(ip);
        return mhd_conns_victim(set, (struct sockaddr *) &ss);
}

static void test_book_limits(void) {
        struct mhd_conns *set = mhd_conns_new(3, 2, 100);
        struct mhd_conn *a0, *a1, *b0, *c0, *c1;

        CHECK(!victim(set, "10.0.0.1"));
        a0 = add(set, 10, "10.0.0.1", 0);
        a1 = add(set, 11, "::ffff:10.0.0.1", 1);       /* the same client, through a dual-stack socket */
        CHECK(mhd_conns_held(set) == 2);
        CHECK(victim(set, "10.0.0.1") == a0);           /* its share is full: its longest waiting */
        CHECK(victim(set, "::ffff:10.0.0.1") == a0);
        mhd_conns_busy(a0, 5);
        CHECK(victim(set, "10.0.0.1") == a1);           /* idle before busy */
        CHECK(!victim(set, "10.0.0.2"));                /* another client, and the server has room */
        b0 = add(set, 12, "10.0.0.2", 2);
        CHECK(mhd_conns_held(set) == 3);
        CHECK(victim(set, "2001:db8::1") == a1);        /* the server is full: the longest waiting idle one */
        mhd_conns_closing(a1);
        CHECK(mhd_conns_held(set) == 2);                /* closing holds no slot */
        mhd_conns_idle(a1, 50);                         /* and stays closing */
        mhd_conns_busy(a1, 50);
        CHECK(mhd_conns_held(set) == 2);
        CHECK(!victim(set, "2001:db8::1"));
        c0 = add(set, 13, "2001:db8::1", 3);
        /* An IPv6 client is its /64. */
        CHECK(victim(set, "2001:db8::2") == b0);        /* c's share has room; the server's longest idle */
        mhd_conns_busy(b0, 6);
        mhd_conns_busy(c0, 7);
        CHECK(victim(set, "2001:db8:0:1::1") == a0);    /* everyone busy: the longest busy (a0, since 5) */
        mhd_conns_remove(a1);
        mhd_conns_remove(a0);
        CHECK(mhd_conns_held(set) == 2);
        CHECK(!victim(set, "2001:db8::2"));             /* c holds one of two */
        c1 = add(set, 14, "2001:db8::ffff", 8);
        CHECK(victim(set, "2001:db8::3") == c1);        /* now two: c's own, the idle one before c0 */
        mhd_conns_busy(c1, 9);
        CHECK(victim(set, "2001:db8::3") == c0);        /* both busy: c's longest */
        CHECK(!mhd_conns_free(set));                    /* with records still in it */
}

static void test_book_deadlines(void) {
        struct mhd_conns *set = mhd_conns_new(4, 0, 100);
        struct mhd_conn *x, *y;
        uint64_t due = 0;

        CHECK(!mhd_conns_deadline(set, &due));
        CHECK(!mhd_conns_expired(set, UINT64_MAX));
        CHECK(!mhd_conns_oldest(set));
        x = add(set, 20, "192.0.2.1", 1000);
        y = add(set, 21, "192.0.2.1", 1010);
        CHECK(mhd_conns_deadline(set, &due) && due == 1100);
        CHECK(mhd_conns_oldest(set) == x);
        CHECK(!mhd_conns_expired(set, 1099));
        CHECK(mhd_conns_expired(set, 1100) == x);
        mhd_conns_busy(x, 1050);                        /* a request: no longer waiting */
        CHECK(mhd_conns_deadline(set, &due) && due == 1110);
        CHECK(!mhd_conns_expired(set, 1100));
        mhd_conns_idle(x, 1080);                        /* answered: waits again, from now */
        CHECK(mhd_conns_oldest(set) == y);
        mhd_conns_closing(y);
        CHECK(mhd_conns_deadline(set, &due) && due == 1180);
        CHECK(mhd_conns_expired(set, 5000) == x);
        /* per_client 0: the whole server's share. */
        add(set, 22, "192.0.2.1", 1100);
        add(set, 23, "192.0.2.1", 1101);
        CHECK(!victim(set, "192.0.2.1"));
        add(set, 24, "192.0.2.1", 1102);
        CHECK(victim(set, "192.0.2.1") == x);
        mhd_conns_remove(y);
        mhd_conns_free(set);
        CHECK(!mhd_conns_free(NULL));
}

/* ---- a server on the loop ---- */

struct fixture {
        struct ev_loop *l;
        struct mhd_server *s;
        unsigned served;
        int port;
};

static void handle(void *userdata, const struct mhd_request *req, struct mhd_reply *reply) {
        unsigned *served = userdata;

        (void) req;
        (*served)++;
        reply->content_type = "text/plain";
        buf_puts(&reply->body, "ok\n");
}

static void fixture_init(struct fixture *f, unsigned connections, unsigned per_client, uint64_t wait_ms) {
        struct mhd_limits limits = {connections, per_client, wait_ms};
        struct inet_addr a;

        *f = (struct fixture) {.l = ev_loop_new()};
        CHECK(f->l && inet_addr_parse("127.0.0.1", &a) == 0);
        CHECK(mhd_server_new(f->l, "test server", &a, 0, &limits, 0, handle, &f->served, &f->s) == 0);
        f->port = mhd_server_port(f->s);
        CHECK(f->port > 0);
}

static void fixture_done(struct fixture *f) {
        mhd_server_free(f->s);
        ev_loop_free(f->l);
}

/* A child that talks to the server while the parent runs the loop. It
 * writes what it found to out and may wait for a byte on go. */
struct child {
        pid_t pid;
        int out, go;
        struct buf data;
        bool eof;
};

typedef void (*child_fn)(int port, int out, int go);

static void child_on_pipe(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct child *c = userdata;
        char tmp[4096];
        ssize_t n;

        (void) l;
        (void) events;
        while ((n = read(fd, tmp, sizeof tmp)) > 0 || (n < 0 && errno == EINTR))
                if (n > 0)
                        buf_put(&c->data, tmp, (size_t) n);
        if (n == 0 || (n < 0 && errno != EAGAIN))
                c->eof = true;
}

static void child_start(struct fixture *f, struct child *c, child_fn fn) {
        int out[2], go[2];

        *c = (struct child) {.data = BUF_INIT};
        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0)
                abort();
        c->pid = fork();
        if (c->pid < 0)
                abort();
        if (c->pid == 0) {
                close(out[0]);
                close(go[1]);
                fn(f->port, out[1], go[0]);
                _exit(0);
        }
        close(out[1]);
        close(go[0]);
        c->out = out[0];
        c->go = go[1];
        fcntl(c->out, F_SETFL, O_NONBLOCK);
        CHECK(ev_io_add(f->l, c->out, EPOLLIN, child_on_pipe, c) == 0);
}

/* Runs the loop until pred(arg) holds, checked once per iteration. */
struct until {
        bool (*pred)(const void *arg);
        const void *arg;
        bool timed_out;
};

static void until_check(struct ev_loop *l, void *userdata) {
        struct until *u = userdata;

        if (u->pred(u->arg))
                ev_stop(l);
}

static void until_guard(struct ev_loop *l, void *userdata) {
        struct until *u = userdata;

        u->timed_out = true;
        ev_stop(l);
}

static bool run_until(struct ev_loop *l, bool (*pred)(const void *arg), const void *arg) {
        struct until u = {pred, arg, false};
        struct ev_timer *guard = ev_timer_add(l, GUARD_MS, until_guard, &u);

        ev_set_before_sleep(l, until_check, &u);
        ev_run(l);
        ev_set_before_sleep(l, NULL, NULL);
        if (!u.timed_out)
                ev_timer_cancel(l, guard);
        return !u.timed_out;
}

static bool child_done(const void *arg) {
        return ((const struct child *) arg)->eof;
}

static bool server_empty(const void *arg) {
        return mhd_server_connections(arg) == 0;
}

/* Waits for the child to end; returns its output (owned). The server must
 * then let go of every connection the child had. */
static char *child_finish(struct fixture *f, struct child *c) {
        int status = 0;

        CHECK(run_until(f->l, child_done, c));
        ev_io_del(f->l, c->out);
        close(c->out);
        close(c->go);
        if (!c->eof)
                kill(c->pid, SIGKILL);
        waitpid(c->pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        CHECK(run_until(f->l, server_empty, f->s));
        return buf_steal(&c->data);
}

/* In a child: a connection from src (127.0.0.x) to the server. */
static int connect_from(const char *src, int port) {
        struct sockaddr_in from = {.sin_family = AF_INET}, to = {.sin_family = AF_INET};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        inet_pton(AF_INET, src, &from.sin_addr);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        to.sin_port = htons((uint16_t) port);
        if (fd < 0 || bind(fd, (struct sockaddr *) &from, sizeof from) < 0 ||
            connect(fd, (struct sockaddr *) &to, sizeof to) < 0)
                _exit(1);
        return fd;
}

static const char *const GET_CLOSE = "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

/* One request on a fresh connection from src; its answer goes to out. */
static void probe(const char *src, int port, int out) {
        int fd = connect_from(src, port);

        send_text(fd, GET_CLOSE);
        copy_to_eof(fd, out);
        close(fd);
}

/* Whether the server has closed fd: a read that does not wait sees EOF or
 * a reset (or pending data, which counts as open). */
static bool closed_by_server(int fd) {
        char c;
        ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);

        return n == 0 || (n < 0 && errno != EAGAIN);
}

static size_t count(const char *s, const char *needle) {
        size_t n = 0;
        for (; s && (s = strstr(s, needle)); s++)
                n++;
        return n;
}

/* 12 connections past a limit of 4, each with a kept-alive request; the
 * first four answers (or closes) read; then all closed at once. With
 * libmicrohttpd's own listen socket this left the server deaf: at its
 * limit MHD had taken the socket out of its epoll set, and nothing ran it
 * again once the connections were gone. */
static void script_burst(int port, int out, int go) {
        int fds[12];
        char c;

        (void) go;
        for (size_t i = 0; i < 12; i++) {
                fds[i] = connect_from("127.0.0.1", port);
                send_text(fds[i], "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        }
        for (size_t i = 0; i < 4; i++)
                if (read(fds[i], &c, 1) < 0)
                        _exit(1);
        for (size_t i = 0; i < 12; i++)
                close(fds[i]);
        probe("127.0.0.1", port, out);
}

static void test_burst_past_the_limit(void) {
        struct fixture f;
        struct child c;
        char *out;

        fixture_init(&f, 4, 4, 10000);
        for (int round = 0; round < 3; round++) {
                child_start(&f, &c, script_burst);
                out = child_finish(&f, &c);
                CHECK(out && strstr(out, "HTTP/1.1 200 OK\r\n") && strstr(out, "\r\n\r\nok\n"));
                free(out);
        }
        fixture_done(&f);
}

/* 10 idle connections from one client, whose share is 2: each new one
 * closes its longest waiting; a probe from the same client closes one more
 * and is answered, then one from another client (no room needed). */
static void script_flood_one(int port, int out, int go) {
        int fds[10];
        size_t closed = 0;

        (void) go;
        for (size_t i = 0; i < 10; i++)
                fds[i] = connect_from("127.0.0.1", port);
        probe("127.0.0.1", port, out);
        probe("127.0.0.2", port, out);
        /* The answers came after the server had let go of the others. */
        for (size_t i = 0; i < 10; i++)
                closed += closed_by_server(fds[i]);
        dprintf(out, "\nclosed %zu, last open %d\n", closed, !closed_by_server(fds[9]));
}

static void test_idle_flood_one_client(void) {
        struct fixture f;
        struct child c;
        char *out;

        fixture_init(&f, 8, 2, 10000);
        child_start(&f, &c, script_flood_one);
        out = child_finish(&f, &c);
        CHECK(count(out, "HTTP/1.1 200 OK\r\n") == 2);
        CHECK(out && strstr(out, "\nclosed 9, last open 1\n"));
        CHECK(f.served == 2);
        free(out);
        fixture_done(&f);
}

/* 8 idle connections from 8 clients against a limit of 4: the server's
 * longest waiting makes room for each, and for a probe. */
static void script_flood_many(int port, int out, int go) {
        int fds[8];
        char src[32];
        size_t closed = 0;

        (void) go;
        for (size_t i = 0; i < 8; i++) {
                snprintf(src, sizeof src, "127.0.0.%zu", i + 2);
                fds[i] = connect_from(src, port);
        }
        probe("127.0.0.1", port, out);
        for (size_t i = 0; i < 5; i++)
                closed += closed_by_server(fds[i]);
        for (size_t i = 5; i < 8; i++)
                closed += 10 * closed_by_server(fds[i]);
        dprintf(out, "\nclosed %zu\n", closed);
}

static void test_idle_flood_many_clients(void) {
        struct fixture f;
        struct child c;
        char *out;

        fixture_init(&f, 4, 4, 10000);
        child_start(&f, &c, script_flood_many);
        out = child_finish(&f, &c);
        CHECK(count(out, "HTTP/1.1 200 OK\r\n") == 1);
        CHECK(out && strstr(out, "\nclosed 5\n"));       /* the five oldest, none of the rest */
        free(out);
        fixture_done(&f);
}

static uint64_t ms_now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

/* Until the server closes fd, sends line every period_ms (pacing, not
 * waiting for the server: a close ends it at once). Returns the ms taken. */
static uint64_t trickle_until_closed(int fd, const char *line, int period_ms) {
        uint64_t t0 = ms_now();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char tmp[512];

        for (;;) {
                int n = poll(&p, 1, period_ms);

                if (n < 0 && errno != EINTR)
                        _exit(1);
                if (n > 0) {
                        ssize_t r = read(fd, tmp, sizeof tmp);
                        if (r <= 0)
                                return ms_now() - t0;
                        continue;       /* an answer: not closed yet */
                }
                if (line && write(fd, line, strlen(line)) < 0)
                        return ms_now() - t0;
        }
}

/* With wait_ms 300: headers that trickle in are cut off after 300 ms; a
 * kept-alive connection idle after its answer closes 300 ms after it; a
 * request whose body takes longer than that is busy, and answered. */
static void script_slow(int port, int out, int go) {
        int slow = connect_from("127.0.0.1", port), idle, body;
        uint64_t t;

        (void) go;
        send_text(slow, "GET / HTTP/1.1\r\nHost: t\r\n");
        dprintf(out, "headers %llu\n", (unsigned long long) trickle_until_closed(slow, "X-Slow: 1\r\n", 50));

        idle = connect_from("127.0.0.1", port);
        send_text(idle, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        copy_one(idle, out);
        dprintf(out, "\nkept-alive %llu\n", (unsigned long long) trickle_until_closed(idle, NULL, 1000));

        body = connect_from("127.0.0.1", port);
        send_text(body, "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nConnection: close\r\n\r\n");
        t = ms_now();
        for (int i = 0; i < 5; i++) {
                struct pollfd p = {.fd = body, .events = POLLIN};

                if (poll(&p, 1, 100) != 0)      /* paced; the server must not speak yet */
                        _exit(1);
                send_text(body, "x");
        }
        copy_to_eof(body, out);
        dprintf(out, "\nbody %llu\n", (unsigned long long) (ms_now() - t));
}

static void test_slow_clients(void) {
        struct fixture f;
        struct child c;
        unsigned long long headers = 0, kept = 0, body = 0;
        char *out, *p;

        fixture_init(&f, 4, 4, 300);
        child_start(&f, &c, script_slow);
        out = child_finish(&f, &c);
        CHECK(out && sscanf(out, "headers %llu", &headers) == 1);
        CHECK(headers >= 250 && headers < 3000);
        CHECK(out && (p = strstr(out, "\nkept-alive ")) && sscanf(p, "\nkept-alive %llu", &kept) == 1);
        CHECK(kept >= 250 && kept < 3000);
        CHECK(out && (p = strstr(out, "\nbody ")) && sscanf(p, "\nbody %llu", &body) == 1);
        CHECK(body >= 500);
        CHECK(count(out, "HTTP/1.1 200 OK\r\n") == 2);   /* the kept-alive one and the slow body */
        CHECK(f.served == 2);
        free(out);
        fixture_done(&f);
}

/* One idle connection, then the process runs out of file descriptors:
 * the idle one makes room for a probe. Then with none to spare, accepting
 * pauses until descriptors are free again. */
static void script_out_of_fds(int port, int out, int go) {
        int idle = connect_from("127.0.0.1", port);
        char c;

        send_text(out, "idle\n");
        if (read(go, &c, 1) != 1)
                _exit(1);
        probe("127.0.0.1", port, out);
        dprintf(out, "\nidle closed %d\n", closed_by_server(idle));
}

static void script_probe(int port, int out, int go) {
        (void) go;
        probe("127.0.0.1", port, out);
}

struct held {
        const struct child *c;
        const struct mhd_server *s;
};

static bool child_idle_held(const void *arg) {
        const struct held *h = arg;
        return h->c->eof || (h->c->data.data && strstr(h->c->data.data, "idle\n") &&
                             mhd_server_connections(h->s) == 1);
}

/* Lowers the soft limit on open files to the lowest free descriptor: no
 * new one can be made until one below it is closed. */
static void exhaust_fds(struct rlimit *saved) {
        struct rlimit r;
        int lowest = dup(0);

        CHECK(lowest >= 0 && getrlimit(RLIMIT_NOFILE, saved) == 0);
        close(lowest);
        r = (struct rlimit) {(rlim_t) lowest, saved->rlim_max};
        CHECK(setrlimit(RLIMIT_NOFILE, &r) == 0);
}

static void restore_fds(struct ev_loop *l, void *userdata) {
        (void) l;
        CHECK(setrlimit(RLIMIT_NOFILE, userdata) == 0);
}

static void test_out_of_fds(void) {
        struct fixture f;
        struct child c;
        struct rlimit saved;
        struct held h = {&c, NULL};
        char *out;

        fixture_init(&f, 8, 8, 10000);
        h.s = f.s;
        child_start(&f, &c, script_out_of_fds);
        CHECK(run_until(f.l, child_idle_held, &h));
        exhaust_fds(&saved);
        CHECK(write(c.go, "g", 1) == 1);
        out = child_finish(&f, &c);
        CHECK(setrlimit(RLIMIT_NOFILE, &saved) == 0);
        CHECK(out && strstr(out, "HTTP/1.1 200 OK\r\n"));
        CHECK(out && strstr(out, "\nidle closed 1\n"));
        free(out);

        /* Nothing to let go of: accepting pauses, and resumes. */
        child_start(&f, &c, script_probe);
        exhaust_fds(&saved);
        CHECK(ev_timer_add(f.l, 300, restore_fds, &saved));
        out = child_finish(&f, &c);
        CHECK(out && strstr(out, "HTTP/1.1 200 OK\r\n"));
        free(out);
        fixture_done(&f);
}

int main(void) {
        signal(SIGPIPE, SIG_IGN);
        TEST_RUN(test_book_limits);
        TEST_RUN(test_book_deadlines);
        TEST_RUN(test_burst_past_the_limit);
        TEST_RUN(test_idle_flood_one_client);
        TEST_RUN(test_idle_flood_many_clients);
        TEST_RUN(test_slow_clients);
        TEST_RUN(test_out_of_fds);
        TEST_DONE();
}
