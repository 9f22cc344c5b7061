/* SPDX-License-Identifier: Apache-2.0 */
/* kube/client: the reflector against a scripted API server on the same
 * event loop (127.0.0.1, plain HTTP, no root). What it asks for (the first
 * list at resourceVersion "0", later ones not older than the last version
 * or consistent, pages), when it asks (a watch that delivered is opened
 * again at once, however it ended; only consecutive failures back off, and
 * the count starts over; Retry-After is honoured), and what the consumer
 * hears (a non-numeric bookmark, a cut watch and a refused version lose no
 * change; one key from add to delete). Times are the loop's clock, read
 * when the server sees each request. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ev/ev.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"
#include "test.h"
#include "util/buf.h"
#include "util/log.h"

/* ---- the scripted server ------------------------------------------------ */

#define MAX_REQS 64

struct fake;

struct conn {
        struct fake *f;
        struct conn *next;              /* the server's open connections */
        int fd;
        struct buf in;
        bool answered;
};

struct fake {
        struct ev_loop *loop;
        int lfd;
        char base[64];
        char reqs[MAX_REQS][512];       /* request targets, in order */
        uint64_t req_ms[MAX_REQS];      /* when each arrived (loop clock) */
        size_t n_reqs;
        struct conn *conns;             /* open connections */
        struct conn *watch;             /* the last watch stream held open, if any */
        /* The script: answers request n (0-based) for target. */
        void (*answer)(struct fake *f, struct conn *c, size_t n, const char *target);
        int step;                       /* the script's own state */
        char rv[64];                    /* ... the version it serves */
};

static void conn_close(struct conn *c) {
        if (c->f->watch == c)
                c->f->watch = NULL;
        for (struct conn **p = &c->f->conns; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        ev_io_del(c->f->loop, c->fd);
        close(c->fd);
        buf_done(&c->in);
        free(c);
}

static void put_all(int fd, const char *data, size_t n) {
        while (n > 0) {
                ssize_t k = write(fd, data, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return;
                data += k;
                n -= (size_t) k;
        }
}

/* A whole response, then the connection closes. */
static void reply(struct conn *c, unsigned status, const char *headers, const char *body) {
        struct buf b = BUF_INIT;
        buf_printf(&b, "HTTP/1.1 %u X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n%s",
                   status, strlen(body), headers ? headers : "", body);
        put_all(c->fd, b.data, b.len);
        buf_done(&b);
        conn_close(c);
}

static void reply_status(struct conn *c, unsigned code, const char *reason, const char *headers) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":\"%s\",\"code\":%u,"
                 "\"message\":\"scripted %u\"}",
                 reason, code, code);
        reply(c, code, headers, body);
}

/* A list of the named services (a comma-separated string) at version rv. */
static void reply_list(struct conn *c, const char *rv, const char *cont, const char *names) {
        struct buf b = BUF_INIT;
        buf_printf(&b, "{\"kind\":\"ServiceList\",\"metadata\":{\"resourceVersion\":\"%s\"%s%s%s},\"items\":[", rv,
                   cont ? ",\"continue\":\"" : "", cont ? cont : "", cont ? "\"" : "");
        for (const char *p = names; *p;) {
                size_t n = strcspn(p, ",");
                buf_printf(&b, "%s{\"metadata\":{\"name\":\"%.*s\",\"namespace\":\"ns\"}}", p == names ? "" : ",",
                           (int) n, p);
                p += n + (p[n] == ',');
        }
        buf_puts(&b, "]}");
        reply(c, 200, NULL, b.data);
        buf_done(&b);
}

