/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode's hand-over (proxy/userspace/us-restart.c), without root:
 * two processes over a scratch --state-dir. The running one starts
 * listening; a successor (a forked child) announces itself, which turns
 * the running one not ready (replacing(true)); at the successor's first
 * sync it asks, and the running one hands over its sockets (here, a bound
 * UDP socket of a frontend), stops, and tells the core (handed_over); the
 * successor's frontends hold the socket to adopt. A successor that goes
 * away before asking turns the running one ready again (replacing(false)).
 */
#include <errno.h>
#include <stdio.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "ev/ev.h"
#include "proxy/backend.h"
#include "proxy/userspace/us-frontends.h"
#include "proxy/userspace/us-restart.h"
#include "test.h"
#include "userspace/fwd-addr.h"
#include "userspace/handover.h"
#include "userspace/plan.h"
#include "util/inet.h"

struct core {
        struct ev_loop *l;
        int replacing_true, replacing_false, handed_over;
};

static void on_replacing(void *core, bool starting) {
        struct core *c = core;
        if (starting)
                c->replacing_true++;
        else
                c->replacing_false++;
        ev_stop(c->l);
}

static void on_handed_over(void *core) {
        struct core *c = core;
        c->handed_over++;
        ev_stop(c->l);
}

/* The successor: announces itself, then (on "go") takes the sockets at
 * its first sync and exits with how many its frontends hold to adopt. */
static int successor(const char *dir, int go) {
        struct kproxy_config cfg = {.state_dir = (char *) dir};
        struct ev_loop *l = ev_loop_new();
        struct backend_env env = {.loop = l, .config = &cfg};
        struct us_frontends fe;
        struct us_restart rs;
        char c;

        us_frontends_init(&fe, l, NULL, 1000, 1000);
        us_restart_init(&rs, &env, &fe);
        us_restart_announce(&rs);
        if (rs.predecessor_fd < 0)
                return 100;
        if (read(go, &c, 1) != 1)
                return 101;
        if (c == 'q')
                return 0;       /* goes away before asking */
        us_restart_start(&rs);
        int n = (int) fe.n_adopt;
        us_restart_close(&rs);
        us_frontends_done(&fe);
        ev_loop_free(l);
        return n;
}

/* One UDP frontend of the running process, bound on loopback. */
static void one_frontend(struct us_frontends *fe) {
        struct fwd_addr ep = {.port = 53};
        struct userspace_frontend want = {.proto = IPPROTO_UDP, .svc_key = "ns/dns", .port_name = "dns",
                                          .eps = &ep, .n_eps = 1};
        inet_addr_parse("127.0.0.1", &want.addr.ip);
        inet_addr_parse("127.0.0.2", &ep.ip);
        snprintf(want.key, sizeof want.key, "udp 127.0.0.1:0");
        us_frontends_begin(fe);
        CHECK(us_frontends_want(fe, NULL, NULL, 4, &want, true) == 0);
}

static void run(bool leave) {
        char dir[] = "/tmp/kproxy-test-us-restart-XXXXXX";
        int go[2];
        CHECK(mkdtemp(dir) != NULL && pipe(go) == 0);
        struct kproxy_config cfg = {.state_dir = dir};
        struct core core = {.l = ev_loop_new()};
        struct backend_env env = {.loop = core.l, .config = &cfg, .replacing = on_replacing,
                                  .handed_over = on_handed_over, .core = &core};
        struct us_frontends fe;
        struct us_restart rs;

        us_frontends_init(&fe, core.l, NULL, 1000, 1000);
        one_frontend(&fe);
        us_restart_init(&rs, &env, &fe);
        us_restart_start(&rs);
        CHECK(rs.handover_fd >= 0);

        pid_t pid = fork();
        if (pid == 0) {
                close(go[1]);
                _exit(successor(dir, go[0]));
        }
        close(go[0]);
        ev_run(core.l);         /* until the successor announces itself */
        CHECK(core.replacing_true == 1 && !rs.retired);
        CHECK(write(go[1], leave ? "q" : "g", 1) == 1);
        ev_run(core.l);         /* until it asks and is given the sockets, or goes away */
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
        if (leave) {
                CHECK(core.replacing_false == 1 && core.handed_over == 0 && !rs.retired);
                CHECK(WEXITSTATUS(status) == 0);
        } else {
                CHECK(core.handed_over == 1 && rs.retired && rs.handover_fd < 0);
                CHECK(WEXITSTATUS(status) == 1);        /* the one UDP socket, to adopt */
        }
        close(go[1]);
        us_restart_close(&rs);
        us_frontends_done(&fe);
        ev_loop_free(core.l);
        char sock[128];
        snprintf(sock, sizeof sock, "%s/%s", dir, US_HANDOVER_SOCK);
        unlink(sock);
        rmdir(dir);
}

static void test_hand_over(void) {
        run(false);
}

static void test_successor_goes_away(void) {
        run(true);
}

int main(void) {
        TEST_RUN(test_hand_over);
        TEST_RUN(test_successor_goes_away);
        TEST_DONE();
}
