/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The UDP forwarder (userspace/fwd-udp.c) over loopback with real
 * sockets, its loop in a thread of its own (paused, by stopping and
 * joining it, where the test calls into the forwarder):
 *
 *  - replies come from the service address (with a wildcard binding, the
 *    address the client wrote to); one session per client,
 *    each with its own source port toward the endpoint, kept across
 *    datagrams;
 *  - an idle session ends after the timeout (the client's next datagram
 *    makes a new one), a busy one does not;
 *  - a session keeps its endpoint when the endpoint list changes, until
 *    fwd_udp_drop_endpoint() ends it; then the next datagram follows the
 *    new endpoint;
 *  - an endpoint that answers port unreachable ends its session, and the
 *    client's next datagram picks again;
 *  - a restart's two halves: a forwarder adopting the service socket gets
 *    the new datagrams, the old one still relays its session's replies;
 *  - a session whose datagram has had no reply yet awaits one, counted
 *    from a given time on; answered, it no longer does;
 *  - after each test: fds back to where they were.
 */
#include "userspace/fwd-addr.h"
#include "userspace/fwd-udp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ev/ev.h"
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

static int udp_bound(struct fwd_addr *ret) {
        struct fwd_addr a = {0};
        struct sockaddr_storage ss;
        socklen_t len;
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

        CHECK(inet_addr_parse("127.0.0.1", &a.ip) == 0);
        CHECK(fd >= 0);
        CHECK(fwd_addr_to_sockaddr(&a, &ss, &len) == 0);
        CHECK(bind(fd, (struct sockaddr *) &ss, len) == 0);
        len = sizeof ss;
        CHECK(getsockname(fd, (struct sockaddr *) &ss, &len) == 0);
        CHECK(fwd_addr_from_sockaddr((struct sockaddr *) &ss, len, ret) == 0);
        return fd;
}

/* ---- endpoints: each answers "NAME <source port it saw>" ---- */

struct echo {
        int fd;
        const char *name;
        pthread_t thread;
};

static void *echo_run(void *p) {
        struct echo *e = p;
        char buf[256], out[320];

        for (;;) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof ss;
                struct fwd_addr from;
                ssize_t n = recvfrom(e->fd, buf, sizeof buf - 1, 0, (struct sockaddr *) &ss, &len);
                if (n <= 0 || fwd_addr_from_sockaddr((struct sockaddr *) &ss, len, &from) < 0)
                        return NULL;
                buf[n] = '\0';
                if (strcmp(buf, "quit") == 0)
                        return NULL;
                int k = snprintf(out, sizeof out, "%s %u", e->name, (unsigned) from.port);
                (void) sendto(e->fd, out, (size_t) k, 0, (struct sockaddr *) &ss, len);
        }
}

static void echo_start(struct echo *e, const char *name, struct fwd_addr *ret) {
        e->name = name;
        e->fd = udp_bound(ret);
        CHECK(pthread_create(&e->thread, NULL, echo_run, e) == 0);
}

static void echo_stop(struct echo *e, const struct fwd_addr *at) {
        struct sockaddr_storage ss;
        socklen_t len;
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

        CHECK(fwd_addr_to_sockaddr(at, &ss, &len) == 0);
        CHECK(sendto(fd, "quit", 4, 0, (struct sockaddr *) &ss, len) == 4);
        close(fd);
        CHECK(pthread_join(e->thread, NULL) == 0);
        close(e->fd);
}

/* ---- the forwarder in a thread ---- */

struct rig {
        struct ev_loop *loop;
        struct fwd_udp *fwd;
        struct fwd_addr service;
        struct fwd_addr eps[4];
        size_t n_eps;           /* changed only while the loop is paused */
        unsigned picks;
        int stop[2];
        pthread_t thread;
};

/* Round robin over the endpoints. */
static int rig_pick(void *userdata, const struct fwd_addr *client, struct fwd_addr *ret) {
        struct rig *r = userdata;
        (void) client;

        if (r->n_eps == 0)
                return -ENOENT;
        *ret = r->eps[r->picks++ % r->n_eps];
        return 0;
}

static void rig_stop_io(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        char c;
        (void) events;
        (void) userdata;
        CHECK(read(fd, &c, 1) == 1);
        ev_stop(l);
}

static void *rig_run(void *p) {
        struct rig *r = p;
        CHECK(ev_run(r->loop) == 0);
        return NULL;
}

