/* SPDX-License-Identifier: Apache-2.0 */
/* kube/transport: GETs on the event loop against a local HTTP server
 * (http/mhd on the same loop, 127.0.0.1, no root): the body and status as
 * served, the end of the headers, a transfer the data callback stops, a
 * connection refused, a request freed before it ends; URL parameters
 * escaped so that the server reads them back as sent; the host label; a
 * Retry-After header, as seconds or as an HTTP date. */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ev/ev.h"
#include "http/mhd.h"
#include "kube/kubeconfig.h"
#include "kube/transport.h"
#include "test.h"
#include "util/buf.h"
#include "util/inet.h"

/* ---- the server ---------------------------------------------------------- */

struct served {
        char path[128];
        char args[8][2][128];
        size_t n_args;
};

static void record_arg(void *userdata, const char *key, const char *value) {
        struct served *s = userdata;

        if (s->n_args < 8) {
                snprintf(s->args[s->n_args][0], sizeof s->args[0][0], "%s", key);
                snprintf(s->args[s->n_args][1], sizeof s->args[0][1], "%s", value ? value : "(null)");
        }
        s->n_args++;
}

/* /status/N answers N with a short body; /retry/VALUE 429 with
 * Retry-After: VALUE; /big a body of 256 KiB; anything else 404. */
static void handle(void *userdata, const struct mhd_request *req, struct mhd_reply *reply) {
        struct served *s = userdata;
        const char *path = mhd_request_path(req);

        snprintf(s->path, sizeof s->path, "%s", path);
        s->n_args = 0;
        mhd_request_foreach_arg(req, record_arg, s);
        if (strncmp(path, "/status/", 8) == 0) {
                reply->status = (unsigned) atoi(path + 8);
                buf_printf(&reply->body, "{\"code\":%u}\n", reply->status);
        } else if (strncmp(path, "/retry/", 7) == 0) {
                reply->status = 429;
                mhd_reply_add_header(reply, "Retry-After", path + 7);
        } else if (strcmp(path, "/big") == 0) {
                for (int i = 0; i < 256 * 1024 / 64; i++)
                        buf_printf(&reply->body, "%063d\n", i);
        } else {
                mhd_reply_not_found(reply);
        }
}

/* ---- the client side ------------------------------------------------------ */

struct got {
        struct ev_loop *loop;
        struct buf body;
        int headers_done, done;
        enum kube_request_end end;
        char error[256];
        long status_at_done;
        int64_t retry_after;
        struct kube_request *req;
        bool stop_data;                 /* the data callback stops the transfer */
};

static bool on_data(void *userdata, const char *data, size_t n) {
        struct got *g = userdata;

        buf_put(&g->body, data, n);
        return !g->stop_data;
}

static void on_headers(void *userdata) {
        struct got *g = userdata;

        g->headers_done++;
}

static void on_done(void *userdata, enum kube_request_end end, const char *error) {
        struct got *g = userdata;

        g->done++;
        g->end = end;
        snprintf(g->error, sizeof g->error, "%s", error ? error : "");
        g->status_at_done = kube_request_status(g->req);
        g->retry_after = kube_request_retry_after(g->req);
        g->req = kube_request_free(g->req);
        ev_stop(g->loop);
}

static const struct kube_request_ops ops = {.data = on_data, .headers_done = on_headers, .done = on_done};
static const struct kube_request_ops ops_no_headers = {.data = on_data, .done = on_done};

static void on_deadline(struct ev_loop *l, void *userdata) {
        (void) userdata;
        ev_stop(l);
}

/* Runs the loop until the request is done, or 10 s at most (a hang fails
 * the checks after it rather than the whole run). */
static void run(struct ev_loop *l) {
        struct ev_timer *deadline = ev_timer_add(l, 10000, on_deadline, NULL);

        CHECK(ev_run(l) == 0);
        ev_timer_cancel(l, deadline);
}

struct fixture {
        struct ev_loop *loop;
        struct mhd_server *server;
        struct served served;
        struct kube_conn conn;
        struct kube_transport *t;
        char base[64];
};

static bool setup(struct fixture *f) {
        static const struct mhd_limits limits = {.connections = 8, .per_client = 8, .wait_ms = 10000};
        struct inet_addr a;

        memset(f, 0, sizeof *f);
        f->loop = ev_loop_new();
        if (!f->loop || inet_addr_parse("127.0.0.1", &a) < 0 ||
            mhd_server_new(f->loop, "test", &a, 0, &limits, 0, handle, &f->served, &f->server) < 0)
                return false;
        snprintf(f->base, sizeof f->base, "http://127.0.0.1:%u", mhd_server_port(f->server));
        f->conn.server = f->base;
        f->conn.token = "not-checked";
        return kube_transport_new(f->loop, &f->conn, &f->t) == 0;
}

