/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the loop: nothing here knows what kproxy does. Timers are few
 * (watch deadlines, backoffs, the sync rate limiter), so they live in a list
 * sorted by deadline; epoll_wait sleeps until the first one.
 */
#include "ev/ev.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/hmap.h"

struct ev_io {
        int fd;
        ev_io_fn fn;
        void *userdata;
        char key[16];           /* the fd as text: the hmap's key */
};

struct ev_timer {
        uint64_t deadline;
        uint64_t seq;           /* FIFO among equal deadlines */
        ev_timer_fn fn;
        void *userdata;
        struct ev_timer *next;
};

struct ev_loop {
        int epfd;
        struct hmap ios;        /* fd text -> struct ev_io */
        struct ev_timer *timers;        /* sorted by (deadline, seq) */
        uint64_t seq;
        uint64_t now;
        ev_hook_fn before_sleep;
        void *before_sleep_data;
        bool stop;
};

struct ev_loop *ev_loop_new(void) {
        struct ev_loop *l = calloc(1, sizeof *l);
        if (!l)
                return NULL;
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (l->epfd < 0) {
                free(l);
                return NULL;
        }
        l->now = clock_mono_ms();
        return l;
}

struct ev_loop *ev_loop_free(struct ev_loop *l) {
        void *v;
        if (!l)
                return NULL;
        for (size_t i = 0; hmap_next(&l->ios, &i, NULL, &v);)
                free(v);
        hmap_done(&l->ios);
        while (l->timers) {
                struct ev_timer *t = l->timers;
                l->timers = t->next;
                free(t);
        }
        close(l->epfd);
        free(l);
        return NULL;
}

static struct ev_io *io_get(struct ev_loop *l, int fd) {
        char key[16];
        snprintf(key, sizeof key, "%d", fd);
        return hmap_get(&l->ios, key);
}

int ev_io_add(struct ev_loop *l, int fd, uint32_t events, ev_io_fn fn, void *userdata) {
        struct ev_io *io = calloc(1, sizeof *io);
        struct epoll_event ev = {.events = events, .data.fd = fd};

        if (!io)
                return -ENOMEM;
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
                int r = -errno;
                free(io);
                return r;
        }
        *io = (struct ev_io) {.fd = fd, .fn = fn, .userdata = userdata};
        snprintf(io->key, sizeof io->key, "%d", fd);
        free(hmap_put(&l->ios, io->key, io));
        return 0;
}

int ev_io_mod(struct ev_loop *l, int fd, uint32_t events) {
        struct epoll_event ev = {.events = events, .data.fd = fd};
        return epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) < 0 ? -errno : 0;
}

int ev_io_del(struct ev_loop *l, int fd) {
        char key[16];
        snprintf(key, sizeof key, "%d", fd);
        struct ev_io *io = hmap_remove(&l->ios, key);
        if (!io)
                return 0;
        free(io);
        /* The fd may already be closed (the kernel then dropped it). */
        if (epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL) < 0 && errno != EBADF && errno != ENOENT)
                return -errno;
        return 0;
}

struct ev_timer *ev_timer_add(struct ev_loop *l, uint64_t after_ms, ev_timer_fn fn, void *userdata) {
        struct ev_timer *t = calloc(1, sizeof *t), **p;
        if (!t)
                return NULL;
        *t = (struct ev_timer) {clock_mono_ms() + after_ms, l->seq++, fn, userdata, NULL};
        for (p = &l->timers; *p && (*p)->deadline <= t->deadline; p = &(*p)->next)
                ;
        t->next = *p;
        *p = t;
        return t;
}

struct ev_timer *ev_timer_cancel(struct ev_loop *l, struct ev_timer *t) {
        if (!t)
                return NULL;
        for (struct ev_timer **p = &l->timers; *p; p = &(*p)->next)
                if (*p == t) {
                        *p = t->next;
                        free(t);
                        break;
                }
        return NULL;
}

void ev_set_before_sleep(struct ev_loop *l, ev_hook_fn fn, void *userdata) {
        l->before_sleep = fn;
        l->before_sleep_data = userdata;
}

uint64_t ev_now_ms(struct ev_loop *l) {
        return l->now;
}

void ev_now_update(struct ev_loop *l) {
        l->now = clock_mono_ms();
}

void ev_stop(struct ev_loop *l) {
        l->stop = true;
}

static void run_timers(struct ev_loop *l) {
        /* Only timers due now; ones added by callbacks wait for the next turn
         * unless already due, which bounds the work per iteration. */
        uint64_t limit = l->seq;
        for (;;) {
                struct ev_timer *t = l->timers;
                if (!t || t->deadline > l->now || t->seq >= limit)
                        return;
                l->timers = t->next;
                ev_timer_fn fn = t->fn;
                void *ud = t->userdata;
                free(t);
                fn(l, ud);
                ev_now_update(l);
        }
}

int ev_run(struct ev_loop *l) {
        struct epoll_event evs[64];

        l->stop = false;
        while (!l->stop) {
                int timeout = -1;
                if (l->before_sleep)
                        l->before_sleep(l, l->before_sleep_data);
                if (l->stop)
                        break;
                ev_now_update(l);
                if (l->timers)
                        timeout = l->timers->deadline <= l->now ? 0 : (int) (l->timers->deadline - l->now);
                int n = epoll_wait(l->epfd, evs, (int) (sizeof evs / sizeof evs[0]), timeout);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                ev_now_update(l);
                for (int i = 0; i < n && !l->stop; i++) {
                        /* Looked up per event: a callback may remove others. */
                        struct ev_io *io = io_get(l, evs[i].data.fd);
                        if (io)
                                io->fn(l, io->fd, evs[i].events, io->userdata);
                }
                run_timers(l);
        }
        return 0;
}
