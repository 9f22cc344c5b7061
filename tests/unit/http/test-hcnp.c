/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The health-check node ports on a real loop, over loopback. As in
 * test-health.c, requests come from a forked child with plain blocking
 * sockets that writes what it receives into a pipe, while the parent runs the
 * loop (and so the servers). A child that must wait for the parent (to see a
 * sync between two requests) writes a marker and then blocks reading a "go"
 * pipe; the parent runs the loop until the marker arrives, syncs, and writes
 * the go byte. No sleeps.
 */
#include "http/hcnp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ev/ev.h"
#include "http-client.h"
#include "netns.h"
#include "test.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/inet.h"

#define SYNC(h, svcs, n) hcnp_sync((h), (svcs), (n), &lo, 1)

#define MARK "@@MARK@@"

static struct inet_addr addr(const char *s) {
        struct inet_addr a = {0};
        CHECK(inet_addr_parse(s, &a) == 0);
        return a;
}

static struct inet_addr lo;     /* 127.0.0.1 */

/* The inode of the socket listening on ip:port (IPv4), from /proc/net/tcp,
 * or 0: tells whether a sync kept a socket or made a new one. */
static unsigned long listen_inode(const char *ip, int port) {
        struct in_addr in;
        char want[32], line[512], local[64];
        unsigned long inode, found = 0;
        unsigned st;
        FILE *f = fopen("/proc/net/tcp", "re");

        inet_pton(AF_INET, ip, &in);
        snprintf(want, sizeof want, "%08X:%04X", (unsigned) in.s_addr, (unsigned) port);
        while (f && !found && fgets(line, sizeof line, f))
                if (sscanf(line, " %*d: %63s %*s %x %*s %*s %*s %*s %*s %lu", local, &st, &inode) == 3 &&
                    st == 0x0A && strcmp(local, want) == 0)
                        found = inode;
        if (f)
                fclose(f);
        return found;
}

struct hc_script {
        const char *ip;
        int port;
        const char *request;
};

/* In the child, any failure ends it with status 1, which the parent checks.
 * A connected socket, or -errno (die: or the child's end). */
static int connect_to(const char *ip, int port, bool die) {
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t) port)};
        struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t) port)};
        bool v6 = inet_pton(AF_INET6, ip, &sin6.sin6_addr) == 1;
        int fd, r = 0;

        inet_pton(AF_INET, ip, &sin.sin_addr);
        fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, v6 ? (struct sockaddr *) &sin6 : (struct sockaddr *) &sin,
                              v6 ? sizeof sin6 : sizeof sin) < 0)
                r = -errno;
        if (r < 0 && fd >= 0)
                close(fd);
        if (r < 0 && die)
                _exit(1);
        return r < 0 ? r : fd;
}

static void hc_script_one(const struct hc_script *s, int out, int go) {
        int fd = connect_to(s->ip, s->port, true);

        (void) go;
        send_text(fd, s->request);
        copy_to_eof(fd, out);
}

static void script_refused(const struct hc_script *s, int out, int go) {
        int fd = connect_to(s->ip, s->port, false);

        (void) go;
        send_text(out, fd == -ECONNREFUSED ? "refused" : fd >= 0 ? "connected" : "other error");
}

/* Probes in flight across a sync: a kept-alive connection with one answer
 * behind it, and a connection opened but not yet used. Both must be served
 * after the parent's sync. */
static void script_across_sync(const struct hc_script *s, int out, int go) {
        int used = connect_to(s->ip, s->port, true), fresh;
        char c;

        send_text(used, "GET /healthz HTTP/1.1\r\nHost: lb\r\n\r\n");
        copy_one(used, out);
        fresh = connect_to(s->ip, s->port, true);
        send_text(out, MARK);
        if (read(go, &c, 1) != 1)
                _exit(1);
        send_text(fresh, s->request);
        copy_to_eof(fresh, out);
        send_text(used, s->request);
        copy_to_eof(used, out);
}