static void rig_resume(struct rig *r) {
        CHECK(pthread_create(&r->thread, NULL, rig_run, r) == 0);
}

static void rig_pause(struct rig *r) {
        CHECK(write(r->stop[1], "x", 1) == 1);
        CHECK(pthread_join(r->thread, NULL) == 0);
}

static void rig_start_at(struct rig *r, uint64_t idle_ms, const char *ip) {
        const struct fwd_udp_params params = {.idle_timeout_ms = idle_ms};
        struct fwd_addr any = {0};

        CHECK(inet_addr_parse(ip, &any.ip) == 0);
        r->loop = ev_loop_new();
        CHECK(r->loop);
        CHECK(pipe2(r->stop, O_CLOEXEC) == 0);
        CHECK(ev_io_add(r->loop, r->stop[0], EPOLLIN, rig_stop_io, r) == 0);
        CHECK(fwd_udp_new(r->loop, &any, &params, rig_pick, r, &r->fwd) == 0);
        fwd_udp_local(r->fwd, &r->service);
        rig_resume(r);
}

static void rig_start(struct rig *r, uint64_t idle_ms) {
        rig_start_at(r, idle_ms, "127.0.0.1");
}

static struct fwd_udp_stats rig_stop(struct rig *r) {
        struct fwd_udp_stats st;

        rig_pause(r);
        fwd_udp_get_stats(r->fwd, &st);
        r->fwd = fwd_udp_free(r->fwd);
        ev_io_del(r->loop, r->stop[0]);
        close(r->stop[0]);
        close(r->stop[1]);
        r->loop = ev_loop_free(r->loop);
        return st;
}

/* ---- clients ---- */

static int client_new(void) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        CHECK(fd >= 0);
        return fd;
}

/* Sends msg to the service and waits up to wait_ms for an answer: its
 * text into out, its source into ret_from. Returns the answer's length,
 * or -1 when none came. */
static ssize_t ask(int fd, const struct fwd_addr *service, const char *msg, int wait_ms, char *out, size_t cap,
                   struct fwd_addr *ret_from) {
        struct sockaddr_storage ss;
        socklen_t len;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t n;

        CHECK(fwd_addr_to_sockaddr(service, &ss, &len) == 0);
        CHECK(sendto(fd, msg, strlen(msg), 0, (struct sockaddr *) &ss, len) == (ssize_t) strlen(msg));
        if (poll(&pfd, 1, wait_ms) != 1)
                return -1;
        len = sizeof ss;
        n = recvfrom(fd, out, cap - 1, 0, (struct sockaddr *) &ss, &len);
        if (n < 0)
                return -1;
        out[n] = '\0';
        CHECK(fwd_addr_from_sockaddr((struct sockaddr *) &ss, len, ret_from) == 0);
        return n;
}

static struct fwd_addr lo_port(unsigned port) {
        struct fwd_addr a = {.port = (uint16_t) port};
        CHECK(inet_addr_parse("127.0.0.1", &a.ip) == 0);
        return a;
}

/* The source port the endpoint saw, from its answer "NAME PORT". */
static unsigned seen_port(const char *answer) {
        const char *sp = strchr(answer, ' ');
        return sp ? (unsigned) atoi(sp + 1) : 0;
}

static void test_sessions_and_reply_source(void) {
        int before = count_fds();
        struct rig r = {0};
        struct echo a;
        struct fwd_udp_stats st;
        struct fwd_addr from;
        char ans[3][64];
        int c1, c2;

        echo_start(&a, "A", &r.eps[0]);
        r.n_eps = 1;
        rig_start(&r, 60000);
        c1 = client_new();
        c2 = client_new();
        CHECK(ask(c1, &r.service, "one", 5000, ans[0], sizeof ans[0], &from) > 0);
        CHECK(fwd_addr_equal(&from, &r.service));
        CHECK(ask(c1, &r.service, "two", 5000, ans[1], sizeof ans[1], &from) > 0);
        CHECK(fwd_addr_equal(&from, &r.service));
        CHECK(ask(c2, &r.service, "three", 5000, ans[2], sizeof ans[2], &from) > 0);
        CHECK(fwd_addr_equal(&from, &r.service));
        CHECK(strncmp(ans[0], "A ", 2) == 0);
        /* One session per client: the same port for c1 twice, another for c2. */
        CHECK(seen_port(ans[0]) != 0 && seen_port(ans[0]) == seen_port(ans[1]));
        CHECK(seen_port(ans[2]) != 0 && seen_port(ans[2]) != seen_port(ans[0]));
        close(c1);
        close(c2);
        st = rig_stop(&r);
        CHECK(st.sessions == 2 && st.active == 2);
        CHECK(st.to_endpoints == 3 && st.to_clients == 3 && st.dropped == 0);
        CHECK(st.bytes_to_endpoints == strlen("one") + strlen("two") + strlen("three"));
        echo_stop(&a, &r.eps[0]);
        CHECK(count_fds() == before);
}