static void stream_start(struct conn *c) {
        static const char h[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
        put_all(c->fd, h, sizeof h - 1);
        c->f->watch = c;
}

static void stream_line(struct fake *f, const char *line) {
        struct buf b = BUF_INIT;
        if (!f->watch)
                return;
        buf_printf(&b, "%zx\r\n%s\n\r\n", strlen(line) + 1, line);
        put_all(f->watch->fd, b.data, b.len);
        buf_done(&b);
}

static void stream_event(struct fake *f, const char *type, const char *name, const char *rv) {
        char line[256];
        snprintf(line, sizeof line,
                 "{\"type\":\"%s\",\"object\":{\"kind\":\"Service\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\","
                 "\"resourceVersion\":\"%s\"}}}",
                 type, name, rv);
        stream_line(f, line);
}

/* rv is JSON: "\"x\"", "12", "\"\"". */
static void stream_bookmark(struct fake *f, const char *rv_json) {
        char line[256];
        snprintf(line, sizeof line, "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Service\",\"metadata\":{\"resourceVersion\":%s}}}",
                 rv_json);
        stream_line(f, line);
}

/* Clean: the terminating chunk, as after timeoutSeconds; else cut. */
static void stream_end(struct fake *f, bool clean) {
        if (!f->watch)
                return;
        if (clean)
                put_all(f->watch->fd, "0\r\n\r\n", 5);
        conn_close(f->watch);
}

static void on_conn(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct conn *c = userdata;
        char tmp[4096];
        ssize_t n = read(fd, tmp, sizeof tmp);
        (void) events;

        if (n <= 0) {
                conn_close(c);
                return;
        }
        buf_put(&c->in, tmp, (size_t) n);
        if (c->answered || !strstr(c->in.data, "\r\n\r\n"))
                return;
        c->answered = true;
        struct fake *f = c->f;
        char target[512] = "";
        sscanf(c->in.data, "GET %511s", target);
        ev_now_update(l);
        size_t k = f->n_reqs++;
        if (k < MAX_REQS) {
                snprintf(f->reqs[k], sizeof f->reqs[k], "%s", target);
                f->req_ms[k] = ev_now_ms(l);
        }
        f->answer(f, c, k, target);
}

static void on_accept(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct fake *f = userdata;
        int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        (void) events;

        if (cfd < 0)
                return;
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
                close(cfd);
                return;
        }
        c->f = f;
        c->fd = cfd;
        c->next = f->conns;
        f->conns = c;
        if (ev_io_add(l, cfd, EPOLLIN, on_conn, c) < 0)
                conn_close(c);
}

static bool fake_start(struct fake *f, struct ev_loop *l) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof sa;

        f->loop = l;
        f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *) &sa, sizeof sa) < 0 || listen(f->lfd, 16) < 0 ||
            getsockname(f->lfd, (struct sockaddr *) &sa, &len) < 0)
                return false;
        snprintf(f->base, sizeof f->base, "http://127.0.0.1:%u", ntohs(sa.sin_port));
        return ev_io_add(l, f->lfd, EPOLLIN, on_accept, f) == 0;
}

static void fake_stop(struct fake *f) {
        while (f->conns)
                conn_close(f->conns);
        ev_io_del(f->loop, f->lfd);
        close(f->lfd);
}

/* ---- the consumer --------------------------------------------------------- */

struct heard {
        char log[2048];         /* "U:ns/a S D:ns/b ..." */
        size_t synced;
        char held[16][64];      /* the keys it holds */
        size_t n_held;
};

static void hold(struct heard *h, const char *key, bool on) {
        for (size_t i = 0; i < h->n_held; i++)
                if (strcmp(h->held[i], key) == 0) {
                        if (!on)
                                memmove(h->held[i], h->held[i + 1], (h->n_held-- - i - 1) * sizeof h->held[0]);
                        return;
                }
        if (on && h->n_held < 16)
                snprintf(h->held[h->n_held++], sizeof h->held[0], "%s", key);
}

static void on_event(void *userdata, enum kube_event ev, const char *key, const json_t *obj) {
        struct heard *h = userdata;
        size_t n = strlen(h->log);
        (void) obj;

        if (ev == KUBE_EVENT_SYNCED) {
                h->synced++;
                snprintf(h->log + n, sizeof h->log - n, "S ");
                return;
        }
        snprintf(h->log + n, sizeof h->log - n, "%s:%s ", ev == KUBE_EVENT_UPSERT ? "U" : "D", key);
        hold(h, key, ev == KUBE_EVENT_UPSERT);
}

static void on_keys(void *userdata, void (*each)(const char *key, void *ctx), void *ctx) {
        struct heard *h = userdata;
        char copy[16][64];
        size_t n = h->n_held;
        memcpy(copy, h->held, sizeof copy);
        for (size_t i = 0; i < n; i++)
                each(copy[i], ctx);
}

/* ---- driving the loop ------------------------------------------------------ */

struct until {
        bool (*cond)(struct fake *f, void *arg);
        struct fake *f;
        void *arg;
        bool met;
};

static void check_until(struct ev_loop *l, void *userdata) {
        struct until *u = userdata;
        if (u->cond(u->f, u->arg)) {
                u->met = true;
                ev_stop(l);
        }
}

static void on_deadline(struct ev_loop *l, void *userdata) {
        (void) userdata;
        ev_stop(l);
}

/* Runs the loop until cond holds (checked after each iteration), or
 * timeout_ms. Returns whether it held. */
static bool run_until(struct fake *f, bool (*cond)(struct fake *f, void *arg), void *arg, uint64_t timeout_ms) {
        struct until u = {cond, f, arg, false};
        if (cond(f, arg))
                return true;
        struct ev_timer *t = ev_timer_add(f->loop, timeout_ms, on_deadline, NULL);
        ev_set_before_sleep(f->loop, check_until, &u);
        ev_run(f->loop);
        ev_set_before_sleep(f->loop, NULL, NULL);
        if (u.met)
                ev_timer_cancel(f->loop, t);    /* else it fired, and is gone */
        return u.met;
}

