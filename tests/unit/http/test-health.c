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
#include "http-client.h"
#include "test.h"
#include "util/buf.h"
#include "util/cleanup.h"

static uint64_t mono_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
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
        /* encoding/json's compact output: what jansson writes compact, in order */
        j = json_loads(r.body, 0, NULL);
        if (j) {
                char *again = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
                CHECK(again && strcmp(again, r.body) == 0);
                free(again);
        }
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
                int r = health_server_new(l, bad[i], 1000, 0, false, &h);
                if (r != -EINVAL)
                        fprintf(stderr, "  \"%s\": %d\n", bad[i], r);
                CHECK(r == -EINVAL);
                CHECK(h == (struct health_server *) l);
        }

        /* Port 0 (and no address at all) turn the server off. */
        CHECK(health_server_new(l, "127.0.0.1:0", 1000, 0, false, &h) == 0 && h == NULL);
        CHECK(health_server_new(l, "[::1]:00", 1000, 0, false, &h) == 0 && h == NULL);
        CHECK(health_server_new(l, NULL, 1000, 0, false, &h) == 0 && h == NULL);

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
        CHECK(health_server_new(l, addr, 1000, 0, false, &a) == 0 && a);
        CHECK(health_server_port(a) == port);
        CHECK(health_server_new(l, addr, 1000, 0, false, &b) == -EADDRINUSE);
        CHECK(b == (struct health_server *) l);
        snprintf(addr, sizeof addr, "[127.0.0.1]:%d", port);
        CHECK(health_server_new(l, addr, 1000, 0, false, &b) == -EADDRINUSE);

        /* TEST-NET-1 is on no host (unless the kernel lets anyone bind anything). */
        if (!nonlocal_bind_allowed()) {
                snprintf(addr, sizeof addr, "192.0.2.1:%d", port);
                CHECK(health_server_new(l, addr, 1000, 0, false, &b) == -EADDRNOTAVAIL);
        }
        CHECK(b == (struct health_server *) l);

        CHECK(health_server_free(a) == NULL);
        close(hold);
        ev_loop_free(l);
}

/* Without --bind-address-hard-fail (upstream's default): a bind that fails
 * is retried while the server object lives, and serves once the port is
 * free. The loop runs until then: no sleep decides it. */
struct retry_watch {
        struct health_server *h;
        struct ev_timer *deadline;
};

static void on_tick(struct ev_loop *l, void *userdata) {
        struct retry_watch *w = userdata;
        if (health_server_port(w->h) != 0) {
                w->deadline = ev_timer_cancel(l, w->deadline);
                ev_stop(l);
        } else {
                ev_timer_add(l, 5, on_tick, w);
        }
}

static void on_deadline(struct ev_loop *l, void *userdata) {
        struct retry_watch *w = userdata;
        w->deadline = NULL;
        ev_stop(l);
}

static void test_bind_retry(void) {
        struct ev_loop *l = ev_loop_new();
        struct retry_watch w = {0};
        char addr[64];
        int port, hold = reserve_port(AF_INET, &port);

        CHECK(hold >= 0 && listen(hold, 1) == 0);       /* the port is taken */
        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
        CHECK(health_server_new(l, addr, 1000, 20, false, &w.h) == 0 && w.h);
        if (!w.h)
                goto out;
        CHECK(health_server_port(w.h) == 0);
        /* Still taken after a few retries. */
        w.deadline = ev_timer_add(l, 100, on_deadline, &w);
        CHECK(ev_run(l) == 0);
        CHECK(health_server_port(w.h) == 0);
        close(hold);
        hold = -1;
        w.deadline = ev_timer_add(l, 10000, on_deadline, &w);
        ev_timer_add(l, 5, on_tick, &w);
        CHECK(ev_run(l) == 0);
        CHECK(health_server_port(w.h) == port);
        if (health_server_port(w.h) == port)
                json_decref(get_json(l, port, "/livez", 200));
        struct health_server *bad = NULL;
        CHECK(health_server_new(l, "localhost:1", 1000, 20, false, &bad) == -EINVAL && !bad);      /* never retried */
out:
        health_server_free(w.h);
        if (hold >= 0)
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
        CHECK(health_server_new(l, addr, 60000, 0, false, &h) == 0 && h);
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

        /* --socket-lb's state: kproxy's own member, only when asked for;
         * never one that would need escaping. */
        health_server_set_socket_lb(h, "off: its programs could not be set up");
        j = get_json(l, port, "/healthz", 200);
        CHECK(keys_are(j, "lastUpdated,currentTime,nodeEligible,healthy,socketLB,status"));
        CHECK_STREQ(jstr(j, "socketLB"), "off: its programs could not be set up");
        json_decref(j);
        j = get_json(l, port, "/livez", 200);
        CHECK_STREQ(jstr(j, "socketLB"), "off: its programs could not be set up");
        json_decref(j);
        health_server_set_socket_lb(h, "a \"quoted\" state");
        j = get_json(l, port, "/healthz", 200);
        CHECK(!json_object_get(j, "socketLB"));
        json_decref(j);
        health_server_set_socket_lb(h, NULL);

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
        CHECK(health_server_new(l, addr, 1, 0, false, &h) == 0 && h);
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
        CHECK(health_server_new(l, addr, 60000, 0, false, &h) == 0 && h);
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
        CHECK(health_server_new(l, addr, 1000, 0, false, &h) == 0 && h);
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
        TEST_RUN(test_bind_retry);
        TEST_RUN(test_healthz);
        TEST_RUN(test_timeout);
        TEST_RUN(test_connections);
        TEST_RUN(test_ipv6);
        TEST_DONE();
}