/* Bound to the wildcard address (a node port on every address): each
 * client hears from the address it wrote to, not the one routing picks. */
static void test_wildcard_replies_from_the_address_written_to(void) {
        int before = count_fds();
        struct rig r = {0};
        struct echo a;
        struct fwd_udp_stats st;
        struct fwd_addr from, to1, to2;
        char ans[64];
        int c1, c2;

        echo_start(&a, "A", &r.eps[0]);
        r.n_eps = 1;
        rig_start_at(&r, 60000, "0.0.0.0");
        to1 = lo_port(r.service.port);
        to2 = to1;
        CHECK(inet_addr_parse("127.0.0.2", &to2.ip) == 0);
        c1 = client_new();
        c2 = client_new();
        CHECK(ask(c1, &to2, "one", 5000, ans, sizeof ans, &from) > 0);
        CHECK(fwd_addr_equal(&from, &to2));
        CHECK(ask(c2, &to1, "two", 5000, ans, sizeof ans, &from) > 0);
        CHECK(fwd_addr_equal(&from, &to1));
        CHECK(ask(c1, &to2, "three", 5000, ans, sizeof ans, &from) > 0);
        CHECK(fwd_addr_equal(&from, &to2));
        close(c1);
        close(c2);
        st = rig_stop(&r);
        CHECK(st.sessions == 2 && st.to_clients == 3);
        echo_stop(&a, &r.eps[0]);
        CHECK(count_fds() == before);
}

static void test_idle_timeout(void) {
        int before = count_fds();
        struct rig r = {0};
        struct echo a;
        struct fwd_udp_stats st;
        struct fwd_addr from;
        char first[64], later[64], busy0[64], busy[64];
        int quiet, chatty, same = 0, rounds = 0;
        uint64_t start;

        echo_start(&a, "A", &r.eps[0]);
        r.n_eps = 1;
        rig_start(&r, 300);
        quiet = client_new();
        chatty = client_new();
        CHECK(ask(quiet, &r.service, "q", 5000, first, sizeof first, &from) > 0);
        CHECK(ask(chatty, &r.service, "c", 5000, busy0, sizeof busy0, &from) > 0);
        /* Three timeouts' worth of a datagram every 100 ms. */
        start = now_ms();
        while (now_ms() - start < 900) {
                if (ask(chatty, &r.service, "c", 5000, busy, sizeof busy, &from) > 0 &&
                    seen_port(busy) == seen_port(busy0))
                        same++;
                rounds++;
                (void) poll(NULL, 0, 100);
        }
        CHECK(rounds >= 3 && same == rounds);
        /* The quiet client's session is gone: a new one, a new port. */
        CHECK(ask(quiet, &r.service, "q", 5000, later, sizeof later, &from) > 0);
        CHECK(seen_port(later) != 0 && seen_port(later) != seen_port(first));
        close(quiet);
        close(chatty);
        st = rig_stop(&r);
        CHECK(st.idle_timeouts == 1 && st.sessions == 3 && st.active == 2);
        echo_stop(&a, &r.eps[0]);
        CHECK(count_fds() == before);
}