static void teardown(struct fixture *f) {
        kube_transport_free(f->t);
        mhd_server_free(f->server);
        ev_loop_free(f->loop);
}

static void get(struct fixture *f, struct got *g, const char *path, const struct kube_request_ops *o) {
        struct buf url = BUF_INIT;

        g->loop = f->loop;
        buf_printf(&url, "%s%s", f->base, path);
        CHECK(kube_request_start(f->t, url.data, 5, o, g, &g->req) == 0);
        buf_done(&url);
        if (g->req)
                run(f->loop);
}

/* ---- tests ----------------------------------------------------------------- */

static void test_status_and_body(void) {
        struct fixture f;
        struct got g = {.body = BUF_INIT};

        CHECK(setup(&f));
        CHECK_STREQ(kube_transport_server(f.t), f.base);
        CHECK_STREQ(kube_transport_host(f.t), f.base + strlen("http://"));

        get(&f, &g, "/status/200", &ops);
        CHECK(g.done == 1 && g.end == KUBE_REQUEST_COMPLETE && g.error[0] == '\0');
        CHECK(g.status_at_done == 200 && g.headers_done == 1);
        CHECK_STREQ(g.body.data, "{\"code\":200}\n");
        CHECK_STREQ(f.served.path, "/status/200");

        /* An error status is a complete response too: what it means is the
         * caller's. */
        buf_clear(&g.body);
        g.done = g.headers_done = 0;
        get(&f, &g, "/status/410", &ops_no_headers);
        CHECK(g.done == 1 && g.end == KUBE_REQUEST_COMPLETE && g.status_at_done == 410);
        CHECK(g.headers_done == 0);
        CHECK_STREQ(g.body.data, "{\"code\":410}\n");

        /* A large body arrives whole, in however many chunks. */
        buf_clear(&g.body);
        g.done = 0;
        get(&f, &g, "/big", &ops);
        CHECK(g.done == 1 && g.end == KUBE_REQUEST_COMPLETE && g.body.len == 256 * 1024);
        char last[65];
        snprintf(last, sizeof last, "%063d\n", 256 * 1024 / 64 - 1);
        CHECK(g.body.len > 64 && memcmp(g.body.data + g.body.len - 64, last, 64) == 0);
        buf_done(&g.body);
        teardown(&f);
}

static void test_aborted_by_data(void) {
        struct fixture f;
        struct got g = {.body = BUF_INIT, .stop_data = true};

        CHECK(setup(&f));
        get(&f, &g, "/big", &ops);
        CHECK(g.done == 1 && g.end == KUBE_REQUEST_ABORTED && g.error[0] != '\0');
        CHECK(g.body.len > 0 && g.body.len < 256 * 1024);
        buf_done(&g.body);
        teardown(&f);
}

static void test_refused(void) {
        struct fixture f;
        struct got g = {.body = BUF_INIT};
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof sa;
        char url[64];
        int fd;

        CHECK(setup(&f));
        /* A port that was just free: bound, then closed without listening. */
        fd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(fd >= 0 && bind(fd, (struct sockaddr *) &sa, sizeof sa) == 0 &&
              getsockname(fd, (struct sockaddr *) &sa, &len) == 0);
        close(fd);
        snprintf(url, sizeof url, "http://127.0.0.1:%u/", ntohs(sa.sin_port));
        g.loop = f.loop;
        CHECK(kube_request_start(f.t, url, 5, &ops, &g, &g.req) == 0);
        run(f.loop);
        CHECK(g.done == 1 && g.end == KUBE_REQUEST_FAILED && g.error[0] != '\0');
        CHECK(g.status_at_done == 0 && g.headers_done == 0 && g.body.len == 0);
        buf_done(&g.body);
        teardown(&f);
}

static void test_freed_before_done(void) {
        struct fixture f;
        struct got g = {.body = BUF_INIT};
        struct buf url = BUF_INIT;

        CHECK(setup(&f));
        buf_printf(&url, "%s/big", f.base);
        g.loop = f.loop;
        CHECK(kube_request_start(f.t, url.data, 5, &ops, &g, &g.req) == 0);
        g.req = kube_request_free(g.req);
        /* Then serve another request to the end: the freed one never calls
         * back, though the loop ran the transfers' sockets and timers. */
        struct got h = {.body = BUF_INIT};
        get(&f, &h, "/status/200", &ops);
        CHECK(h.done == 1 && g.done == 0 && g.body.len == 0);
        buf_done(&url);
        buf_done(&h.body);
        teardown(&f);
}

