/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A loopback HTTP test client shared by the unit tests of the HTTP servers.
 * Each request is made by a forked child with plain blocking sockets; it
 * writes the raw response into a pipe, and the parent runs the loop (which
 * serves the request) until the pipe reaches EOF.
 *
 * Everything is static and marked unused: each test uses only a part.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ev/ev.h"
#include "test.h"
#include "util/buf.h"

#define GUARD_MS 10000  /* a request that takes this long has failed */

struct reply {
        int status;
        char *head;     /* status line and headers */
        char *body;
};

static __attribute__((unused)) void reply_done(struct reply *r) {
        free(r->head);
        free(r->body);
        *r = (struct reply) {0};
}

/* A free port on the family's loopback address, held: the socket is bound but
 * not listening, with SO_REUSEADDR. On Linux a listener that also sets
 * SO_REUSEADDR (as the servers do, like Go) may bind it; nobody else can take
 * it meanwhile. Port 0 means "disabled" to the servers, so a test cannot ask
 * them for an ephemeral port. Returns the socket, or -1 if the family is
 * unavailable. */
static __attribute__((unused)) int reserve_port(int family, int *ret_port) {
        struct sockaddr_storage ss = {};
        socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        int one = 1, fd;

        ss.ss_family = (sa_family_t) family;
        if (family == AF_INET)
                ((struct sockaddr_in *) &ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        else
                ((struct sockaddr_in6 *) &ss)->sin6_addr = in6addr_loopback;
        fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
            bind(fd, (struct sockaddr *) &ss, len) < 0 || getsockname(fd, (struct sockaddr *) &ss, &len) < 0) {
                close(fd);
                return -1;
        }
        *ret_port = ntohs(family == AF_INET ? ((struct sockaddr_in *) &ss)->sin_port
                                            : ((struct sockaddr_in6 *) &ss)->sin6_port);
        return fd;
}

static __attribute__((unused)) bool write_all(int fd, const char *p, size_t n) {
        while (n > 0) {
                ssize_t w = write(fd, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return false;
                p += w;
                n -= (size_t) w;
        }
        return true;
}

static __attribute__((unused)) int connect_loopback(int family, int port) {
        struct sockaddr_storage ss = {};
        socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        int fd;

        ss.ss_family = (sa_family_t) family;
        if (family == AF_INET) {
                ((struct sockaddr_in *) &ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                ((struct sockaddr_in *) &ss)->sin_port = htons((uint16_t) port);
        } else {
                ((struct sockaddr_in6 *) &ss)->sin6_addr = in6addr_loopback;
                ((struct sockaddr_in6 *) &ss)->sin6_port = htons((uint16_t) port);
        }
        fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &ss, len) < 0)
                _exit(1);
        return fd;
}

static __attribute__((unused)) void send_text(int fd, const char *s) {
        if (!write_all(fd, s, strlen(s)))
                _exit(1);
}

/* Copies what the server sends until it closes the connection. */
static __attribute__((unused)) void copy_to_eof(int fd, int out) {
        char tmp[4096];
        ssize_t n;

        while ((n = read(fd, tmp, sizeof tmp)) > 0)
                if (!write_all(out, tmp, (size_t) n))
                        _exit(1);
        if (n < 0)
                _exit(1);
}

/* Copies one response of a kept-alive connection (headers, Content-Length
 * bytes of body). */
static __attribute__((unused)) void copy_one(int fd, int out) {
        struct buf b = BUF_INIT;
        char c, *end = NULL, *cl;
        size_t body = 0;

        while (!end) {
                if (read(fd, &c, 1) != 1)
                        _exit(1);
                buf_putc(&b, c);
                end = strstr(b.data, "\r\n\r\n");
        }
        cl = strcasestr(b.data, "\r\nContent-Length:");
        if (cl)
                body = strtoul(cl + 17, NULL, 10);
        while (body-- > 0) {
                if (read(fd, &c, 1) != 1)
                        _exit(1);
                buf_putc(&b, c);
        }
        if (!write_all(out, b.data, b.len))
                _exit(1);
        buf_done(&b);
}

struct script {
        int family;
        int port;
        const char *request;    /* for script_one */
};

/* In the child: one request, the whole response into out. */
static __attribute__((unused)) void script_one(const struct script *s, int out) {
        int fd = connect_loopback(s->family, s->port);
        send_text(fd, s->request);
        copy_to_eof(fd, out);
}

struct fetch {
        struct buf data;
        bool eof;
        bool timed_out;
};

static __attribute__((unused)) void on_pipe(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct fetch *f = userdata;
        char tmp[4096];

        (void) events;
        for (;;) {
                ssize_t n = read(fd, tmp, sizeof tmp);
                if (n > 0) {
                        buf_put(&f->data, tmp, (size_t) n);
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                f->eof = true;
                ev_stop(l);
                return;
        }
}

static __attribute__((unused)) void on_guard(struct ev_loop *l, void *userdata) {
        struct fetch *f = userdata;
        f->timed_out = true;
        ev_stop(l);
}

/* Runs fn in a child with blocking sockets while this process runs the loop
 * (and so the server) until the child's output is complete. Returns the
 * output (owned by the caller), or NULL. */
static __attribute__((unused)) char *run_client(struct ev_loop *l, void (*fn)(const struct script *s, int out),
                                                const struct script *s) {
        struct fetch f = {.data = BUF_INIT};
        struct ev_timer *guard;
        int p[2], status = 0;
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return NULL;
        pid = fork();
        if (pid < 0)
                return NULL;
        if (pid == 0) {
                close(p[0]);
                fn(s, p[1]);
                _exit(0);
        }
        close(p[1]);
        fcntl(p[0], F_SETFL, O_NONBLOCK);
        CHECK(ev_io_add(l, p[0], EPOLLIN, on_pipe, &f) == 0);
        guard = ev_timer_add(l, GUARD_MS, on_guard, &f);
        ev_run(l);
        if (!f.timed_out)
                ev_timer_cancel(l, guard);
        ev_io_del(l, p[0]);
        close(p[0]);
        waitpid(pid, &status, 0);
        CHECK(!f.timed_out);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        return buf_steal(&f.data);
}

/* Sends `method path` on a fresh connection; returns 0 with the parsed reply,
 * or -1. */
static __attribute__((unused)) int request(struct ev_loop *l, int family, int port, const char *method,
                                           const char *path, struct reply *ret) {
        char req[512];
        struct script s = {family, port, req};

        snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                 method, path);
        char *text = run_client(l, script_one, &s);
        char *end = text ? strstr(text, "\r\n\r\n") : NULL;
        if (!end || sscanf(text, "HTTP/1.%*d %d", &ret->status) != 1) {
                free(text);
                return -1;
        }
        ret->body = strdup(end + 4);
        end[2] = '\0';
        ret->head = text;
        return 0;
}

/* A header's value (case-insensitive name), copied into out; NULL if absent. */
static __attribute__((unused)) const char *header(const struct reply *r, const char *name, char *out, size_t outlen) {
        size_t nl = strlen(name);

        for (const char *line = strstr(r->head, "\r\n"); line && line[2]; line = strstr(line + 2, "\r\n")) {
                const char *s = line + 2, *eol = strstr(s, "\r\n");
                if (strncasecmp(s, name, nl) != 0 || s[nl] != ':')
                        continue;
                s += nl + 1;
                while (*s == ' ')
                        s++;
                size_t n = (size_t) (eol - s) < outlen - 1 ? (size_t) (eol - s) : outlen - 1;
                memcpy(out, s, n);
                out[n] = '\0';
                return out;
        }
        return NULL;
}