static bool reqs_at_least(struct fake *f, void *arg) {
        return f->n_reqs >= *(size_t *) arg;
}

/* Waits for request n (0-based) to arrive. */
static bool wait_req(struct fake *f, size_t n, uint64_t timeout_ms) {
        size_t want = n + 1;
        bool ok = run_until(f, reqs_at_least, &want, timeout_ms);
        if (!ok)
                fprintf(stderr, "request %zu never came (%zu so far)\n", n, f->n_reqs);
        return ok;
}

static bool watch_open(struct fake *f, void *arg) {
        (void) arg;
        return f->watch != NULL;
}

static bool heard_has(struct fake *f, void *arg) {
        (void) f;
        void **a = arg;
        return strstr(((struct heard *) a[0])->log, a[1]) != NULL;
}

static bool wait_heard(struct fake *f, struct heard *h, const char *what, uint64_t timeout_ms) {
        void *a[2] = {h, (void *) what};
        bool ok = run_until(f, heard_has, a, timeout_ms);
        if (!ok)
                fprintf(stderr, "never heard \"%s\"; heard: %s\n", what, h->log);
        return ok;
}

static uint64_t gap(const struct fake *f, size_t n) {
        return f->req_ms[n] - f->req_ms[n - 1];
}

/* Whether request n came a backoff step of [lo, 2 lo) after request n-1:
 * never sooner, and later by at most the loop's own latency (a request is
 * timed when the server reads it; 60 ms covers a loaded ASan build). */
static bool backoff_step(const struct fake *f, size_t n, uint64_t lo) {
        uint64_t g = gap(f, n);
        if (g >= lo && g < 2 * lo + 60)
                return true;
        fprintf(stderr, "request %zu came %llu ms after the one before, not in [%llu, %llu) ms\n", n,
                (unsigned long long) g, (unsigned long long) lo, (unsigned long long) (2 * lo));
        return false;
}

static bool is_watch(const char *target) {
        return strstr(target, "watch=1") != NULL;
}

/* The value of a query parameter of target ("" when absent). */
static const char *param(const char *target, const char *name, char *out, size_t outlen) {
        char pat[64];
        snprintf(pat, sizeof pat, "%s=", name);
        out[0] = '\0';
        for (const char *p = strchr(target, '?'); p; p = strchr(p + 1, '&'))
                if (strncmp(p + 1, pat, strlen(pat)) == 0) {
                        snprintf(out, outlen, "%.*s", (int) strcspn(p + 1 + strlen(pat), "&"), p + 1 + strlen(pat));
                        break;
                }
        return out;
}

struct fixture {
        struct ev_loop *loop;
        struct fake f;
        struct kube_conn conn;
        struct kube_client *client;
        struct heard heard;
};

static bool setup(struct fixture *x, void (*answer)(struct fake *f, struct conn *c, size_t n, const char *target)) {
        memset(x, 0, sizeof *x);
        x->loop = ev_loop_new();
        if (!x->loop || !fake_start(&x->f, x->loop))
                return false;
        x->f.answer = answer;
        x->conn.server = x->f.base;
        return kube_client_new(x->loop, &x->conn, &x->client) == 0;
}

static void start(struct fixture *x, const char *path) {
        struct kube_watch_opts o = {.path = path, .keys = on_keys};
        CHECK(kube_watch_start(x->client, &o, on_event, &x->heard, NULL) == 0);
}

static void teardown(struct fixture *x) {
        kube_client_free(x->client);
        fake_stop(&x->f);
        ev_loop_free(x->loop);
}

/* ---- tests ------------------------------------------------------------------- */

/* Lists answer with a and the script's version; watches stay open. */
static void answer_plain(struct fake *f, struct conn *c, size_t n, const char *target) {
        (void) n;
        if (is_watch(target))
                stream_start(c);
        else
                reply_list(c, f->rv[0] ? f->rv : "r1", NULL, "a");
}

/* The first list asks for "0", in pages; the watch resumes from the list's
 * version. A watch cut or ended after it delivered is opened again at once,
 * from the last version (a bookmark's included), seven times in a row (the
 * issue saw 0.47 s growing to 19.85 s), with no list between. */
