/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sockbpf/udpreap.c against the kernel, in a network namespace of the
 * test's own (unshare: the sockets it lists and destroys are this test's
 * only). The "cgroup" is a scratch directory whose cgroup.procs (and a
 * subdirectory's) name this process, beside a pid this PID namespace does
 * not see (0), a process that has gone and a line that is no pid: the
 * reaper finds the namespace once,
 * lists the connected UDP sockets of both families, and destroys those
 * the callback calls stale: their next receive fails with ECONNABORTED and
 * a send finds no peer (EDESTADDRREQ); the others go on.
 */
#include "sockbpf/udpreap.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netns.h"
#include "sockbpf/sockbpf.h"
#include "test.h"
#include "util/inet.h"

static char dir[64];

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "w");
        CHECK(f);
        fputs(text, f);
        CHECK(fclose(f) == 0);
}

/* An unconnected socket bound to a loopback port of family; its address. */
static int server(int family, struct sockbpf_addr *ret) {
        struct sockaddr_storage ss = {0};
        socklen_t len = family == 6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
        int fd = socket(family == 6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

        CHECK(fd >= 0);
        ss.ss_family = family == 6 ? AF_INET6 : AF_INET;
        if (family == 6)
                ((struct sockaddr_in6 *) &ss)->sin6_addr = in6addr_loopback;
        else
                ((struct sockaddr_in *) &ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHECK(bind(fd, (struct sockaddr *) &ss, len) == 0);
        CHECK(getsockname(fd, (struct sockaddr *) &ss, &len) == 0);
        *ret = (struct sockbpf_addr) {.ip.family = (uint8_t) family};
        if (family == 6) {
                memcpy(ret->ip.bytes, &((struct sockaddr_in6 *) &ss)->sin6_addr, 16);
                ret->port = ntohs(((struct sockaddr_in6 *) &ss)->sin6_port);
        } else {
                memcpy(ret->ip.bytes, &((struct sockaddr_in *) &ss)->sin_addr, 4);
                ret->port = ntohs(((struct sockaddr_in *) &ss)->sin_port);
        }
        return fd;
}

/* A socket connected to the server s (whose address is a). */
static int connected(int s, uint64_t *ret_cookie) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        uint64_t cookie;
        socklen_t clen = sizeof cookie;

        CHECK(getsockname(s, (struct sockaddr *) &ss, &len) == 0);
        int fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        CHECK(fd >= 0);
        CHECK(connect(fd, (struct sockaddr *) &ss, len) == 0);
        CHECK(getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &clen) == 0);
        *ret_cookie = cookie;
        return fd;
}

struct pick {
        uint64_t cookies[4];            /* these are stale, each with its peer */
        struct sockbpf_addr peers[4];
        size_t n;
        size_t calls;
        int fail;                       /* returned instead, when set */
};

static int stale(void *ctx, uint64_t cookie, const struct sockbpf_addr *peer) {
        struct pick *p = ctx;

        p->calls++;
        if (p->fail)
                return p->fail;
        for (size_t i = 0; i < p->n; i++)
                if (p->cookies[i] == cookie && inet_addr_equal(&p->peers[i].ip, &peer->ip) &&
                    p->peers[i].port == peer->port)
                        return 1;
        return 0;
}

/* Sends one datagram; returns 0 or -errno. */
static int ping(int fd) {
        return send(fd, "x", 1, 0) == 1 ? 0 : -errno;
}

static void test_destroys_what_is_stale(void) {
        struct sockbpf_addr a4, b4, a6;
        int s4 = server(4, &a4), t4 = server(4, &b4), s6 = server(6, &a6);
        uint64_t k1, k2, k3;
        int c1 = connected(s4, &k1), c2 = connected(t4, &k2), c3 = connected(s6, &k3);
        struct pick p = {.cookies = {k1, k3, k2}, .peers = {a4, a6, a4}, .n = 3};
        struct udpreap_stats st;
        char buf[4];

        /* c2's cookie with another peer than its own: not stale. */
        CHECK(udpreap_run(dir, stale, &p, &st) == 0);
        CHECK(st.netns == 1);               /* listed twice, visited once */
        CHECK(st.hidden == 2);              /* the "0" of each cgroup.procs */
        CHECK(st.sockets == 3 && p.calls == 3);
        CHECK(st.destroyed == 2);
        /* Destroyed: the pending error first, then no peer any more. */
        CHECK(recv(c1, buf, sizeof buf, 0) < 0 && errno == ECONNABORTED);
        CHECK(ping(c1) == -EDESTADDRREQ);
        CHECK(recv(c3, buf, sizeof buf, 0) < 0 && errno == ECONNABORTED);
        CHECK(ping(c3) == -EDESTADDRREQ);
        CHECK(ping(c2) == 0);
        CHECK(recv(t4, buf, sizeof buf, 0) == 1);
        /* What is left: c2 only (the destroyed are no longer listed). */
        p.calls = 0;
        CHECK(udpreap_run(dir, stale, &p, &st) == 0);
        CHECK(st.sockets == 1 && st.destroyed == 0 && p.calls == 1);
        close(c1);
        close(c2);
        close(c3);
        close(s4);
        close(t4);
        close(s6);
}

static void test_errors(void) {
        struct sockbpf_addr a;
        uint64_t k;
        int s = server(4, &a), c = connected(s, &k);
        struct pick p = {.cookies = {k}, .peers = {a}, .n = 1, .fail = -EIO};
        struct udpreap_stats st;
        char missing[80];

        /* A callback that fails: its error, nothing destroyed. */
        CHECK(udpreap_run(dir, stale, &p, &st) == -EIO);
        CHECK(st.destroyed == 0 && st.sockets == 1);
        CHECK(ping(c) == 0);
        snprintf(missing, sizeof missing, "%s/no-such-cgroup", dir);
        CHECK(udpreap_run(missing, stale, &p, &st) == -ENOENT);
        CHECK(st.netns == 0);
        close(c);
        close(s);
}

int main(void) {
        char path[128], pid[64];

        int r = test_netns_enter();
        if (r < 0) {
                printf("test-udpreap: skipped, a network namespace of its own needs root (%s)\n", strerror(-r));
                return 0;
        }
        strcpy(dir, "/tmp/kproxy-udpreap-XXXXXX");
        CHECK(mkdtemp(dir));
        snprintf(pid, sizeof pid, "%d\nnot-a-pid\n999999999\n0\n", (int) getpid());
        snprintf(path, sizeof path, "%s/cgroup.procs", dir);
        write_file(path, pid);
        snprintf(path, sizeof path, "%s/pod", dir);
        CHECK(mkdir(path, 0700) == 0);
        snprintf(path, sizeof path, "%s/pod/cgroup.procs", dir);
        write_file(path, pid);
        TEST_RUN(test_destroys_what_is_stale);
        TEST_RUN(test_errors);
        unlink(path);
        snprintf(path, sizeof path, "%s/pod", dir);
        rmdir(path);
        snprintf(path, sizeof path, "%s/cgroup.procs", dir);
        unlink(path);
        rmdir(dir);
        TEST_DONE();
}
