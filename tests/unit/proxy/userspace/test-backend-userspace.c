/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode's backend (proxy/userspace/backend.c) driven as the sync
 * loop drives it, in a network namespace of its own (unshare): its
 * interface, a service address on it, a real endpoint on loopback. The
 * loop runs in a thread between syncs; the test's clients and the
 * endpoint are blocking sockets in the main thread.
 *
 * A frontend no longer wanted (here: the service's port changed) takes
 * the connections the kernel already queued on its listener and forwards
 * them before it closes, whether it carried connections of its own or
 * none: closing a listener resets what is queued on it. Its old port
 * then refuses, the new one serves.
 *
 * A process that handed its sockets to a successor (the test takes them
 * as one would) stays busy while a UDP datagram it passed on awaits its
 * reply, relays the reply, and is then done.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster.h"
#include "config/config.h"
#include "ev/ev.h"
#include "host/host.h"
#include "host/render-params.h"
#include "model/model.h"
#include "netns.h"
#include "proxy/backend.h"
#include "proxy/backends.h"
#include "render/render.h"
#include "test.h"
#include "userspace/fwd-addr.h"
#include "userspace/handover.h"
#include "util/inet.h"

#define SERVICE_IP "10.96.0.10"
#define ENDPOINT_IP "10.244.1.10"       /* cluster_endpoints(m, svc, 1, 1) */
#define DNS_IP "10.96.0.53"

static void noop_changed(void *core, uint8_t family, const char *why) {
        (void) core, (void) family, (void) why;
}

/* Tells the main thread (core: the write end of a pipe). */
static void on_handed_over(void *core) {
        int *fd = core;
        CHECK(write(*fd, "h", 1) == 1);
}

/* backend_env.replacing, as the core sees it (the loop runs on a thread). */
static int replacing;

static void on_replacing(void *core, bool starting) {
        (void) core;
        __atomic_store_n(&replacing, starting ? 1 : 0, __ATOMIC_SEQ_CST);
}

/* Waits (at most 10 s) for the core to hear replacing == want. */
static bool replacing_is(int want) {
        for (int i = 0; i < 10000 && __atomic_load_n(&replacing, __ATOMIC_SEQ_CST) != want; i++)
                (void) poll(NULL, 0, 1);
        return __atomic_load_n(&replacing, __ATOMIC_SEQ_CST) == want;
}

struct rig {
        struct kproxy_config cfg;
        struct host_facts host;
        struct render_params p;
        struct model *m;
        struct ev_loop *loop;
        const struct backend_ops *ops;
        struct backend *b;
        uint8_t family;
        int endpoint;           /* listening on ENDPOINT_IP:8080 */
        int stop[2];
        int handed[2];          /* on_handed_over() writes a byte */
        char state_dir[64];
        pthread_t thread;
};

static void on_stop(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        (void) fd, (void) events, (void) userdata;
        ev_stop(l);
}

static void *loop_run(void *p) {
        struct rig *r = p;
        CHECK(ev_run(r->loop) == 0);
        return NULL;
}

static void loop_start(struct rig *r) {
        CHECK(pthread_create(&r->thread, NULL, loop_run, r) == 0);
}

static void loop_stop(struct rig *r) {
        char c;
        CHECK(write(r->stop[1], "x", 1) == 1);
        CHECK(pthread_join(r->thread, NULL) == 0);
        CHECK(read(r->stop[0], &c, 1) == 1);
}

static int timed(int fd) {
        const struct timeval tv = {.tv_sec = 10};
        CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
        return fd;
}

static int tcp_socket_at(const char *ip, uint16_t port, bool listening, int *err) {
        struct fwd_addr a = {.port = port};
        struct sockaddr_storage ss;
        socklen_t len;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        CHECK(fd >= 0);
        CHECK(inet_addr_parse(ip, &a.ip) == 0);
        CHECK(fwd_addr_to_sockaddr(&a, &ss, &len) == 0);
        if (listening) {
                const int one = 1;
                CHECK(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
                CHECK(bind(fd, (struct sockaddr *) &ss, len) == 0);
                CHECK(listen(fd, 16) == 0);
                return fd;
        }
        *err = connect(fd, (struct sockaddr *) &ss, len) < 0 ? errno : 0;
        if (*err) {
                close(fd);
                return -1;
        }
        return timed(fd);
}

/* A connection to the service's address and port; errno's value or 0 in
 * *err. */
static int dial(uint16_t port, int *err) {
        return tcp_socket_at(SERVICE_IP, port, false, err);
}

/* The endpoint's next connection (the forwarder's), or -1. */
static int endpoint_accept(struct rig *r) {
        struct pollfd pfd = {.fd = r->endpoint, .events = POLLIN};
        if (poll(&pfd, 1, 10000) != 1)
                return -1;
        int fd = accept4(r->endpoint, NULL, NULL, SOCK_CLOEXEC);
        return fd < 0 ? -1 : timed(fd);
}

/* What was sent from one side arrives on the other, both ways. */
static void check_carries(int client, int ep, const char *what) {
        char buf[64];
        size_t n = strlen(what);
        ssize_t got;

        CHECK(write(client, what, n) == (ssize_t) n);
        got = read(ep, buf, sizeof buf);
        CHECK(got == (ssize_t) n && memcmp(buf, what, n) == 0);
        CHECK(write(ep, "ok", 2) == 2);
        got = read(client, buf, sizeof buf);
        if (got < 0)
                fprintf(stderr, "client read: %s\n", strerror(errno));
        CHECK(got == 2 && memcmp(buf, "ok", 2) == 0);
}

/* The whole model into the backend. */
static void rig_sync(struct rig *r) {
        const struct backend_sync sync = {
                .kind = BACKEND_SYNC_RESYNC, .model = r->m, .params = &r->p, .all_changed = true};
        struct backend_stats st;

        CHECK(r->ops->sync(r->b, r->family, &sync, &st) == 0);
}

/* The service svc-a on port, with one endpoint; synced. */
static void service_at(struct rig *r, int port) {
        const struct cluster_svc s = {.name = "svc-a", .ip = SERVICE_IP, .port = port};

        cluster_service(r->m, &s);
        rig_sync(r);
}

static void rig_init(struct rig *r) {
        memset(r, 0, sizeof *r);
        r->family = 4;
        config_init(&r->cfg);
        r->cfg.mode = PROXY_MODE_USERSPACE;
        CHECK(render_params_init(&r->p, 4, &r->cfg, "node-1", NULL, &r->host, NULL) == 0);
        r->m = model_new();
        cluster_endpoints(r->m, "svc-a", 1, 1);
        r->loop = ev_loop_new();
        CHECK(r->loop);
        CHECK(pipe2(r->stop, O_CLOEXEC) == 0);
        CHECK(ev_io_add(r->loop, r->stop[0], EPOLLIN, on_stop, r) == 0);
        CHECK(pipe2(r->handed, O_CLOEXEC) == 0);
        strcpy(r->state_dir, "/tmp/kproxy-test-us-XXXXXX");
        CHECK(mkdtemp(r->state_dir) != NULL);
        r->cfg.state_dir = strdup(r->state_dir);        /* where a successor finds it */
        r->ops = backend_for_mode(PROXY_MODE_USERSPACE);
        CHECK(r->ops);
        const struct backend_env env = {
                .loop = r->loop, .config = &r->cfg, .host = &r->host, .families = &r->family,
                .n_families = 1, .changed = noop_changed, .handed_over = on_handed_over,
                .replacing = on_replacing, .core = &r->handed[1]};
        CHECK(r->ops->create(&env, &r->b) == 0);
        r->endpoint = tcp_socket_at(ENDPOINT_IP, 8080, true, NULL);
        service_at(r, 80);
}

static void rig_done(struct rig *r) {
        char path[128];

        r->b = r->ops->destroy(r->b);
        ev_io_del(r->loop, r->stop[0]);
        close(r->stop[0]);
        close(r->stop[1]);
        close(r->handed[0]);
        close(r->handed[1]);
        snprintf(path, sizeof path, "%s/userspace.sock", r->state_dir);
        unlink(path);
        CHECK(rmdir(r->state_dir) == 0);
        close(r->endpoint);
        r->loop = ev_loop_free(r->loop);
        model_free(r->m);
        render_params_done(&r->p);
        config_done(&r->cfg);
}

/* After the move: port 80 refuses, port to serves. */
static void check_moved(struct rig *r, int to) {
        int err, c, ep;

        CHECK(dial(80, &err) < 0 && err == ECONNREFUSED);
        c = dial((uint16_t) to, &err);
        CHECK(c >= 0);
        ep = endpoint_accept(r);
        CHECK(ep >= 0);
        if (c >= 0 && ep >= 0)
                check_carries(c, ep, "new port");
        close(c);
        close(ep);
}

/* The frontend never accepted a connection: the one queued is taken at
 * its retirement and forwarded, not reset. */
static void test_idle_frontend_forwards_its_queue(void) {
        struct rig r;
        int err, c, ep;

        rig_init(&r);
        c = dial(80, &err);             /* queued: the loop is not running */
        CHECK(c >= 0);
        service_at(&r, 81);             /* :80 is no longer wanted */
        CHECK(r.ops->busy(r.b) == 1);   /* taken, connecting to the endpoint */
        loop_start(&r);
        ep = endpoint_accept(&r);
        CHECK(ep >= 0);
        if (c >= 0 && ep >= 0)
                check_carries(c, ep, "queued");
        check_moved(&r, 81);
        close(c);
        close(ep);
        loop_stop(&r);
        rig_done(&r);
}

/* The frontend carries a connection: it keeps it, and takes the one
 * queued as well. */
static void test_busy_frontend_forwards_its_queue(void) {
        struct rig r;
        int err, open, queued, ep_open, ep_queued;

        rig_init(&r);
        loop_start(&r);
        open = dial(80, &err);
        CHECK(open >= 0);
        ep_open = endpoint_accept(&r);
        CHECK(ep_open >= 0);
        if (open >= 0 && ep_open >= 0)
                check_carries(open, ep_open, "first");
        loop_stop(&r);
        queued = dial(80, &err);
        CHECK(queued >= 0);
        service_at(&r, 82);
        CHECK(r.ops->busy(r.b) == 2);
        loop_start(&r);
        ep_queued = endpoint_accept(&r);
        CHECK(ep_queued >= 0);
        if (queued >= 0 && ep_queued >= 0)
                check_carries(queued, ep_queued, "queued");
        if (open >= 0 && ep_open >= 0)
                check_carries(open, ep_open, "still open");
        check_moved(&r, 82);
        close(open);
        close(queued);
        close(ep_open);
        close(ep_queued);
        loop_stop(&r);
        rig_done(&r);
}

/* A successor takes the sockets; a datagram passed on before keeps the
 * predecessor busy until its reply is relayed. */
static void test_handed_over_waits_for_udp_replies(void) {
        const struct cluster_svc dns = {.name = "svc-u", .ip = DNS_IP, .port = 53, .udp = true};
        struct handover_sock *socks = NULL;
        struct sockaddr_storage ss, from;
        struct fwd_addr a = {.port = 53};
        socklen_t len, from_len = sizeof from;
        struct pollfd pfd;
        char buf[16], path[128];
        size_t n = 0;
        struct rig r;
        int ep, c;

        rig_init(&r);
        ep = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        CHECK(ep >= 0);
        timed(ep);
        struct fwd_addr ep_at = {.port = 8080};
        CHECK(inet_addr_parse(ENDPOINT_IP, &ep_at.ip) == 0);
        CHECK(fwd_addr_to_sockaddr(&ep_at, &ss, &len) == 0);
        CHECK(bind(ep, (struct sockaddr *) &ss, len) == 0);
        cluster_service(r.m, &dns);
        cluster_udp_endpoints(r.m, "svc-u", 1, 1);
        rig_sync(&r);
        loop_start(&r);

        /* A query passed on, not answered yet. */
        c = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        CHECK(inet_addr_parse(DNS_IP, &a.ip) == 0);
        CHECK(fwd_addr_to_sockaddr(&a, &ss, &len) == 0);
        CHECK(sendto(c, "q", 1, 0, (struct sockaddr *) &ss, len) == 1);
        CHECK(recvfrom(ep, buf, sizeof buf, 0, (struct sockaddr *) &from, &from_len) == 1);

        /* A successor announces itself as it starts (the core makes
         * /healthz not ready) and goes away again: the process serves on. */
        snprintf(path, sizeof path, "%s/userspace.sock", r.state_dir);
        int succ = handover_connect(path);
        CHECK(succ >= 0);
        CHECK(replacing_is(1));
        close(succ);
        CHECK(replacing_is(0));
        /* The next one takes every socket at its first sync; the core
         * hears of it. */
        succ = handover_connect(path);
        CHECK(succ >= 0);
        CHECK(replacing_is(1));
        CHECK(handover_take(succ, 5000, &socks, &n) == 0);
        close(succ);
        CHECK(n == 2);
        pfd = (struct pollfd) {.fd = r.handed[0], .events = POLLIN};
        CHECK(poll(&pfd, 1, 10000) == 1);
        loop_stop(&r);
        CHECK(r.ops->busy(r.b) == 1);
        loop_start(&r);

        /* The reply comes back to the predecessor's session, which
         * relays it from the service address; then it is done. */
        CHECK(sendto(ep, "a", 1, 0, (struct sockaddr *) &from, from_len) == 1);
        pfd = (struct pollfd) {.fd = c, .events = POLLIN};
        CHECK(poll(&pfd, 1, 10000) == 1);
        from_len = sizeof from;
        CHECK(recvfrom(c, buf, sizeof buf, 0, (struct sockaddr *) &from, &from_len) == 1 && buf[0] == 'a');
        CHECK(memcmp(&((struct sockaddr_in *) &from)->sin_addr, a.ip.bytes, 4) == 0);
        loop_stop(&r);
        CHECK(r.ops->busy(r.b) == 0);

        handover_socks_free(socks, n);
        close(c);
        close(ep);
        rig_done(&r);
}

int main(void) {
        int r = test_netns_enter();
        if (r < 0) {
                printf("test-backend-userspace: skipped, a network namespace of its own needs root (%s)\n",
                       strerror(-r));
                return 0;
        }
        /* the endpoint's address, in this namespace only */
        CHECK(system("ip addr add " ENDPOINT_IP "/32 dev lo") == 0);
        TEST_RUN(test_idle_frontend_forwards_its_queue);
        TEST_RUN(test_busy_frontend_forwards_its_queue);
        TEST_RUN(test_handed_over_waits_for_udp_replies);
        TEST_DONE();
}