static void test_rewatch_at_once(void) {
        struct fixture x;
        char v[64];

        CHECK(setup(&x, answer_plain));
        snprintf(x.f.rv, sizeof x.f.rv, "opaque-7");
        start(&x, "/api/v1/services");
        CHECK(wait_req(&x.f, 1, 5000) && run_until(&x.f, watch_open, NULL, 5000));
        CHECK_STREQ(param(x.f.reqs[0], "resourceVersion", v, sizeof v), "0");
        CHECK_STREQ(param(x.f.reqs[0], "limit", v, sizeof v), "500");
        CHECK(is_watch(x.f.reqs[1]));
        CHECK_STREQ(param(x.f.reqs[1], "resourceVersion", v, sizeof v), "opaque-7");
        CHECK_STREQ(param(x.f.reqs[1], "allowWatchBookmarks", v, sizeof v), "true");
        CHECK(wait_heard(&x.f, &x.heard, "U:ns/a S ", 1000));

        for (int i = 0; i < 7; i++) {
                char name[16], rv[32], bm[40], heard[32];
                size_t next = x.f.n_reqs;
                snprintf(name, sizeof name, "c%d", i);
                snprintf(rv, sizeof rv, "e%d", i);
                snprintf(bm, sizeof bm, "\"bm-%d\"", i);
                stream_event(&x.f, "MODIFIED", name, rv);
                stream_bookmark(&x.f, bm);
                snprintf(heard, sizeof heard, "U:ns/%s ", name);
                CHECK(wait_heard(&x.f, &x.heard, heard, 2000));
                stream_end(&x.f, i % 2);        /* cut, then clean, ... */
                CHECK(wait_req(&x.f, next, 2000));
                CHECK(is_watch(x.f.reqs[next]));
                snprintf(bm, sizeof bm, "bm-%d", i);
                CHECK_STREQ(param(x.f.reqs[next], "resourceVersion", v, sizeof v), bm);
                CHECK(run_until(&x.f, watch_open, NULL, 2000));
        }
        for (size_t i = 2; i < x.f.n_reqs; i++)
                CHECK(is_watch(x.f.reqs[i]));   /* no relist */
        teardown(&x);
}

/* The reconnects' own delays, from the cut to the next request: well under
 * the first backoff's 250 ms. */
static void test_rewatch_delay(void) {
        struct fixture x;

        CHECK(setup(&x, answer_plain));
        start(&x, "/api/v1/services");
        CHECK(wait_req(&x.f, 1, 5000) && run_until(&x.f, watch_open, NULL, 5000));
        for (int i = 0; i < 5; i++) {
                size_t next = x.f.n_reqs;
                stream_event(&x.f, "ADDED", "z", "z1");
                CHECK(wait_heard(&x.f, &x.heard, "U:ns/z ", 2000));
                ev_now_update(x.loop);
                uint64_t cut = ev_now_ms(x.loop);
                stream_end(&x.f, false);
                CHECK(wait_req(&x.f, next, 2000));
                CHECK(x.f.req_ms[next] - cut < 200);
                CHECK(run_until(&x.f, watch_open, NULL, 2000));
        }
        teardown(&x);
}

/* A bookmark whose version is unusable (empty, a number) is not
 * remembered: the next watch resumes from the last good one. A version the
 * server then refuses (422, as kube-apiserver answers a resourceVersion it
 * cannot parse) makes the reflector list consistently, at once, and the
 * change made meanwhile arrives: never a lost update. */
static void answer_refuse(struct fake *f, struct conn *c, size_t n, const char *target) {
        char v[64];
        (void) f;
        (void) n;
        if (!is_watch(target)) {
                /* After the refusal: a consistent list holds the change. */
                reply_list(c, "r9", NULL, strstr(target, "resourceVersion=") ? "a" : "a,changed");
                return;
        }
        if (strcmp(param(target, "resourceVersion", v, sizeof v), "not-a-number") == 0)
                reply_status(c, 422, "Invalid", NULL);
        else
                stream_start(c);
}

static void test_unusable_and_refused_versions(void) {
        struct fixture x;
        char v[64];

        CHECK(setup(&x, answer_refuse));
        start(&x, "/api/v1/services");
        CHECK(wait_req(&x.f, 1, 5000) && run_until(&x.f, watch_open, NULL, 5000));
        stream_bookmark(&x.f, "\"\"");
        stream_bookmark(&x.f, "12");
        stream_event(&x.f, "ADDED", "b", "");
        CHECK(wait_heard(&x.f, &x.heard, "U:ns/b ", 2000));
        stream_end(&x.f, false);
        CHECK(wait_req(&x.f, 2, 2000));
        CHECK_STREQ(param(x.f.reqs[2], "resourceVersion", v, sizeof v), "r9");
        CHECK(run_until(&x.f, watch_open, NULL, 2000));

        stream_bookmark(&x.f, "\"not-a-number\"");
        stream_event(&x.f, "ADDED", "d", "not-a-number");
        CHECK(wait_heard(&x.f, &x.heard, "U:ns/d ", 2000));
        stream_end(&x.f, false);
        CHECK(wait_heard(&x.f, &x.heard, "U:ns/changed ", 3000));
        CHECK(x.f.n_reqs >= 5);
        CHECK(is_watch(x.f.reqs[3]));
        CHECK_STREQ(param(x.f.reqs[3], "resourceVersion", v, sizeof v), "not-a-number");
        /* The consistent list: no resourceVersion, in pages; at once. */
        CHECK(!is_watch(x.f.reqs[4]));
        CHECK_STREQ(param(x.f.reqs[4], "resourceVersion", v, sizeof v), "");
        CHECK_STREQ(param(x.f.reqs[4], "limit", v, sizeof v), "500");
        CHECK(gap(&x.f, 4) < 200);
        /* What the relist did not list is gone; what it did is there. */
        CHECK(wait_heard(&x.f, &x.heard, "D:ns/b ", 1000));
        CHECK(wait_heard(&x.f, &x.heard, "D:ns/d ", 1000));
        CHECK(wait_req(&x.f, 5, 2000));
        CHECK(is_watch(x.f.reqs[5]));
        CHECK_STREQ(param(x.f.reqs[5], "resourceVersion", v, sizeof v), "r9");
        teardown(&x);
}

