/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The event loop: one epoll set, one-shot timers, and a before-sleep hook,
 * in the spirit of Redis's ae. One thread; callbacks never block.
 *
 *  - File descriptors are registered with the EPOLL* events wanted and a
 *    callback that receives the events that fired.
 *  - Timers are one-shot, in milliseconds on CLOCK_MONOTONIC; re-arm from
 *    the callback for periodic work. ev_timer_add() returns a handle that
 *    stays valid until the timer fires or is cancelled.
 *  - The before-sleep hook runs once per iteration, after all ready events
 *    and due timers: the place to do at most one sync per wake-up.
 */
#include <stdbool.h>
#include <stdint.h>

struct ev_loop;
struct ev_timer;

typedef void (*ev_io_fn)(struct ev_loop *l, int fd, uint32_t events, void *userdata);
typedef void (*ev_timer_fn)(struct ev_loop *l, void *userdata);
typedef void (*ev_hook_fn)(struct ev_loop *l, void *userdata);

/* Returns NULL on failure (errno set). */
struct ev_loop *ev_loop_new(void);
struct ev_loop *ev_loop_free(struct ev_loop *l);

/* Returns 0 or -errno. fd must not already be registered (then use mod). */
int ev_io_add(struct ev_loop *l, int fd, uint32_t events, ev_io_fn fn, void *userdata);
int ev_io_mod(struct ev_loop *l, int fd, uint32_t events);
/* Removing an fd that is not registered is not an error. */
int ev_io_del(struct ev_loop *l, int fd);

/* Returns NULL only when out of memory. */
struct ev_timer *ev_timer_add(struct ev_loop *l, uint64_t after_ms, ev_timer_fn fn, void *userdata);
/* Accepts NULL; always returns NULL, for `t = ev_timer_cancel(l, t)`. */
struct ev_timer *ev_timer_cancel(struct ev_loop *l, struct ev_timer *t);

void ev_set_before_sleep(struct ev_loop *l, ev_hook_fn fn, void *userdata);

/* Monotonic milliseconds, cached per iteration (ev_now_update refreshes). */
uint64_t ev_now_ms(struct ev_loop *l);
void ev_now_update(struct ev_loop *l);

/* Runs until ev_stop(). Returns 0, or -errno if epoll_wait fails. */
int ev_run(struct ev_loop *l);
void ev_stop(struct ev_loop *l);
