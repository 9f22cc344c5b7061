/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The health server on a real loop, over loopback. Each request is made by a
 * forked child with a plain blocking socket; it writes the raw response into a
 * pipe, and the parent runs the loop (which serves the request) until the pipe
 * reaches EOF. No sleeps: waiting for a timeout to pass is a loop timer.
 */
#include "http/health.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ev/ev.h"
#include "test.h"
#include "util/buf.h"
#include "util/cleanup.h"

#define GUARD_MS 10000  /* a request that takes this long has failed */

struct reply {
        int status;
        char *head;     /* status line and headers */
        char *body;
};

static void reply_done(struct reply *r) {
        free(r->head);
        free(r->body);
        *r = (struct reply) {0};
}

static uint64_t mono_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* A free port, held: the socket is bound but not listening, with
 * SO_REUSEADDR. On Linux a listener that also sets SO_REUSEADDR (as the server
 * does, like Go) may bind it; nobody else can take it meanwhile. Port 0 means
 * "disabled" to health_server_new(), so the test cannot ask it for an
 * ephemeral port. Returns the socket, or -1 if the family is unavailable. */
static int reserve_port(int family, int *ret_port) {
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

static bool write_all(int fd, const char *p, size_t n) {
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

static int connect_loopback(int family, int port) {
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

static void send_text(int fd, const char *s) {
        if (!write_all(fd, s, strlen(s)))
                _exit(1);
}

/* Copies what the server sends until it closes the connection. */
static void copy_to_eof(int fd, int out) {
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
static void copy_one(int fd, int out) {
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
static void script_one(const struct script *s, int out) {
        int fd = connect_loopback(s->family, s->port);
        send_text(fd, s->request);
        copy_to_eof(fd, out);
}

struct fetch {
        struct buf data;
        bool eof;
        bool timed_out;
};

static void on_pipe(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
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

static void on_guard(struct ev_loop *l, void *userdata) {
        struct fetch *f = userdata;
        f->timed_out = true;
        ev_stop(l);
}

/* Runs fn in a child with blocking sockets while this process runs the loop
 * (and so the server) until the child's output is complete. Returns the
 * output (owned by the caller), or NULL. */
static char *run_client(struct ev_loop *l, void (*fn)(const struct script *s, int out), const struct script *s) {
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
static int request(struct ev_loop *l, int family, int port, const char *method, const char *path, struct reply *ret) {
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
static const char *header(const struct reply *r, const char *name, char *out, size_t outlen) {
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

/* Go's RFC3339Nano in UTC: "2006-01-02T15:04:05[.fraction]Z", the fraction
 * 1-9 digits without trailing zeros. Stores the value in ret. */
static bool parse_time(const char *s, struct timespec *ret) {
        struct tm tm = {0};
        long nsec = 0;
        int n = 0;

        if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                         &tm.tm_min, &tm.tm_sec, &n) != 6 || n != 19)
                return false;
        s += n;
        if (*s == '.') {
                int digits = 0;
                for (s++; *s >= '0' && *s <= '9'; s++, digits++)
                        nsec = nsec * 10 + (*s - '0');
                if (digits < 1 || digits > 9 || s[-1] == '0')
                        return false;
                for (; digits < 9; digits++)
                        nsec *= 10;
        }
        if (strcmp(s, "Z") != 0)
                return false;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        *ret = (struct timespec) {timegm(&tm), nsec};
        return true;
}

static bool keys_are(json_t *o, const char *expected) {
        struct buf b = BUF_INIT;
        bool ok;

        /* jansson keeps keys in document order. */
        for (void *it = json_object_iter(o); it; it = json_object_iter_next(o, it))
                buf_printf(&b, "%s%s", b.len ? "," : "", json_object_iter_key(it));
        ok = b.data && strcmp(b.data, expected) == 0;
        if (!ok)
                fprintf(stderr, "  keys: %s, expected %s\n", b.data ? b.data : "(none)", expected);
        buf_done(&b);
        return ok;
}

/* GET path, expect status, check the headers and parse the body. */
static json_t *get_json(struct ev_loop *l, int port, const char *path, int status) {
        struct reply r = {0};
        json_t *j = NULL;
        char v[128];

        if (request(l, AF_INET, port, "GET", path, &r) < 0) {
                CHECK(!"request failed");
                return NULL;
        }
        CHECK(r.status == status);
        CHECK_STREQ(header(&r, "Content-Type", v, sizeof v), "application/json");
        CHECK_STREQ(header(&r, "X-Content-Type-Options", v, sizeof v), "nosniff");
        /* encoding/json's compact output */
        CHECK(!strchr(r.body, ' ') && !strchr(r.body, '\n'));
        j = json_loads(r.body, 0, NULL);
        CHECK(json_is_object(j));
        if (!json_is_object(j))
                fprintf(stderr, "  body: %s\n", r.body);
        reply_done(&r);
        return j;
}

static const char *jstr(json_t *j, const char *path) {
        return json_string_value(json_object_get(j, path));
}

static void test_bind_strings(void) {
        struct ev_loop *l = ev_loop_new();
        struct health_server *h = (struct health_server *) l;  /* sentinel: written only on success */
        static const char *const bad[] = {
                "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:http", "127.0.0.1:-1", "127.0.0.1:+80",
                "::1:10256", "[::1]10256", "[::1]", "localhost:10256", "", " 127.0.0.1:1", ":10256",
                "[fe80::1%lo]:10256", "1.2.3.4:5:6", "[1.2.3.4]:5]",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r = health_server_new(l, bad[i], 1000, &h);
                if (r != -EINVAL)
                        fprintf(stderr, "  \"%s\": %d\n", bad[i], r);
                CHECK(r == -EINVAL);
                CHECK(h == (struct health_server *) l);
        }

        /* Port 0 (and no address at all) turn the server off. */
        CHECK(health_server_new(l, "127.0.0.1:0", 1000, &h) == 0 && h == NULL);
        CHECK(health_server_new(l, "[::1]:00", 1000, &h) == 0 && h == NULL);
        CHECK(health_server_new(l, NULL, 1000, &h) == 0 && h == NULL);

        /* A disabled server takes every call. */
        health_server_queued(NULL, 4);
        health_server_synced(NULL, 6);
        health_server_set_node_eligible(NULL, false);
        CHECK(health_server_port(NULL) == 0);
        CHECK(health_server_free(NULL) == NULL);
        ev_loop_free(l);
}

static bool nonlocal_bind_allowed(void) {
        FILE *f = fopen("/proc/sys/net/ipv4/ip_nonlocal_bind", "re");
        int v = 0;

        if (f) {
                if (fscanf(f, "%d", &v) != 1)
                        v = 0;
                fclose(f);
        }
        return v != 0;
}

static void test_bind_errors(void) {
        struct ev_loop *l = ev_loop_new();
        struct health_server *a = NULL, *b = (struct health_server *) l;
        char addr[64];
        int port, hold = reserve_port(AF_INET, &port);

        CHECK(hold >= 0);
        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
        CHECK(health_server_new(l, addr, 1000, &a) == 0 && a);
        CHECK(health_server_port(a) == port);
        CHECK(health_server_new(l, addr, 1000, &b) == -EADDRINUSE);
        CHECK(b == (struct health_server *) l);
        snprintf(addr, sizeof addr, "[127.0.0.1]:%d", port);
        CHECK(health_server_new(l, addr, 1000, &b) == -EADDRINUSE);

        /* TEST-NET-1 is on no host (unless the kernel lets anyone bind anything). */
        if (!nonlocal_bind_allowed()) {
                snprintf(addr, sizeof addr, "192.0.2.1:%d", port);
                CHECK(health_server_new(l, addr, 1000, &b) == -EADDRNOTAVAIL);
        }
        CHECK(b == (struct health_server *) l);

        CHECK(health_server_free(a) == NULL);
        close(hold);
        ev_loop_free(l);
}

static void test_healthz(void) {
        struct ev_loop *l = ev_loop_new();
        struct health_server *h = NULL;
        struct timespec t1, t2, now;
        struct reply r = {0};
        char addr[64], v[128];
        int port, hold = reserve_port(AF_INET, &port);
        json_t *j, *s;

        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
        CHECK(health_server_new(l, addr, 60000, &h) == 0 && h);
        if (!h)
                goto out;

        /* Starting up: /healthz (readiness) waits for the first sync; /livez
         * is healthy, as upstream's (nothing queued yet, no families). */
        j = get_json(l, port, "/healthz", 503);
        CHECK(keys_are(j, "lastUpdated,currentTime,nodeEligible,healthy"));
        CHECK(json_is_false(json_object_get(j, "healthy")));
        json_decref(j);
        j = get_json(l, port, "/livez", 200);
        CHECK(keys_are(j, "lastUpdated,currentTime,healthy"));
        CHECK(parse_time(jstr(j, "lastUpdated"), &t1) && parse_time(jstr(j, "currentTime"), &t2));
        clock_gettime(CLOCK_REALTIME, &now);
        CHECK(t2.tv_sec <= now.tv_sec && t2.tv_sec >= now.tv_sec - 5);      /* UTC, not local time */
        CHECK_STREQ(jstr(j, "lastUpdated"), jstr(j, "currentTime"));        /* healthy: "now" */
        CHECK(json_is_true(json_object_get(j, "healthy")));
        json_decref(j);

        /* Synced, then a change queued well within the timeout: still healthy. */
        health_server_synced(h, 4);
        health_server_queued(h, 4);
        health_server_queued(h, 6);
        j = get_json(l, port, "/healthz", 200);
        CHECK(keys_are(j, "lastUpdated,currentTime,nodeEligible,healthy,status"));
        s = json_object_get(j, "status");
        CHECK(keys_are(s, "IPv4,IPv6"));
        CHECK(keys_are(json_object_get(s, "IPv4"), "lastUpdated,healthy"));
        CHECK(parse_time(jstr(json_object_get(s, "IPv4"), "lastUpdated"), &t1));
        CHECK(parse_time(jstr(json_object_get(s, "IPv6"), "lastUpdated"), &t2));
        CHECK(t2.tv_sec <= t1.tv_sec);  /* IPv6 never synced: the server's start */
        CHECK(json_is_true(json_object_get(json_object_get(s, "IPv6"), "healthy")));
        json_decref(j);

        /* The Node going away fails /healthz only; "healthy" stays the proxier's. */
        health_server_set_node_eligible(h, false);
        j = get_json(l, port, "/healthz", 503);
        CHECK(json_is_false(json_object_get(j, "nodeEligible")));
        CHECK(json_is_true(json_object_get(j, "healthy")));
        CHECK(strcmp(jstr(j, "lastUpdated"), jstr(j, "currentTime")) != 0);    /* unhealthy: the last sync */
        json_decref(j);
        j = get_json(l, port, "/livez", 200);
        CHECK(!json_object_get(j, "nodeEligible"));
        json_decref(j);
        health_server_set_node_eligible(h, true);
        json_decref(get_json(l, port, "/healthz?verbose=1", 200));

        /* Paths are exact, as on Go's ServeMux; the rest is Go's NotFound. */
        CHECK(request(l, AF_INET, port, "GET", "/metrics", &r) == 0);
        CHECK(r.status == 404);
        CHECK_STREQ(r.body, "404 page not found\n");
        CHECK_STREQ(header(&r, "Content-Type", v, sizeof v), "text/plain; charset=utf-8");
        CHECK_STREQ(header(&r, "X-Content-Type-Options", v, sizeof v), "nosniff");
        reply_done(&r);
        CHECK(request(l, AF_INET, port, "GET", "/healthz/", &r) == 0 && r.status == 404);
        reply_done(&r);
        CHECK(request(l, AF_INET, port, "GET", "/", &r) == 0 && r.status == 404);
        reply_done(&r);

        /* HEAD: headers with the length, no body. */
        CHECK(request(l, AF_INET, port, "HEAD", "/healthz", &r) == 0);
        CHECK(r.status == 200);
        CHECK(header(&r, "Content-Length", v, sizeof v) && atoi(v) > 50);
        CHECK_STREQ(header(&r, "Content-Type", v, sizeof v), "application/json");
        CHECK_STREQ(r.body, "");
        reply_done(&r);

        /* Upstream's handlers ignore the method. */
        CHECK(request(l, AF_INET, port, "POST", "/livez", &r) == 0);
        CHECK(r.status == 200);
        CHECK(strncmp(r.body, "{\"lastUpdated\":\"", 16) == 0);
        reply_done(&r);

out:
        health_server_free(h);
        close(hold);
        ev_loop_free(l);
}

static void on_waited(struct ev_loop *l, void *userdata) {
        (void) userdata;
        ev_stop(l);
}

/* Lets the loop run until at least ms have passed on the monotonic clock. */
static void wait_ms(struct ev_loop *l, uint64_t ms) {
        uint64_t start = mono_ns();
        while (mono_ns() - start < ms * 1000000u) {
                ev_timer_add(l, ms, on_waited, NULL);
                ev_run(l);
        }
}

static void test_timeout(void) {
        struct ev_loop *l = ev_loop_new();
        struct health_server *h = NULL;
        struct timespec t;
        char addr[64];
        int port, hold = reserve_port(AF_INET, &port);
        json_t *j, *s;
        uint64_t start;

        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
        CHECK(health_server_new(l, addr, 1, &h) == 0 && h);
        if (!h)
                goto out;

        /* A first sync that never comes: unhealthy once the change is 1 ms old. */
        start = mono_ns();
        health_server_queued(h, 4);
        wait_ms(l, 2);
        CHECK(mono_ns() - start >= 1000000u);
        j = get_json(l, port, "/healthz", 503);
        CHECK(json_is_false(json_object_get(j, "healthy")));
        CHECK(json_is_true(json_object_get(j, "nodeEligible")));
        s = json_object_get(json_object_get(j, "status"), "IPv4");
        CHECK(json_is_false(json_object_get(s, "healthy")));
        /* Unhealthy: lastUpdated is the newest family's, here the server's start. */
        CHECK_STREQ(jstr(j, "lastUpdated"), jstr(s, "lastUpdated"));
        CHECK(parse_time(jstr(j, "lastUpdated"), &t));
        json_decref(j);
        j = get_json(l, port, "/livez", 503);
        CHECK(json_is_false(json_object_get(j, "healthy")));
        json_decref(j);

        /* A sync clears it. */
        health_server_synced(h, 4);
        json_decref(get_json(l, port, "/healthz", 200));

        /* A later change that waits too long: unhealthy again, the other
         * family (never queued) stays healthy. */
        health_server_synced(h, 6);
        health_server_queued(h, 4);
        wait_ms(l, 2);
        j = get_json(l, port, "/livez", 503);
        s = json_object_get(j, "status");
        CHECK(json_is_false(json_object_get(json_object_get(s, "IPv4"), "healthy")));
        CHECK(json_is_true(json_object_get(json_object_get(s, "IPv6"), "healthy")));
        json_decref(j);

out:
        health_server_free(h);
        close(hold);
        ev_loop_free(l);
}

/* Two requests on one connection: the second arrives on a connection MHD
 * already has, which only its epoll set (not the listen socket) reports. */
static void script_keepalive(const struct script *s, int out) {
        int fd = connect_loopback(s->family, s->port);

        send_text(fd, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
        copy_one(fd, out);
        send_text(fd, "GET /livez HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        copy_to_eof(fd, out);
}

/* A client that stops mid-request must not hold up the next one: the
 * second connection is answered while the first is still incomplete. */
static void script_slow_client(const struct script *s, int out) {
        int slow = connect_loopback(s->family, s->port), fast;

        send_text(slow, "GET /livez HTTP/1.1\r\nHo");
        fast = connect_loopback(s->family, s->port);
        send_text(fast, "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        copy_to_eof(fast, out);
        send_text(slow, "st: localhost\r\nConnection: close\r\n\r\n");
        copy_to_eof(slow, out);
}

static size_t count(const char *s, const char *needle) {
        size_t n = 0;
        for (; s && (s = strstr(s, needle)); s++)
                n++;
        return n;
}

static void test_connections(void) {
        struct ev_loop *l = ev_loop_new();
        struct health_server *h = NULL;
        char addr[64], *out;
        int port, hold = reserve_port(AF_INET, &port);
        struct script s = {AF_INET, port, NULL};

        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
        CHECK(health_server_new(l, addr, 60000, &h) == 0 && h);
        health_server_synced(h, 4);

        out = run_client(l, script_keepalive, &s);
        CHECK(count(out, "HTTP/1.1 200 OK\r\n") == 2);
        CHECK(count(out, "\"nodeEligible\"") == 1);       /* /healthz, then /livez */
        CHECK(out && strstr(out, "\"nodeEligible\"") < strstr(strstr(out, "\r\n\r\n"), "HTTP/1.1"));
        CHECK(count(out, "Connection: close") == 1);      /* only where the client asked */
        free(out);

        out = run_client(l, script_slow_client, &s);
        CHECK(count(out, "HTTP/1.1 200 OK\r\n") == 2);
        CHECK(out && strstr(out, "\"nodeEligible\""));
        CHECK(out && strstr(out, "\"nodeEligible\"") < strstr(out + 1, "HTTP/1.1 200"));  /* the fast one first */
        free(out);

        health_server_free(h);
        close(hold);
        ev_loop_free(l);
}

static void test_ipv6(void) {
        struct ev_loop *l = ev_loop_new();
        struct health_server *h = NULL;
        struct reply r = {0};
        char addr[64];
        int port, hold = reserve_port(AF_INET6, &port);

        if (hold < 0) {
                printf("%s: no IPv6 loopback here, skipping test_ipv6\n", __FILE__);
                ev_loop_free(l);
                return;
        }
        snprintf(addr, sizeof addr, "[::1]:%d", port);
        CHECK(health_server_new(l, addr, 1000, &h) == 0 && h);
        health_server_synced(h, 4);
        CHECK(request(l, AF_INET6, port, "GET", "/healthz", &r) == 0 && r.status == 200);
        reply_done(&r);
        health_server_free(h);
        close(hold);
        ev_loop_free(l);
}

int main(void) {
        TEST_RUN(test_bind_strings);
        TEST_RUN(test_bind_errors);
        TEST_RUN(test_healthz);
        TEST_RUN(test_timeout);
        TEST_RUN(test_connections);
        TEST_RUN(test_ipv6);
        TEST_DONE();
}
