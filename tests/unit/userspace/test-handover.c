/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Restart by hand-over (userspace/handover.c with fwd-tcp's adopt and
 * stop): an "old" forwarder on its own loop thread serves a closed loop
 * of client connections; a "new" one takes the listening socket over the
 * unix socket and adopts it on a second loop; the old one stops accepting
 * but keeps its open connection. Shown: no client connection fails across
 * the hand-over, the new forwarder accepts after it, the old one's open
 * connection still carries data, the sockets describe themselves
 * (protocol, address), a non-socket and a closed predecessor are refused,
 * and fds end where they began. Both sides are threads of this process:
 * SCM_RIGHTS between processes is the same kernel path.
 */
#include "userspace/fwd-addr.h"
#include "userspace/fwd-tcp.h"
#include "userspace/handover.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
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

static struct fwd_addr lo(uint16_t port) {
        struct fwd_addr a = {.port = port};
        CHECK(inet_addr_parse("127.0.0.1", &a.ip) == 0);
        return a;
}

static int dial(const struct fwd_addr *a) {
        struct sockaddr_storage ss;
        socklen_t len;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        CHECK(fwd_addr_to_sockaddr(a, &ss, &len) == 0);
        if (connect(fd, (struct sockaddr *) &ss, len) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

/* ---- an echo endpoint: a thread per connection ---- */

struct echo {
        int lfd;
        struct fwd_addr at;
        int live;               /* connection threads running (atomic) */
        pthread_t thread;
};

struct echo_conn {
        struct echo *e;
        int fd;
};

static void *echo_conn(void *p) {
        struct echo_conn ec = *(struct echo_conn *) p;
        struct echo *e = ec.e;
        int fd = ec.fd;
        char buf[256];
        ssize_t n;

        free(p);
        while ((n = read(fd, buf, sizeof buf)) > 0)
                if (write(fd, buf, (size_t) n) != n)
                        break;
        close(fd);
        __atomic_sub_fetch(&e->live, 1, __ATOMIC_SEQ_CST);
        return NULL;
}

static void *echo_run(void *p) {
        struct echo *e = p;

        for (;;) {
                int fd = accept(e->lfd, NULL, NULL);
                struct echo_conn *arg;
                pthread_t t;
                if (fd < 0)
                        return NULL;    /* shut down */
                arg = malloc(sizeof *arg);
                CHECK(arg);
                *arg = (struct echo_conn) {e, fd};
                __atomic_add_fetch(&e->live, 1, __ATOMIC_SEQ_CST);
                CHECK(pthread_create(&t, NULL, echo_conn, arg) == 0);
                pthread_detach(t);
        }
}

static void echo_start(struct echo *e) {
        struct sockaddr_storage ss;
        socklen_t len;

        e->at = lo(0);
        e->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(fwd_addr_to_sockaddr(&e->at, &ss, &len) == 0);
        CHECK(bind(e->lfd, (struct sockaddr *) &ss, len) == 0 && listen(e->lfd, 512) == 0);
        len = sizeof ss;
        CHECK(getsockname(e->lfd, (struct sockaddr *) &ss, &len) == 0);
        CHECK(fwd_addr_from_sockaddr((struct sockaddr *) &ss, len, &e->at) == 0);
        CHECK(pthread_create(&e->thread, NULL, echo_run, e) == 0);
}

static void echo_stop(struct echo *e) {
        shutdown(e->lfd, SHUT_RDWR);
        CHECK(pthread_join(e->thread, NULL) == 0);
        close(e->lfd);
        /* Until the last connection's thread has closed its socket. */
        while (__atomic_load_n(&e->live, __ATOMIC_SEQ_CST) > 0)
                (void) poll(NULL, 0, 1);
}

/* ---- a forwarder on a loop thread ---- */

struct side {
        struct ev_loop *loop;
        struct fwd_tcp *fwd;
        struct fwd_addr ep;
        int stop[2];
        int hlfd;               /* old side: the hand-over listener */
        int handed;             /* old side: hand-overs done (atomic) */
        pthread_t thread;
};

static int pick(void *userdata, const struct fwd_addr *client, const struct fwd_addr *failed, struct fwd_addr *ret) {
        struct side *s = userdata;
        (void) client;
        (void) failed;
        *ret = s->ep;
        return 0;
}

static void stop_io(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        (void) fd;
        (void) events;
        (void) userdata;
        ev_stop(l);
}

/* The old side: a successor announces itself (it serves on), asks, and
 * gets the listener; then it stops accepting, keeping open connections. */
static void successor_io(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct side *s = userdata;
        int lfd = fwd_tcp_listener(s->fwd);
        (void) events;

        int r = handover_wait(fd);
        if (r == -EAGAIN)
                return;
        CHECK(r == 1 && lfd >= 0);
        if (r == 1 && handover_give(fd, &lfd, 1, 2000) == 0) {
                fwd_tcp_stop_accepting(s->fwd);
                __atomic_add_fetch(&s->handed, 1, __ATOMIC_SEQ_CST);
        }
        ev_io_del(l, fd);
        close(fd);
}

static void handover_io(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct side *s = userdata;
        (void) events;

        int c = handover_accept(fd);
        if (c == -EAGAIN)
                return;
        CHECK(c >= 0);
        if (c >= 0)
                CHECK(ev_io_add(l, c, EPOLLIN, successor_io, s) == 0);
}

static void *side_run(void *p) {
        struct side *s = p;
        CHECK(ev_run(s->loop) == 0);
        return NULL;
}

static const struct fwd_tcp_params params = {.idle_timeout_ms = 60000, .connect_timeout_ms = 5000};

static void side_start(struct side *s, const struct fwd_addr *ep, int adopt_fd) {
        struct fwd_addr any = lo(0);

        s->ep = *ep;
        s->hlfd = -1;
        s->loop = ev_loop_new();
        CHECK(pipe2(s->stop, O_CLOEXEC) == 0);
        CHECK(ev_io_add(s->loop, s->stop[0], EPOLLIN, stop_io, s) == 0);
        if (adopt_fd >= 0)
                CHECK(fwd_tcp_adopt(s->loop, adopt_fd, &params, pick, s, &s->fwd) == 0);
        else
                CHECK(fwd_tcp_new(s->loop, &any, &params, pick, s, &s->fwd) == 0);
}

static struct fwd_tcp_stats side_stop(struct side *s) {
        struct fwd_tcp_stats st;

        CHECK(write(s->stop[1], "x", 1) == 1);
        CHECK(pthread_join(s->thread, NULL) == 0);
        fwd_tcp_get_stats(s->fwd, &st);
        s->fwd = fwd_tcp_free(s->fwd);
        if (s->hlfd >= 0) {
                ev_io_del(s->loop, s->hlfd);
                close(s->hlfd);
        }
        ev_io_del(s->loop, s->stop[0]);
        close(s->stop[0]);
        close(s->stop[1]);
        s->loop = ev_loop_free(s->loop);
        return st;
}

/* ---- the client load: connection after connection ---- */

struct load {
        struct fwd_addr service;
        int run;                /* atomic: 0 stops it */
        int ok, failed;         /* atomic */
};

static void *load_run(void *p) {
        struct load *ld = p;

        while (__atomic_load_n(&ld->run, __ATOMIC_SEQ_CST)) {
                char buf[16] = {0};
                int fd = dial(&ld->service);
                bool good = fd >= 0 && write(fd, "ping", 4) == 4 && read(fd, buf, sizeof buf) == 4 &&
                            memcmp(buf, "ping", 4) == 0;
                if (fd >= 0)
                        close(fd);
                __atomic_add_fetch(good ? &ld->ok : &ld->failed, 1, __ATOMIC_SEQ_CST);
        }
        return NULL;
}

static void wait_ok(struct load *ld, int n) {
        int target = __atomic_load_n(&ld->ok, __ATOMIC_SEQ_CST) + n;
        while (__atomic_load_n(&ld->ok, __ATOMIC_SEQ_CST) < target &&
               __atomic_load_n(&ld->failed, __ATOMIC_SEQ_CST) == 0)
                (void) poll(NULL, 0, 1);
}

static void test_handover_under_load(void) {
        int before = count_fds();
        char path[64], buf[16] = {0};
        struct echo e = {0};
        struct side old = {0}, young = {0};
        struct load ld = {.run = 1};
        struct handover_sock *socks = NULL;
        struct fwd_tcp_stats st_old, st_new;
        struct fwd_addr svc;
        size_t n = 0;
        pthread_t lt;
        int held;

        snprintf(path, sizeof path, "/tmp/kp-handover-%d.sock", (int) getpid());
        echo_start(&e);
        side_start(&old, &e.at, -1);
        fwd_tcp_local(old.fwd, &svc);
        old.hlfd = handover_listen(path);
        CHECK(old.hlfd >= 0);
        CHECK(ev_io_add(old.loop, old.hlfd, EPOLLIN, handover_io, &old) == 0);
        CHECK(pthread_create(&old.thread, NULL, side_run, &old) == 0);

        /* One long connection, open across the hand-over. */
        held = dial(&svc);
        CHECK(held >= 0 && write(held, "held", 4) == 4 && read(held, buf, sizeof buf) == 4);
        ld.service = svc;
        CHECK(pthread_create(&lt, NULL, load_run, &ld) == 0);
        wait_ok(&ld, 200);

        /* The successor: announce, take, check what came, adopt, run. */
        int c = handover_connect(path);
        CHECK(c >= 0);
        wait_ok(&ld, 200);      /* announced: the old one serves on */
        CHECK(handover_take(c, 2000, &socks, &n) == 0);
        close(c);
        CHECK(n == 1);
        if (n == 1) {
                CHECK(socks[0].proto == IPPROTO_TCP);
                CHECK(fwd_addr_equal(&socks[0].addr, &svc));
                side_start(&young, &e.at, socks[0].fd);
                socks[0].fd = -1;
                CHECK(pthread_create(&young.thread, NULL, side_run, &young) == 0);
        }
        handover_socks_free(socks, n);
        while (__atomic_load_n(&old.handed, __ATOMIC_SEQ_CST) == 0)
                (void) poll(NULL, 0, 1);
        wait_ok(&ld, 200);
        __atomic_store_n(&ld.run, 0, __ATOMIC_SEQ_CST);
        CHECK(pthread_join(lt, NULL) == 0);
        CHECK(ld.failed == 0);

        /* The old forwarder still carries its open connection. */
        memset(buf, 0, sizeof buf);
        CHECK(write(held, "more", 4) == 4 && read(held, buf, sizeof buf) == 4);
        CHECK_STREQ(buf, "more");
        close(held);

        st_old = side_stop(&old);
        if (young.loop) {
                st_new = side_stop(&young);
                /* Every connection was accepted by one of the two, and the
                 * new one took some. */
                CHECK(st_new.accepted > 0);
                CHECK(st_old.accepted + st_new.accepted == (uint64_t) ld.ok + 1);
                CHECK(st_new.resets == 0 && st_new.refused == 0);
        }
        CHECK(st_old.resets == 0 && st_old.refused == 0);
        echo_stop(&e);
        unlink(path);
        CHECK(count_fds() == before);
}

static void test_refusals(void) {
        int before = count_fds();
        char path[64];
        struct handover_sock *socks = NULL;
        size_t n = 0;
        int lfd, p[2];
        struct ev_loop *l = ev_loop_new();
        struct fwd_tcp *f = NULL;

        snprintf(path, sizeof path, "/tmp/kp-handover-none-%d.sock", (int) getpid());
        /* Nobody there: no file, or a stale file nobody listens on. */
        CHECK(handover_connect(path) == -ENOENT);
        lfd = handover_listen(path);
        CHECK(lfd >= 0);
        /* A successor that leaves without asking, and one that says
         * something else, are not successors: nothing is given. */
        int c = handover_connect(path), a;
        struct pollfd pfd = {.fd = lfd, .events = POLLIN};
        CHECK(c >= 0 && poll(&pfd, 1, 5000) == 1);
        a = handover_accept(lfd);
        CHECK(a >= 0 && handover_wait(a) == -EAGAIN);
        close(c);
        pfd = (struct pollfd) {.fd = a, .events = POLLIN};
        CHECK(poll(&pfd, 1, 5000) == 1 && handover_wait(a) == 0);
        close(a);
        c = handover_connect(path);
        CHECK(c >= 0 && send(c, "KPHX", 4, 0) == 4);
        pfd = (struct pollfd) {.fd = lfd, .events = POLLIN};
        CHECK(poll(&pfd, 1, 5000) == 1);
        a = handover_accept(lfd);
        pfd = (struct pollfd) {.fd = a, .events = POLLIN};
        CHECK(a >= 0 && poll(&pfd, 1, 5000) == 1 && handover_wait(a) == 0);
        close(a);
        close(c);
        close(lfd);
        CHECK(handover_connect(path) == -ECONNREFUSED);
        CHECK(handover_give(-1, NULL, 0, 100) == -EBADF);
        CHECK(handover_take(-1, 100, &socks, &n) == -EBADF);
        /* A pipe is no listener: adopt refuses it and leaves it open. */
        CHECK(pipe2(p, O_CLOEXEC) == 0);
        CHECK(fwd_tcp_adopt(l, p[0], &params, pick, NULL, &f) == -ENOTSOCK);
        CHECK(fcntl(p[0], F_GETFD) >= 0);
        close(p[0]);
        close(p[1]);
        char longpath[200];
        memset(longpath, 'x', sizeof longpath - 1);
        longpath[sizeof longpath - 1] = '\0';
        CHECK(handover_listen(longpath) == -ENAMETOOLONG);
        unlink(path);
        ev_loop_free(l);
        CHECK(count_fds() == before);
}

/* Another user gets nothing: the socket file is 0600, and (as root can
 * connect anyway) the predecessor checks the peer's uid. */
static void test_other_users_get_nothing(void) {
        char path[64];
        struct stat st;
        int lfd, fds[1];

        snprintf(path, sizeof path, "/tmp/kp-handover-uid-%d.sock", (int) getpid());
        lfd = handover_listen(path);
        CHECK(lfd >= 0);
        CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
        if (geteuid() != 0) {
                printf("test_other_users_get_nothing: not root, the uid check skipped\n");
        } else {
                pid_t pid = fork();
                CHECK(pid >= 0);
                if (pid == 0) {
                        struct handover_sock *socks = NULL;
                        size_t n = 0;
                        if (setuid(65534) < 0)
                                _exit(2);
                        int r = handover_connect(path);
                        (void) socks, (void) n;
                        _exit(r == -EACCES ? 0 : r < 0 ? 3 : 4);
                }
                int status;
                CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
                /* With the file opened up (by whoever could), the uid
                 * check alone stops another user: a child as euid 65534
                 * connects and gets nothing. */
                CHECK(chmod(path, 0666) == 0);
                fds[0] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                CHECK(fds[0] >= 0);
                pid = fork();
                CHECK(pid >= 0);
                if (pid == 0) {
                        int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
                        struct sockaddr_un sun = {.sun_family = AF_UNIX};
                        if (setresuid(-1, 65534, -1) < 0)       /* euid 65534: the peer credentials */
                                _exit(2);
                        strcpy(sun.sun_path, path);
                        if (c < 0 || connect(c, (struct sockaddr *) &sun, sizeof sun) < 0)
                                _exit(3);
                        char buf[8];
                        ssize_t k = recv(c, buf, sizeof buf, 0);     /* closed without a socket */
                        _exit(k == 0 ? 0 : 5);
                }
                struct pollfd pfd = {.fd = lfd, .events = POLLIN};
                CHECK(poll(&pfd, 1, 5000) == 1);
                CHECK(handover_accept(lfd) == -EPERM);
                CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
                close(fds[0]);
        }
        close(lfd);
        unlink(path);
}

int main(void) {
        signal(SIGPIPE, SIG_IGN);
        alarm(120);     /* a lost hand-over hangs the test: a failure */
        TEST_RUN(test_handover_under_load);
        TEST_RUN(test_refusals);
        TEST_RUN(test_other_users_get_nothing);
        TEST_DONE();
}