struct client {
        pid_t pid;
        int out, go;
        struct buf data;
        const char *until;
        bool eof, timed_out;
};

static bool client_ready(const struct client *c) {
        return c->eof || (c->until && c->data.data && strstr(c->data.data, c->until));
}

static void client_on_pipe(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct client *c = userdata;
        char tmp[4096];
        ssize_t n;

        (void) events;
        while ((n = read(fd, tmp, sizeof tmp)) > 0 || (n < 0 && errno == EINTR))
                if (n > 0)
                        buf_put(&c->data, tmp, (size_t) n);
        c->eof = n == 0 || errno != EAGAIN;
        if (client_ready(c))
                ev_stop(l);
}

static void client_on_guard(struct ev_loop *l, void *userdata) {
        struct client *c = userdata;
        c->timed_out = true;
        ev_stop(l);
}

static void client_start(struct ev_loop *l, struct client *c, void (*fn)(const struct hc_script *, int, int),
                         const struct hc_script *s) {
        int out[2], go[2];

        *c = (struct client) {.pid = -1, .out = -1, .go = -1, .data = BUF_INIT};
        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0)
                abort();
        c->pid = fork();
        if (c->pid < 0)
                abort();
        if (c->pid == 0) {
                close(out[0]);
                close(go[1]);
                fn(s, out[1], go[0]);
                _exit(0);
        }
        close(out[1]);
        close(go[0]);
        c->out = out[0];
        c->go = go[1];
        fcntl(c->out, F_SETFL, O_NONBLOCK);
        CHECK(ev_io_add(l, c->out, EPOLLIN, client_on_pipe, c) == 0);
}

/* Runs the loop until the child's output holds until (or ends, for NULL). */
static void client_wait(struct ev_loop *l, struct client *c, const char *until) {
        struct ev_timer *guard;

        c->until = until;
        if (client_ready(c))
                return;
        guard = ev_timer_add(l, GUARD_MS, client_on_guard, c);
        ev_run(l);
        if (!c->timed_out)
                ev_timer_cancel(l, guard);
        CHECK(!c->timed_out);
}