static void test_drop_endpoint_follows_replacement(void) {
        int before = count_fds();
        struct rig r = {0};
        struct echo a, b;
        struct fwd_udp_stats st;
        struct fwd_addr from, a_at;
        char ans[64];
        int c;

        echo_start(&a, "A", &r.eps[0]);
        a_at = r.eps[0];
        r.n_eps = 1;
        rig_start(&r, 60000);
        c = client_new();
        CHECK(ask(c, &r.service, "x", 5000, ans, sizeof ans, &from) > 0);
        CHECK(strncmp(ans, "A ", 2) == 0);
        /* A replaced by B: the open session stays with A... */
        rig_pause(&r);
        echo_start(&b, "B", &r.eps[0]);
        rig_resume(&r);
        CHECK(ask(c, &r.service, "x", 5000, ans, sizeof ans, &from) > 0);
        CHECK(strncmp(ans, "A ", 2) == 0);
        /* ...until A is gone from the cluster: then the next datagram
         * goes to B. */
        rig_pause(&r);
        CHECK(fwd_udp_drop_endpoint(r.fwd, &a_at) == 1);
        CHECK(fwd_udp_drop_endpoint(r.fwd, &a_at) == 0);
        rig_resume(&r);
        CHECK(ask(c, &r.service, "x", 5000, ans, sizeof ans, &from) > 0);
        CHECK(strncmp(ans, "B ", 2) == 0);
        close(c);
        st = rig_stop(&r);
        CHECK(st.sessions == 2 && st.active == 1);
        echo_stop(&a, &a_at);
        echo_stop(&b, &r.eps[0]);
        CHECK(count_fds() == before);
}

static void test_refused_endpoint_picks_again(void) {
        int before = count_fds();
        struct rig r = {0};
        struct echo b;
        struct fwd_udp_stats st;
        struct fwd_addr from;
        char ans[64];
        int dead = udp_bound(&r.eps[0]), c, tries = 0;
        ssize_t n = -1;

        /* Closed: datagrams to it are answered with port unreachable. */
        close(dead);
        echo_start(&b, "B", &r.eps[1]);
        r.n_eps = 2;
        rig_start(&r, 60000);
        c = client_new();
        /* The first session goes to the dead port; once its refusal ends
         * it, the next datagram picks again (round robin: B). */
        while (n < 0 && tries++ < 50)
                n = ask(c, &r.service, "x", 100, ans, sizeof ans, &from);
        CHECK(n > 0 && strncmp(ans, "B ", 2) == 0);
        close(c);
        st = rig_stop(&r);
        CHECK(st.refused >= 1 && st.sessions >= 2 && st.active == 1);
        echo_stop(&b, &r.eps[1]);
        CHECK(count_fds() == before);
}

/* Both sides of a restart on one loop: the new forwarder adopts a copy of
 * the service socket (as SCM_RIGHTS gives it), the old one stops reading.
 * New datagrams reach the new forwarder; the old session still sends its
 * endpoint's late replies to the client, from the service address. */
static void test_handover_halves(void) {
        int before = count_fds();
        struct rig r = {0}, r2 = {0};
        struct echo a, b;
        struct fwd_udp *young = NULL;
        const struct fwd_udp_params params = {.idle_timeout_ms = 60000};
        struct fwd_udp_stats st;
        struct fwd_addr from, a_at, session;
        struct sockaddr_storage ss;
        socklen_t len;
        struct pollfd pfd;
        char ans[64];
        int c, copy, n;

        echo_start(&a, "A", &r.eps[0]);
        a_at = r.eps[0];
        r.n_eps = 1;
        rig_start(&r, 60000);
        c = client_new();
        CHECK(ask(c, &r.service, "x", 5000, ans, sizeof ans, &from) > 0);
        CHECK(strncmp(ans, "A ", 2) == 0);
        session = lo_port(seen_port(ans));

        rig_pause(&r);
        echo_start(&b, "B", &r2.eps[0]);
        r2.n_eps = 1;
        copy = dup(fwd_udp_socket(r.fwd));
        CHECK(fwd_udp_adopt(r.loop, copy, &params, rig_pick, &r2, &young) == 0);
        fwd_udp_stop_reading(r.fwd);
        rig_resume(&r);

        CHECK(ask(c, &r.service, "y", 5000, ans, sizeof ans, &from) > 0);
        CHECK(strncmp(ans, "B ", 2) == 0 && fwd_addr_equal(&from, &r.service));
        /* A's late reply to the old session, as A would send it. */
        CHECK(fwd_addr_to_sockaddr(&session, &ss, &len) == 0);
        CHECK(sendto(a.fd, "late", 4, 0, (struct sockaddr *) &ss, len) == 4);
        pfd = (struct pollfd) {.fd = c, .events = POLLIN};
        CHECK(poll(&pfd, 1, 5000) == 1);
        len = sizeof ss;
        n = (int) recvfrom(c, ans, sizeof ans - 1, 0, (struct sockaddr *) &ss, &len);
        CHECK(n == 4 && memcmp(ans, "late", 4) == 0);
        CHECK(fwd_addr_from_sockaddr((struct sockaddr *) &ss, len, &from) == 0 && fwd_addr_equal(&from, &r.service));
        close(c);

        rig_pause(&r);
        fwd_udp_get_stats(young, &st);
        CHECK(st.sessions == 1 && st.to_endpoints == 1 && st.to_clients == 1);
        young = fwd_udp_free(young);
        rig_resume(&r);
        st = rig_stop(&r);
        CHECK(st.sessions == 1 && st.to_endpoints == 1 && st.to_clients == 2);
        CHECK(fwd_udp_adopt(NULL, 0, &params, rig_pick, &r2, &young) == -EINVAL);
        echo_stop(&a, &a_at);
        echo_stop(&b, &r2.eps[0]);
        CHECK(count_fds() == before);
}