/* A 410, as an ERROR event or as the watch's status, relists at once, not
 * older than the last version and whole (the server answered "0" in one
 * piece: it has a watch cache). A second refusal before any watch
 * delivered is a failure: the relist then waits a backoff, so a server
 * that refuses what it just listed is not looped on. */
static void answer_gone(struct fake *f, struct conn *c, size_t n, const char *target) {
        (void) f;
        if (!is_watch(target))
                reply_list(c, n == 0 ? "g1" : n == 2 ? "g2" : "g4", NULL, "a");
        else if (n == 4 || n == 6)
                reply_status(c, 410, "Expired", NULL);
        else
                stream_start(c);
}

static void test_gone_relists_at_once(void) {
        struct fixture x;
        char v[64];

        CHECK(setup(&x, answer_gone));
        start(&x, "/api/v1/services");
        CHECK(wait_req(&x.f, 1, 5000) && run_until(&x.f, watch_open, NULL, 5000));
        stream_line(&x.f, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\","
                          "\"message\":\"too old resource version: 1 (5)\"}}");
        CHECK(wait_req(&x.f, 2, 2000));
        CHECK(!is_watch(x.f.reqs[2]) && gap(&x.f, 2) < 200);
        CHECK_STREQ(param(x.f.reqs[2], "resourceVersion", v, sizeof v), "g1");
        CHECK_STREQ(param(x.f.reqs[2], "limit", v, sizeof v), "");
        /* The next watch delivers a bookmark and is cut; the one after it
         * gets a 410 status: at once again, not older than the bookmark. */
        CHECK(wait_req(&x.f, 3, 2000) && run_until(&x.f, watch_open, NULL, 2000));
        stream_bookmark(&x.f, "\"g3\"");
        stream_event(&x.f, "ADDED", "b", "");
        CHECK(wait_heard(&x.f, &x.heard, "U:ns/b ", 2000));
        stream_end(&x.f, false);
        CHECK(wait_req(&x.f, 5, 2000));
        CHECK(!is_watch(x.f.reqs[5]) && gap(&x.f, 5) < 200);
        CHECK_STREQ(param(x.f.reqs[5], "resourceVersion", v, sizeof v), "g3");
        /* 6: refused at once, before it delivered: the list waits. */
        CHECK(wait_req(&x.f, 8, 3000));
        CHECK(!is_watch(x.f.reqs[7]) && gap(&x.f, 7) >= 250);
        CHECK_STREQ(param(x.f.reqs[7], "resourceVersion", v, sizeof v), "g4");
        CHECK(x.heard.synced == 4);
        teardown(&x);
}

/* A refusal after a watch the server took and then cut is news (the
 * history was compacted meanwhile), not the server refusing what it just
 * listed: it relists at once, even when the cut watch delivered nothing
 * and came after an earlier refusal. */
static void answer_gone_after_cut(struct fake *f, struct conn *c, size_t n, const char *target) {
        (void) f;
        if (!is_watch(target))
                reply_list(c, n == 0 ? "k1" : "k2", NULL, "a");
        else if (n == 1 || n == 4)
                reply_status(c, 410, "Expired", NULL);
        else
                stream_start(c);
}

static void test_gone_after_a_cut_watch(void) {
        struct fixture x;

        CHECK(setup(&x, answer_gone_after_cut));
        start(&x, "/api/v1/services");
        CHECK(wait_req(&x.f, 3, 5000) && run_until(&x.f, watch_open, NULL, 5000));
        CHECK(!is_watch(x.f.reqs[2]) && gap(&x.f, 2) < 200);
        /* Cut before it delivered or lasted: the first such, again at once. */
        stream_end(&x.f, false);
        CHECK(wait_req(&x.f, 5, 3000));
        CHECK(is_watch(x.f.reqs[4]) && gap(&x.f, 4) < 200);
        CHECK(!is_watch(x.f.reqs[5]) && gap(&x.f, 5) < 200);
        teardown(&x);
}

