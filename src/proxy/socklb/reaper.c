/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One sweep at a time: kick() arms a zero timer (so every family's sync of
 * a round is in first), the timer starts the sweep's thread, the thread
 * ends by writing an eventfd the loop watches, and the loop joins it and
 * reports. What the thread shares with the loop: the maps' descriptors
 * (sockbpf_stale() reads the kernel's maps, which the loop writes at the
 * same time as any other reader would see them) and its own result fields,
 * read only after the join.
 */
#include "proxy/socklb/reaper.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "ev/ev.h"
#include "sockbpf/sockbpf.h"
#include "sockbpf/udpreap.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/log.h"

struct socklb_reaper {
        struct ev_loop *loop;
        struct sockbpf *bpf;
        char *cgroup;
        int done_fd;                    /* eventfd: the sweep's thread has finished */
        struct ev_timer *soon;
        pthread_t thread;
        bool running, again;
        bool off;                       /* not permitted here: said once */
        bool hidden_said;
        int last_err;                   /* logged when it changes */
        uint64_t closed;
        /* the running sweep's, read after the join */
        struct udpreap_stats st;
        int r;
        double ms;
};

static int stale(void *ctx, uint64_t cookie, const struct sockbpf_addr *peer) {
        struct socklb_reaper *r = ctx;
        return sockbpf_stale(r->bpf, IPPROTO_UDP, cookie, peer);
}

static void *sweep(void *p) {
        struct socklb_reaper *r = p;
        uint64_t one = 1;

        double t0 = clock_mono_s();
        r->r = udpreap_run(r->cgroup, stale, r, &r->st);
        r->ms = (clock_mono_s() - t0) * 1e3;
        if (write(r->done_fd, &one, sizeof one) != sizeof one)
                abort();        /* an eventfd counter cannot overflow at one write per sweep */
        return NULL;
}

static void start(struct ev_loop *l, void *userdata) {
        struct socklb_reaper *r = userdata;
        (void) l;

        r->soon = NULL;
        if (r->off)
                return;
        if (r->running) {
                r->again = true;
                return;
        }
        int e = pthread_create(&r->thread, NULL, sweep, r);
        if (e != 0) {
                log_warning_errno(-e, "Failed to start closing the connected UDP sockets of endpoints that left");
                return;
        }
        r->running = true;
}

static void report(struct socklb_reaper *r) {
        const struct udpreap_stats *st = &r->st;

        r->closed += st->destroyed;
        if (r->r == -EPERM) {
                r->off = true;
                log_warning("Cannot close the connected UDP sockets of endpoints that left: entering the pods' network "
                            "namespaces needs CAP_SYS_ADMIN. Such sockets keep the endpoint they connected to.");
        } else if (r->r < 0 && r->r != r->last_err) {
                log_warning_errno(r->r, "Failed to close the connected UDP sockets of endpoints that left "
                                        "(%zu closed in %zu network namespaces)", st->destroyed, st->netns);
        }
        r->last_err = r->r;
        if (st->hidden > 0 && !r->hidden_said) {
                r->hidden_said = true;
                log_warning("%zu processes of cgroup %s are outside kproxy's PID namespace: their connected UDP "
                            "sockets are not closed when their endpoint leaves (run kproxy with hostPID)",
                            st->hidden, r->cgroup);
        }
        if (st->destroyed > 0)
                log_v(1, "Closed %zu connected UDP sockets whose endpoint left their service", st->destroyed);
        log_v(3, "UDP socket sweep: %zu network namespaces, %zu connected UDP sockets, %zu closed, %.1f ms",
              st->netns, st->sockets, st->destroyed, r->ms);
}

static void on_done(struct ev_loop *l, int fd, uint32_t events, void *userdata) {
        struct socklb_reaper *r = userdata;
        uint64_t n;
        (void) events;

        if (read(fd, &n, sizeof n) != sizeof n || !r->running)
                return;
        pthread_join(r->thread, NULL);
        r->running = false;
        report(r);
        if (r->again) {
                r->again = false;
                start(l, r);
        }
}

int socklb_reaper_new(struct ev_loop *l, struct sockbpf *bpf, const char *cgroup_dir, struct socklb_reaper **ret) {
        struct socklb_reaper *r = xcalloc(1, sizeof *r);
        int e = 0;

        r->loop = l;
        r->bpf = bpf;
        r->cgroup = xstrdup(cgroup_dir);
        r->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (r->done_fd < 0)
                e = -errno;
        else
                e = ev_io_add(l, r->done_fd, EPOLLIN, on_done, r);
        if (e < 0) {
                if (r->done_fd >= 0)
                        close(r->done_fd);
                free(r->cgroup);
                free(r);
                return e;
        }
        *ret = r;
        return 0;
}

struct socklb_reaper *socklb_reaper_free(struct socklb_reaper *r) {
        if (!r)
                return NULL;
        if (r->running)
                pthread_join(r->thread, NULL);
        r->soon = ev_timer_cancel(r->loop, r->soon);
        ev_io_del(r->loop, r->done_fd);
        close(r->done_fd);
        free(r->cgroup);
        free(r);
        return NULL;
}

void socklb_reaper_kick(struct socklb_reaper *r) {
        if (r && !r->off && !r->soon)
                r->soon = ev_timer_add(r->loop, 0, start, r);
}

uint64_t socklb_reaper_closed(const struct socklb_reaper *r) {
        return r ? r->closed : 0;
}