static void test_awaiting_reply(void) {
        int before = count_fds();
        struct rig r = {0};
        struct fwd_addr quiet_at, from, session;
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        const struct timeval tv = {.tv_sec = 5};
        char buf[64];
        uint64_t now;
        int quiet = udp_bound(&quiet_at), c;

        /* An endpoint that answers only when the test says so. */
        CHECK(setsockopt(quiet, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
        r.eps[0] = quiet_at;
        r.n_eps = 1;
        rig_start(&r, 60000);
        c = client_new();
        /* The loop's clock (CLOCK_MONOTONIC, ms) before the datagram: the
         * loop reads it after waking for the datagram, so the pass is
         * stamped no earlier. (Its clock once the test has paused it can
         * be a later millisecond: pausing wakes it.) */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t sent = (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
        CHECK(ask(c, &r.service, "q", 0, buf, sizeof buf, &from) < 0);
        CHECK(recvfrom(quiet, buf, sizeof buf, 0, (struct sockaddr *) &ss, &len) == 1);
        CHECK(fwd_addr_from_sockaddr((struct sockaddr *) &ss, len, &session) == 0);

        rig_pause(&r);
        now = ev_now_ms(r.loop);
        CHECK(fwd_udp_awaiting(r.fwd, 0) == 1);
        CHECK(fwd_udp_awaiting(r.fwd, sent) == 1);
        CHECK(fwd_udp_awaiting(r.fwd, now + 1) == 0);   /* passed on before that */
        rig_resume(&r);

        CHECK(sendto(quiet, "A 1", 3, 0, (struct sockaddr *) &ss, len) == 3);
        struct pollfd pfd = {.fd = c, .events = POLLIN};
        CHECK(poll(&pfd, 1, 5000) == 1);
        CHECK(recv(c, buf, sizeof buf, 0) == 3);
        rig_pause(&r);
        CHECK(fwd_udp_awaiting(r.fwd, 0) == 0);
        rig_resume(&r);

        close(c);
        rig_stop(&r);
        close(quiet);
        CHECK(count_fds() == before);
}

static void test_bad_params(void) {
        struct ev_loop *l = ev_loop_new();
        struct fwd_udp *f = NULL;
        struct fwd_addr lo = {0};
        const struct fwd_udp_params none = {0}, ok = {.idle_timeout_ms = 1000};
        struct rig r = {0};

        CHECK(inet_addr_parse("127.0.0.1", &lo.ip) == 0);
        CHECK(fwd_udp_new(l, &lo, &none, rig_pick, &r, &f) == -EINVAL);
        CHECK(fwd_udp_new(l, &lo, &ok, NULL, &r, &f) == -EINVAL);
        lo.ip.family = 0;
        CHECK(fwd_udp_new(l, &lo, &ok, rig_pick, &r, &f) == -EAFNOSUPPORT);
        CHECK(!f);
        CHECK(fwd_udp_free(NULL) == NULL);
        ev_loop_free(l);
}

int main(void) {
        alarm(120);     /* a lost datagram path hangs a test: a failure */
        TEST_RUN(test_sessions_and_reply_source);
        TEST_RUN(test_wildcard_replies_from_the_address_written_to);
        TEST_RUN(test_idle_timeout);
        TEST_RUN(test_drop_endpoint_follows_replacement);
        TEST_RUN(test_refused_endpoint_picks_again);
        TEST_RUN(test_handover_halves);
        TEST_RUN(test_awaiting_reply);
        TEST_RUN(test_bad_params);
        TEST_DONE();
}