/* A "0" list the server pages (no watch cache) is read page by page; a
 * continue token that expires lists again whole; later lists keep pages
 * (client-go's paginatedResult); a "0" the server refuses falls back to a
 * consistent list. */
static void answer_pages(struct fake *f, struct conn *c, size_t n, const char *target) {
        char v[64];
        (void) f;
        if (is_watch(target)) {
                stream_start(c);
                return;
        }
        switch (n) {
        case 0:
                reply_list(c, "p1", "tok1", "a");
                break;
        case 1:
                CHECK_STREQ(param(target, "continue", v, sizeof v), "tok1");
                CHECK_STREQ(param(target, "resourceVersion", v, sizeof v), "");
                reply_status(c, 410, "Expired", NULL);          /* the token expired */
                break;
        case 2:
                reply_list(c, "p2", "tok2", "a");
                break;
        case 3:
                reply_list(c, "p2", NULL, "b");
                break;
        default:
                reply_list(c, "p3", NULL, "a,b");
                break;
        }
}

static void test_pages(void) {
        struct fixture x;
        char v[64];

        CHECK(setup(&x, answer_pages));
        start(&x, "/api/v1/services");
        CHECK(wait_req(&x.f, 4, 5000));
        /* The expired token: the whole list again, at "0", without a limit. */
        CHECK_STREQ(param(x.f.reqs[2], "resourceVersion", v, sizeof v), "0");
        CHECK_STREQ(param(x.f.reqs[2], "limit", v, sizeof v), "");
        CHECK_STREQ(param(x.f.reqs[3], "continue", v, sizeof v), "tok2");
        CHECK(is_watch(x.f.reqs[4]));
        CHECK(wait_heard(&x.f, &x.heard, "U:ns/b S ", 2000));
        CHECK(run_until(&x.f, watch_open, NULL, 2000));
        /* A 410 relists not older than p2, in pages now. */
        stream_line(&x.f, "{\"type\":\"ERROR\",\"object\":{\"code\":410,\"reason\":\"Expired\"}}");
        CHECK(wait_req(&x.f, 5, 3000));
        CHECK_STREQ(param(x.f.reqs[5], "resourceVersion", v, sizeof v), "p2");
        CHECK_STREQ(param(x.f.reqs[5], "limit", v, sizeof v), "500");
        teardown(&x);
}

static void answer_zero_refused(struct fake *f, struct conn *c, size_t n, const char *target) {
        (void) f;
        if (is_watch(target))
                stream_start(c);
        else if (n == 0)
                reply_status(c, 400, "BadRequest", NULL);
        else
                reply_list(c, "q1", NULL, "a");
}

static void test_zero_refused_falls_back(void) {
        struct fixture x;
        char v[64];

        CHECK(setup(&x, answer_zero_refused));
        start(&x, "/api/v1/services");
        CHECK(wait_req(&x.f, 2, 5000));
        CHECK_STREQ(param(x.f.reqs[0], "resourceVersion", v, sizeof v), "0");
        CHECK_STREQ(param(x.f.reqs[1], "resourceVersion", v, sizeof v), "");
        CHECK(gap(&x.f, 1) < 200);
        CHECK(is_watch(x.f.reqs[2]));
        teardown(&x);
}

/* Consecutive failures back off (500s: [250, 500) ms, then [500, 1000));
 * a watch that delivers resets the count, so the next failure waits the
 * first step again. A watch closed at once without an event is opened
 * again at once; a second in a row waits a backoff of its own, which
 * doubles while watches keep ending so; but the server did serve them, so
 * the 500s before count no more: a 500 after them waits the first step. */
static void answer_fail(struct fake *f, struct conn *c, size_t n, const char *target) {
        if (!is_watch(target))
                reply_list(c, "f1", NULL, "a");
        else if (n == 1 || n == 2 || n == 4 || n == 8 || n == 9)
                reply_status(c, 500, "InternalError", NULL);
        else if (n >= 5 && n <= 7) {
                stream_start(c);                /* 200, then closed with nothing */
                stream_end(f, true);
        } else {
                stream_start(c);
        }
}