static void test_url_params(void) {
        static const char *const values[] = {"a b", "x&y=z", "sp\xc3\xa9", "100%", "/?#"};
        struct fixture f;
        struct got g = {.body = BUF_INIT};
        struct buf url = BUF_INIT;

        CHECK(setup(&f));
        buf_printf(&url, "%s/status/200", f.base);
        kube_url_param(&url, "labelSelector", values[0]);
        CHECK(strstr(url.data, "/status/200?labelSelector=a%20b") != NULL);
        for (size_t i = 1; i < 5; i++)
                kube_url_param(&url, "v", values[i]);
        CHECK(strchr(url.data, '&') != NULL && strchr(strchr(url.data, '?') + 1, '?') == NULL);
        g.loop = f.loop;
        CHECK(kube_request_start(f.t, url.data, 5, &ops, &g, &g.req) == 0);
        run(f.loop);
        CHECK(g.done == 1 && f.served.n_args == 5);
        CHECK_STREQ(f.served.args[0][0], "labelSelector");
        for (size_t i = 0; i < 5 && i < f.served.n_args; i++)
                CHECK_STREQ(f.served.args[i][1], values[i]);
        buf_done(&url);
        buf_done(&g.body);
        teardown(&f);
}

/* Retry-After as the server sent it: seconds, an HTTP date, none; and the
 * values themselves. */
static void test_retry_after(void) {
        struct fixture f;
        struct got g = {.body = BUF_INIT};
        char path[128], date[64];
        time_t now = time(NULL);
        struct tm tm;

        CHECK(setup(&f));
        get(&f, &g, "/retry/3", &ops);
        CHECK(g.done == 1 && g.status_at_done == 429 && g.retry_after == 3000);
        gmtime_r(&(time_t) {now + 5}, &tm);
        strftime(date, sizeof date, "%a,%%20%d%%20%b%%20%Y%%20%H:%M:%S%%20GMT", &tm);   /* spaces escaped */
        snprintf(path, sizeof path, "/retry/%s", date);
        g.done = 0;
        get(&f, &g, path, &ops);
        /* The date is read against the clock when the answer is read. */
        CHECK(g.done == 1 && g.retry_after >= 3000 && g.retry_after <= 5000);
        g.done = 0;
        get(&f, &g, "/status/503", &ops);
        CHECK(g.done == 1 && g.retry_after == -1);
        buf_done(&g.body);
        teardown(&f);

        CHECK(kube_retry_after_ms("0", now * 1000) == 0);
        CHECK(kube_retry_after_ms("120", now * 1000) == 120000);
        CHECK(kube_retry_after_ms("99999999999999", now * 1000) > 1000000000);
        CHECK(kube_retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", now * 1000) == 0);         /* past */
        CHECK(kube_retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", 1445412470000) == 10000);
        /* To the millisecond: a date in this very second is still ahead. */
        CHECK(kube_retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", 1445412479400) == 600);
        CHECK(kube_retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", 1445412480000) == 0);
        CHECK(kube_retry_after_ms("-1", now * 1000) == -1);
        CHECK(kube_retry_after_ms("1.5", now * 1000) == -1);
        CHECK(kube_retry_after_ms("soon", now * 1000) == -1);
        CHECK(kube_retry_after_ms("", now * 1000) == -1);
        CHECK(kube_retry_after_ms(NULL, now) == -1);
}

static void test_host_of(void) {
        static const struct {
                const char *server, *host;
        } cases[] = {
                {"https://10.96.0.1:443", "10.96.0.1:443"},
                {"https://10.96.0.1:443/prefix?x=1", "10.96.0.1:443"},
                {"https://api.example", "api.example"},
                {"https://user:pw@api.example:6443/", "api.example:6443"},
                {"https://[fd00::1]:6443", "[fd00::1]:6443"},
                {"api.example:6443", "api.example:6443"},
                {"", ""},
                {NULL, ""},
        };

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                char *h = kube_transport_host_of(cases[i].server);

                CHECK(h != NULL);
                if (h)
                        CHECK_STREQ(h, cases[i].host);
                free(h);
        }
}

int main(void) {
        TEST_RUN(test_status_and_body);
        TEST_RUN(test_aborted_by_data);
        TEST_RUN(test_refused);
        TEST_RUN(test_freed_before_done);
        TEST_RUN(test_url_params);
        TEST_RUN(test_retry_after);
        TEST_RUN(test_host_of);
        TEST_DONE();
}