/* Waits for the child to finish; returns its whole output (owned). */
static char *client_finish(struct ev_loop *l, struct client *c) {
        int status = 0;

        client_wait(l, c, NULL);
        ev_io_del(l, c->out);
        close(c->out);
        close(c->go);
        if (c->timed_out)
                kill(c->pid, SIGKILL);
        waitpid(c->pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        return buf_steal(&c->data);
}

static char *hc_run_client(struct ev_loop *l, void (*fn)(const struct hc_script *, int, int),
                           const struct hc_script *s) {
        struct client c;
        client_start(l, &c, fn, s);
        return client_finish(l, &c);
}

/* Parses the response at *p (a body of Content-Length bytes) and moves *p
 * past it; the head keeps each line's \r\n. Returns false if there is none. */
static bool parse_reply(const char **p, struct reply *ret) {
        const char *end = *p ? strstr(*p, "\r\n\r\n") : NULL, *cl;

        if (!end || sscanf(*p, "HTTP/1.%*d %d", &ret->status) != 1)
                return false;
        ret->head = strndup(*p, (size_t) (end - *p) + 2);
        cl = strcasestr(ret->head, "\r\nContent-Length:");
        ret->body = strndup(end + 4, cl ? strtoul(cl + 17, NULL, 10) : 0);
        *p = end + 4 + strlen(ret->body);
        return true;
}

/* A header's value, copied into out; or NULL. Stricter than header(): MHD
 * writes "Name: value", and exactly that is expected. */
static const char *header_strict(const struct reply *r, const char *name, char *out, size_t outlen) {
        char key[64];
        const char *v;

        snprintf(key, sizeof key, "\r\n%s: ", name);
        if (!(v = strcasestr(r->head, key)))
                return NULL;
        v += strlen(key);
        snprintf(out, outlen, "%.*s", (int) strcspn(v, "\r"), v);
        return out;
}

/* "METHOD /path" on a fresh connection to ip:port; false if no response came. */
static bool hc_request(struct ev_loop *l, const char *ip, int port, const char *what, struct reply *ret) {
        char req[256];
        struct hc_script s = {ip, port, req};

        snprintf(req, sizeof req, "%s HTTP/1.1\r\nHost: lb\r\nConnection: close\r\n\r\n", what);
        _cleanup_free_ char *text = hc_run_client(l, hc_script_one, &s);
        const char *p = text;
        return parse_reply(&p, ret);
}

static bool refused(struct ev_loop *l, const char *ip, int port) {
        struct hc_script s = {ip, port, NULL};
        char *text = hc_run_client(l, script_refused, &s);
        bool r = text && strcmp(text, "refused") == 0;

        if (!r)
                fprintf(stderr, "  %s:%d: %s\n", ip, port, text ? text : "(no output)");
        free(text);
        return r;
}

/* Checks one reply: status, the headers and the body, byte for byte
 * upstream's. */
static void check_reply(const struct reply *r, int status, const char *ns, const char *name, size_t n,
                        bool healthy) {
        char v[64], weight[24], body[512];

        snprintf(body, sizeof body, "{\n\t\"service\": {\n\t\t\"namespace\": \"%s\",\n\t\t\"name\": \"%s\"\n\t},\n"
                 "\t\"localEndpoints\": %zu,\n\t\"serviceProxyHealthy\": %s\n}", ns, name, n,
                 healthy ? "true" : "false");
        snprintf(weight, sizeof weight, "%zu", n);
        CHECK(r->status == status);
        CHECK_STREQ(header_strict(r, "Content-Type", v, sizeof v), "application/json");
        CHECK_STREQ(header_strict(r, "X-Content-Type-Options", v, sizeof v), "nosniff");
        CHECK_STREQ(header_strict(r, "X-Load-Balancing-Endpoint-Weight", v, sizeof v), weight);
        CHECK_STREQ(r->body, body);
}

static void check_get(struct ev_loop *l, const char *ip, int port, int status, const char *ns, const char *name,
                      size_t n, bool healthy) {
        struct reply r = {0};

        CHECK(hc_request(l, ip, port, "GET /healthz", &r));
        if (r.head)
                check_reply(&r, status, ns, name, n, healthy);
        reply_done(&r);
}

/* A loop, an hcnp, and two reserved ports on 127.0.0.1. */
struct fixture {
        struct ev_loop *l;
        struct hcnp *h;
        int port[2], hold[2];
};

static void fixture_init(struct fixture *f) {
        *f = (struct fixture) {.l = ev_loop_new()};
        CHECK(f->l && hcnp_new(f->l, &f->h) == 0 && f->h);
        for (size_t i = 0; i < 2; i++)
                CHECK((f->hold[i] = reserve_port(AF_INET, &f->port[i])) >= 0);
}

static void fixture_done(struct fixture *f) {
        CHECK(hcnp_free(f->h) == NULL);
        for (size_t i = 0; i < 2; i++)
                close(f->hold[i]);
        ev_loop_free(f->l);
}

static void test_answer(void) {
        struct fixture f;
        struct reply r = {0};
        char v[64];

        fixture_init(&f);
        int port = f.port[0];
        struct hcnp_service svc = {"default", "web", (uint16_t) port, 2};
        CHECK(SYNC(f.h, &svc, 1) == 0);
        CHECK(hcnp_count(f.h) == 1);
        check_get(f.l, "127.0.0.1", port, 200, "default", "web", 2, true);

        /* Any method and path: the handler is the whole server. */
        CHECK(hc_request(f.l, "127.0.0.1", port, "POST /anything?x=1", &r));
        check_reply(&r, 200, "default", "web", 2, true);
        size_t length = r.body ? strlen(r.body) : 0;
        reply_done(&r);

        /* HEAD: the headers and the length, no body. */
        CHECK(hc_request(f.l, "127.0.0.1", port, "HEAD /", &r));
        CHECK(r.status == 200);
        CHECK(length > 0 && header_strict(&r, "Content-Length", v, sizeof v) && (size_t) atoi(v) == length);
        CHECK_STREQ(r.body, "");
        reply_done(&r);

        /* No local endpoints: 503, same body. */
        svc.local_endpoints = 0;
        CHECK(SYNC(f.h, &svc, 1) == 0);
        check_get(f.l, "127.0.0.1", port, 503, "default", "web", 0, true);

        /* An unhealthy proxy is not programming its endpoints: 503 either way. */
        hcnp_set_proxy_healthy(f.h, false);
        check_get(f.l, "127.0.0.1", port, 503, "default", "web", 0, false);
        svc.local_endpoints = 3;
        CHECK(SYNC(f.h, &svc, 1) == 0);
        check_get(f.l, "127.0.0.1", port, 503, "default", "web", 3, false);
        hcnp_set_proxy_healthy(f.h, true);
        check_get(f.l, "127.0.0.1", port, 200, "default", "web", 3, true);
        hcnp_set_proxy_healthy(NULL, false);    /* a no-op */

        /* Port 0 is no health check at all. */
        svc.port = 0;
        CHECK(SYNC(f.h, &svc, 1) == 0);
        CHECK(hcnp_count(f.h) == 0);
        CHECK(refused(f.l, "127.0.0.1", port));
        fixture_done(&f);
}

static void test_add_remove(void) {
        struct fixture f;
        unsigned long inode;

        fixture_init(&f);
        int p1 = f.port[0], p2 = f.port[1];
        struct hcnp_service a = {"ns", "a", (uint16_t) p1, 1}, b = {"ns", "b", (uint16_t) p2, 2};
        struct hcnp_service both[] = {a, b};

        CHECK(SYNC(f.h, &a, 1) == 0);
        check_get(f.l, "127.0.0.1", p1, 200, "ns", "a", 1, true);
        CHECK(refused(f.l, "127.0.0.1", p2));

        /* Adding b opens its port and leaves a's socket alone. */
        inode = listen_inode("127.0.0.1", p1);
        CHECK(inode != 0);
        CHECK(SYNC(f.h, both, 2) == 0);
        CHECK(hcnp_count(f.h) == 2);
        CHECK(listen_inode("127.0.0.1", p1) == inode);
        check_get(f.l, "127.0.0.1", p2, 200, "ns", "b", 2, true);
        check_get(f.l, "127.0.0.1", p1, 200, "ns", "a", 1, true);

        /* Removing a closes its port. */
        CHECK(SYNC(f.h, &b, 1) == 0);
        CHECK(hcnp_count(f.h) == 1);
        CHECK(refused(f.l, "127.0.0.1", p1));
        check_get(f.l, "127.0.0.1", p2, 200, "ns", "b", 2, true);

        /* A service that moves to another port: the old one closes. */
        b.port = (uint16_t) p1;
        CHECK(SYNC(f.h, &b, 1) == 0);
        CHECK(refused(f.l, "127.0.0.1", p2));
        check_get(f.l, "127.0.0.1", p1, 200, "ns", "b", 2, true);

        /* A port that passes to another service keeps its socket. */
        inode = listen_inode("127.0.0.1", p1);
        a.port = (uint16_t) p1;
        CHECK(SYNC(f.h, &a, 1) == 0);
        CHECK(listen_inode("127.0.0.1", p1) == inode);
        check_get(f.l, "127.0.0.1", p1, 200, "ns", "a", 1, true);
        fixture_done(&f);
}

/* A count change while probes are in flight: same socket, nobody refused,
 * and the next answers have the new count. */
static void test_update_keeps_socket(void) {
        struct fixture f;
        struct client c;
        struct reply r[3] = {{0}};
        unsigned long inode;
        const char *p;

        fixture_init(&f);
        struct hc_script s = {"127.0.0.1", f.port[0], "GET / HTTP/1.1\r\nHost: lb\r\nConnection: close\r\n\r\n"};
        struct hcnp_service svc = {"default", "web", (uint16_t) f.port[0], 2};
        CHECK(SYNC(f.h, &svc, 1) == 0);
        inode = listen_inode("127.0.0.1", f.port[0]);
        CHECK(inode != 0);

        client_start(f.l, &c, script_across_sync, &s);
        client_wait(f.l, &c, MARK);
        svc.local_endpoints = 5;
        CHECK(SYNC(f.h, &svc, 1) == 0);
        CHECK(listen_inode("127.0.0.1", f.port[0]) == inode);
        CHECK(write(c.go, "g", 1) == 1);
        _cleanup_free_ char *out = client_finish(f.l, &c);

        p = out;
        CHECK(parse_reply(&p, &r[0]));
        CHECK(p && strncmp(p, MARK, strlen(MARK)) == 0);
        p = p ? p + strlen(MARK) : NULL;
        CHECK(parse_reply(&p, &r[1]));
        CHECK(parse_reply(&p, &r[2]));
        CHECK(p && *p == '\0');
        if (r[2].head) {
                check_reply(&r[0], 200, "default", "web", 2, true);
                check_reply(&r[1], 200, "default", "web", 5, true);     /* connected before the sync */
                check_reply(&r[2], 200, "default", "web", 5, true);     /* kept alive across it */
        }
        for (size_t i = 0; i < ELEMENTSOF(r); i++)
                reply_done(&r[i]);
        fixture_done(&f);
}

/* stderr into a file between capture_begin() and capture_end(), which
 * returns the text (owned) and passes it on to the real stderr. */
static FILE *capture_file;
static int capture_saved = -1;

static void capture_begin(void) {
        fflush(stderr);
        capture_file = tmpfile();
        capture_saved = dup(2);
        dup2(fileno(capture_file), 2);
}

static char *capture_end(void) {
        char *text = NULL;
        size_t n = 0;

        fflush(stderr);
        dup2(capture_saved, 2);
        close(capture_saved);
        rewind(capture_file);
        if (getdelim(&text, &n, '\0', capture_file) < 0 && text)
                text[0] = '\0';        /* nothing logged */
        fclose(capture_file);
        fputs(text ? text : "", stderr);
        return text;
}

/* needle occurs in s exactly once. */
static bool once(const char *s, const char *needle) {
        const char *p = s ? strstr(s, needle) : NULL;
        return p && !strstr(p + 1, needle);
}

static void test_same_port(void) {
        struct fixture f;
        char *log;

        fixture_init(&f);
        int port = f.port[0];
        struct hcnp_service svcs[] = {{"ns", "first", (uint16_t) port, 1}, {"ns", "second", (uint16_t) port, 4}};

        capture_begin();
        CHECK(SYNC(f.h, svcs, 2) == 0);
        CHECK(SYNC(f.h, svcs, 2) == 0);
        log = capture_end();
        CHECK(once(log, "ns/second"));          /* not per sync */
        free(log);
        CHECK(hcnp_count(f.h) == 1);
        check_get(f.l, "127.0.0.1", port, 200, "ns", "first", 1, true);

        /* The conflict over, and back: logged again. */
        capture_begin();
        CHECK(SYNC(f.h, svcs, 1) == 0);
        CHECK(SYNC(f.h, svcs, 2) == 0);
        log = capture_end();
        CHECK(once(log, "ns/second"));
        free(log);
        fixture_done(&f);
}

static void test_port_in_use(void) {
        struct fixture f;
        char *log, needle[64];

        fixture_init(&f);
        int p1 = f.port[0], p2 = f.port[1];
        struct hcnp_service svcs[] = {{"ns", "blocked", (uint16_t) p1, 1}, {"ns", "fine", (uint16_t) p2, 1}};
        snprintf(needle, sizeof needle, "ns/blocked on 127.0.0.1 port %d", p1);

        CHECK(listen(f.hold[0], 1) == 0);       /* someone else serves p1 */
        capture_begin();
        CHECK(SYNC(f.h, svcs, 2) == -EADDRINUSE);
        CHECK(SYNC(f.h, svcs, 2) == -EADDRINUSE);       /* retried */
        log = capture_end();
        CHECK(once(log, needle));
        free(log);
        CHECK(hcnp_count(f.h) == 1);
        check_get(f.l, "127.0.0.1", p2, 200, "ns", "fine", 1, true);

        /* Once the port is free, the next sync binds it. */
        close(f.hold[0]);
        f.hold[0] = -1;
        CHECK(SYNC(f.h, svcs, 2) == 0);
        CHECK(hcnp_count(f.h) == 2);
        check_get(f.l, "127.0.0.1", p1, 200, "ns", "blocked", 1, true);
        fixture_done(&f);
}

static void test_addresses(void) {
        struct fixture f;
        struct inet_addr two[] = {addr("127.0.0.1"), addr("127.0.0.2"), addr("127.0.0.2")};
        unsigned long inode;

        fixture_init(&f);
        int port = f.port[0];
        struct hcnp_service svc = {"ns", "multi", (uint16_t) port, 1};
        CHECK(SYNC(f.h, &svc, 1) == 0);
        CHECK(refused(f.l, "127.0.0.2", port));
        inode = listen_inode("127.0.0.1", port);

        /* A new address is bound and the old one's socket kept; an address
         * given twice is bound once. */
        CHECK(hcnp_sync(f.h, &svc, 1, two, 3) == 0);
        CHECK(listen_inode("127.0.0.1", port) == inode);
        check_get(f.l, "127.0.0.1", port, 200, "ns", "multi", 1, true);
        check_get(f.l, "127.0.0.2", port, 200, "ns", "multi", 1, true);

        /* An address no longer given is closed. */
        CHECK(hcnp_sync(f.h, &svc, 1, &two[1], 1) == 0);
        CHECK(refused(f.l, "127.0.0.1", port));
        check_get(f.l, "127.0.0.2", port, 200, "ns", "multi", 1, true);
        CHECK(hcnp_count(f.h) == 1);
        fixture_done(&f);
}

/* No addresses: every address, both families, one socket. Run in a network
 * namespace of its own, whose only interface is its loopback. */
static void wildcard_in_netns(void) {
        struct sockaddr_in6 v6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
        struct fixture f;
        int fd, before = test_failed_checks;    /* inherited */

        fixture_init(&f);
        int port = f.port[0];
        struct hcnp_service svc = {"ns", "any", (uint16_t) port, 1};
        CHECK(hcnp_sync(f.h, &svc, 1, NULL, 0) == 0);
        check_get(f.l, "127.0.0.1", port, 200, "ns", "any", 1, true);
        check_get(f.l, "127.0.0.2", port, 200, "ns", "any", 1, true);
        fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && bind(fd, (struct sockaddr *) &v6, sizeof v6) == 0)     /* ::1 is there */
                check_get(f.l, "::1", port, 200, "ns", "any", 1, true);
        close(fd);

        /* Then one address: the wildcard socket must close first, or
         * 127.0.0.1 could not be bound. */
        CHECK(SYNC(f.h, &svc, 1) == 0);
        check_get(f.l, "127.0.0.1", port, 200, "ns", "any", 1, true);
        CHECK(refused(f.l, "127.0.0.2", port));
        fixture_done(&f);
        _exit(test_failed_checks != before ? 1 : 0);
}

static void test_wildcard(void) {
        int status = 0;
        pid_t pid;

        fflush(NULL);
        if ((pid = fork()) == 0) {
                if (test_netns_enter() < 0)
                        _exit(77);
                wildcard_in_netns();
        }
        waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
                printf("%s: no network namespace here, skipping test_wildcard\n", __FILE__);
                return;
        }
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void) {
        lo = addr("127.0.0.1");
        TEST_RUN(test_answer);
        TEST_RUN(test_add_remove);
        TEST_RUN(test_update_keeps_socket);
        TEST_RUN(test_same_port);
        TEST_RUN(test_port_in_use);
        TEST_RUN(test_addresses);
        TEST_RUN(test_wildcard);
        TEST_DONE();
}