static void test_backoff_resets(void) {
        struct fixture x;

        CHECK(setup(&x, answer_fail));
        start(&x, "/api/v1/services");
        CHECK(wait_req(&x.f, 3, 5000) && run_until(&x.f, watch_open, NULL, 5000));
        CHECK(backoff_step(&x.f, 2, 250));
        CHECK(backoff_step(&x.f, 3, 500));
        stream_event(&x.f, "ADDED", "b", "f2");
        CHECK(wait_heard(&x.f, &x.heard, "U:ns/b ", 2000));
        stream_end(&x.f, false);
        /* 4: at once, and a 500; 5: 250-500 ms later (reset); 5, 6 and 7
         * are closed empty: 6 at once, 7 and 8 the short watches' first
         * and second steps; 8 and 9 are 500s: 9 the errors' first step. */
        CHECK(wait_req(&x.f, 10, 6000));
        CHECK(gap(&x.f, 4) < 200);
        CHECK(backoff_step(&x.f, 5, 250));
        CHECK(gap(&x.f, 6) < 200);
        CHECK(backoff_step(&x.f, 7, 250));
        CHECK(backoff_step(&x.f, 8, 500));
        CHECK(backoff_step(&x.f, 9, 250));
        CHECK(backoff_step(&x.f, 10, 500));
        teardown(&x);
}

/* 429 and 503 with Retry-After wait what the server says (seconds or an
 * HTTP date), on watches and lists. */
static void answer_retry_after(struct fake *f, struct conn *c, size_t n, const char *target) {
        (void) f;
        if (n == 0) {
                reply_status(c, 429, "TooManyRequests", "Retry-After: 1\r\n");
        } else if (!is_watch(target)) {
                reply_list(c, "t1", NULL, "a");
        } else if (n == 2) {
                reply_status(c, 503, "ServiceUnavailable", "Retry-After: 1\r\n");
        } else if (n == 3) {
                char h[96], date[64];
                time_t at = time(NULL) + 2;
                struct tm tm;
                gmtime_r(&at, &tm);
                strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
                snprintf(h, sizeof h, "Retry-After: %s\r\n", date);
                reply_status(c, 429, "TooManyRequests", h);
        } else {
                stream_start(c);
        }
}

static void test_retry_after(void) {
        struct fixture x;

        CHECK(setup(&x, answer_retry_after));
        start(&x, "/api/v1/services");
        CHECK(wait_req(&x.f, 4, 8000));
        CHECK(gap(&x.f, 1) >= 1000 && gap(&x.f, 1) < 1200);    /* the list's */
        CHECK(gap(&x.f, 3) >= 1000 && gap(&x.f, 3) < 1200);    /* the watch's: not a backoff */
        /* A date two seconds ahead, at one second's resolution. */
        CHECK(gap(&x.f, 4) >= 1000 && gap(&x.f, 4) < 2200);
        CHECK(run_until(&x.f, watch_open, NULL, 2000));
        teardown(&x);
}

static char *capture_stderr(void (*fn)(void *), void *arg);

/* A Retry-After beyond the backoff's cap (an hour) waits the cap, 30 s:
 * the watch is not asked for again within the second after the refusal,
 * and the wait said at V(2) is the cap. */
static void answer_long_retry(struct fake *f, struct conn *c, size_t n, const char *target) {
        (void) f;
        (void) n;
        if (!is_watch(target))
                reply_list(c, "l1", NULL, "a");
        else
                reply_status(c, 503, "ServiceUnavailable", "Retry-After: 3600\r\n");
}

static void long_retry(void *arg) {
        struct fixture *x = arg;
        size_t want = 3;

        CHECK(wait_req(&x->f, 1, 5000));
        CHECK(!run_until(&x->f, reqs_at_least, &want, 1000));
}

static void test_retry_after_capped(void) {
        struct fixture x;
        int v = log_verbosity;

        CHECK(setup(&x, answer_long_retry));
        log_set_verbosity(2);
        start(&x, "/api/v1/services");
        char *out = capture_stderr(long_retry, &x);
        log_set_verbosity(v);
        CHECK(out && strstr(out, "retrying in 30000 ms as the server asked"));
        if (out && !strstr(out, "retrying in 30000 ms"))
                fprintf(stderr, "logged:\n%s", out);
        free(out);
        teardown(&x);
}

/* A service sent without a namespace is added and deleted under one key. */
static void test_key_without_namespace(void) {
        struct fixture x;

        CHECK(setup(&x, answer_plain));
        start(&x, "/api/v1/services");
        CHECK(wait_req(&x.f, 1, 5000) && run_until(&x.f, watch_open, NULL, 5000));
        stream_line(&x.f, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"bare\",\"resourceVersion\":\"k1\"}}}");
        stream_line(&x.f, "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"bare\",\"namespace\":\"\","
                          "\"resourceVersion\":\"k2\"}}}");
        CHECK(wait_heard(&x.f, &x.heard, "U:bare D:bare ", 2000));
        CHECK(x.heard.n_held == 1);     /* ns/a alone */
        teardown(&x);
}

