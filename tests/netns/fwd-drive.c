/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Runs userspace/fwd-tcp.c for tests/netns/test-fwd.sh:
 *
 *   fwd-drive IP PORT ENDPOINT_IP:PORT...
 *
 * listens on IP:PORT, forwards to the endpoints in turn, prints "ready",
 * and on SIGTERM or SIGINT prints its counters (one key=value line) and
 * exits 0. For measurements, from the environment: FWD_PIPE_SIZE sets the
 * pipe size per direction (fwd_tcp_params.pipe_size), FWD_POOL=N a pool
 * of N spare pipes (userspace/fwd-pipes.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "ev/ev.h"
#include "userspace/fwd-addr.h"
#include "userspace/fwd-pipes.h"
#include "userspace/fwd-tcp.h"
#include "util/inet.h"

struct endpoints {
        struct fwd_addr *a;
        size_t n, next;
};

static int pick(void *userdata, const struct fwd_addr *client, const struct fwd_addr *failed, struct fwd_addr *ret) {
        struct endpoints *e = userdata;
        (void) client;
        (void) failed;

        *ret = e->a[e->next++ % e->n];
        return 0;
}

static void on_signal(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct signalfd_siginfo si;
        (void) events;
        (void) userdata;
        if (read(fd, &si, sizeof si) == sizeof si)
                ev_stop(l);
}

static int parse(const char *ip, const char *port, struct fwd_addr *ret) {
        char *end;
        long p = strtol(port, &end, 10);

        if (*end || p < 0 || p > 65535 || inet_addr_parse(ip, &ret->ip) < 0)
                return -EINVAL;
        ret->port = (uint16_t) p;
        return 0;
}

int main(int argc, char **argv) {
        struct fwd_tcp_params params = {.idle_timeout_ms = 600000, .connect_timeout_ms = 5000};
        struct endpoints e = {0};
        struct fwd_addr listen_at;
        struct fwd_tcp *f = NULL;
        struct fwd_tcp_stats st;
        struct ev_loop *l;
        sigset_t mask;
        int sfd, r;

        if (argc < 4 || parse(argv[1], argv[2], &listen_at) < 0) {
                fprintf(stderr, "usage: fwd-drive IP PORT ENDPOINT_IP:PORT...\n");
                return 2;
        }
        e.a = calloc((size_t) argc, sizeof *e.a);
        for (int i = 3; i < argc; i++) {
                char *colon = strrchr(argv[i], ':');
                if (!colon) {
                        fprintf(stderr, "fwd-drive: %s: not IP:PORT\n", argv[i]);
                        return 2;
                }
                *colon = '\0';
                if (parse(argv[i], colon + 1, &e.a[e.n++]) < 0) {
                        fprintf(stderr, "fwd-drive: %s: not IP:PORT\n", argv[i]);
                        return 2;
                }
        }
        if (getenv("FWD_PIPE_SIZE"))
                params.pipe_size = atoi(getenv("FWD_PIPE_SIZE"));
        if (getenv("FWD_POOL") && atoi(getenv("FWD_POOL")) > 0 &&
            fwd_pipes_new((size_t) atoi(getenv("FWD_POOL")), params.pipe_size, &params.pipes) < 0)
                return 1;
        signal(SIGPIPE, SIG_IGN);
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        l = ev_loop_new();
        sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (!l || sfd < 0 || ev_io_add(l, sfd, EPOLLIN, on_signal, NULL) < 0)
                return 1;
        r = fwd_tcp_new(l, &listen_at, &params, pick, &e, &f);
        if (r < 0) {
                fprintf(stderr, "fwd-drive: listen on %s:%s: %s\n", argv[1], argv[2], strerror(-r));
                return 1;
        }
        printf("ready\n");
        fflush(stdout);
        r = ev_run(l);
        fwd_tcp_get_stats(f, &st);
        printf("accepted=%llu active=%llu to_endpoints=%llu to_clients=%llu accept_errors=%llu "
               "connect_errors=%llu retries=%llu refused=%llu idle_timeouts=%llu resets=%llu\n",
               (unsigned long long) st.accepted, (unsigned long long) st.active,
               (unsigned long long) st.bytes_to_endpoints, (unsigned long long) st.bytes_to_clients,
               (unsigned long long) st.accept_errors, (unsigned long long) st.connect_errors,
               (unsigned long long) st.retries, (unsigned long long) st.refused,
               (unsigned long long) st.idle_timeouts, (unsigned long long) st.resets);
        fflush(stdout);
        fwd_tcp_free(f);
        fwd_pipes_free(params.pipes);
        ev_io_del(l, sfd);
        close(sfd);
        ev_loop_free(l);
        free(e.a);
        return r < 0 ? 1 : 0;
}