/* Runs fn with stderr going to a temporary file; returns what it wrote. */
static char *capture_stderr(void (*fn)(void *), void *arg) {
        FILE *tmp = tmpfile();
        int saved = dup(STDERR_FILENO);
        char *out = NULL;
        size_t len = 0;

        fflush(stderr);
        dup2(fileno(tmp), STDERR_FILENO);
        fn(arg);
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        rewind(tmp);
        FILE *m = open_memstream(&out, &len);
        int ch;
        while ((ch = fgetc(tmp)) != EOF)
                fputc(ch, m);
        fclose(m);
        fclose(tmp);
        return out;
}

static void answer_outage(struct fake *f, struct conn *c, size_t n, const char *target) {
        (void) f;
        if (!is_watch(target))
                reply_list(c, "o1", NULL, "a");
        else if (n >= 1 && n <= 3)
                reply_status(c, 500, "InternalError", NULL);
        else
                stream_start(c);
}

static void outage(void *arg) {
        struct fixture *x = arg;
        CHECK(wait_req(&x->f, 4, 5000) && run_until(&x->f, watch_open, NULL, 2000));
        /* The watch's first event: healthy again. */
        stream_bookmark(&x->f, "\"o2\"");
        stream_event(&x->f, "ADDED", "b", "o3");
        CHECK(wait_heard(&x->f, &x->heard, "U:ns/b ", 2000));
}

/* An outage of three failed watches is said twice at V(0): when it began
 * and when it ended; the attempts between are V(2). */
static void test_logged_once(void) {
        struct fixture x;

        CHECK(setup(&x, answer_outage));
        start(&x, "/api/v1/services");
        char *out = capture_stderr(outage, &x);
        const char *p = out ? out : "";
        size_t down = 0, up = 0;
        for (const char *q = p; (q = strstr(q, "API server unreachable since")); q++)
                down++;
        for (const char *q = p; (q = strstr(q, "API server recovered after")); q++)
                up++;
        CHECK(down == 1 && up == 1);
        CHECK(strstr(p, "retrying in") == NULL);        /* V(2) */
        CHECK(strstr(p, "3 failed requests") != NULL);
        if (down != 1 || up != 1)
                fprintf(stderr, "logged:\n%s", p);
        free(out);
        teardown(&x);
}

/* When one reflector finds the server back, the others stop waiting out
 * their backoff and ask at once. */
static void answer_two(struct fake *f, struct conn *c, size_t n, const char *target) {
        (void) n;
        if (!is_watch(target)) {
                reply_list(c, "w1", NULL, "a");
        } else if (strstr(target, "/slow")) {
                /* Fails until the other one is back. */
                if (f->step < 2)
                        reply_status(c, 500, "InternalError", NULL);
                else
                        stream_start(c);
        } else if (f->step < 1) {
                f->step = 1;
                reply_status(c, 500, "InternalError", NULL);
        } else {
                f->step = 2;
                stream_start(c);
        }
}

static void test_recovery_wakes_the_others(void) {
        struct fixture x;
        struct kube_watch_opts o = {.path = "/slow", .keys = on_keys};
        struct heard other = {0};
        size_t slow = 0;

        CHECK(setup(&x, answer_two));
        CHECK(kube_watch_start(x.client, &o, on_event, &other, NULL) == 0);
        /* /slow fails three times: its next try is 1-2 s away. */
        while (slow < 3 && wait_req(&x.f, x.f.n_reqs, 5000))
                slow += is_watch(x.f.reqs[x.f.n_reqs - 1]);
        start(&x, "/api/v1/services");
        /* services: a list, a failed watch, then one that opens. */
        CHECK(run_until(&x.f, watch_open, NULL, 5000));
        size_t before = x.f.n_reqs;
        stream_event(&x.f, "ADDED", "b", "w2");
        CHECK(wait_heard(&x.f, &x.heard, "U:ns/b ", 2000));
        ev_now_update(x.loop);
        uint64_t back = ev_now_ms(x.loop);
        CHECK(wait_req(&x.f, before, 3000));
        CHECK(strstr(x.f.reqs[before], "/slow") != NULL);
        CHECK(x.f.req_ms[before] - back < 200);
        teardown(&x);
}

int main(void) {
        TEST_RUN(test_rewatch_at_once);
        TEST_RUN(test_rewatch_delay);
        TEST_RUN(test_unusable_and_refused_versions);
        TEST_RUN(test_gone_relists_at_once);
        TEST_RUN(test_gone_after_a_cut_watch);
        TEST_RUN(test_pages);
        TEST_RUN(test_zero_refused_falls_back);
        TEST_RUN(test_backoff_resets);
        TEST_RUN(test_retry_after);
        TEST_RUN(test_retry_after_capped);
        TEST_RUN(test_key_without_namespace);
        TEST_RUN(test_logged_once);
        TEST_RUN(test_recovery_wakes_the_others);
        TEST_DONE();
}
