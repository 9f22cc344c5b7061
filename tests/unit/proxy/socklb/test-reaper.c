/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sweep of connected UDP sockets (proxy/socklb/reaper.c) on a real
 * event loop, over a fake of the maps and of the sweep itself
 * (sockbpf-fake.h), so without root or eBPF: a kick sweeps once on its
 * thread and the loop reports what it closed; kicks before it starts are
 * one sweep; a kick during a sweep is one more after it; a sweep that is
 * not permitted turns the sweeps off; freeing waits for a running sweep.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ev/ev.h"
#include "proxy/socklb/reaper.h"
#include "sockbpf-fake.h"
#include "test.h"

#define CGROUP "/sys/fs/cgroup/unified/test"

struct until {
        const struct socklb_reaper *r;
        uint64_t closed;        /* stop once the loop has reported this many closed... */
        int ticks;              /* ...or after this many turns of 1 ms */
};

static void tick(struct ev_loop *l, void *userdata) {
        struct until *u = userdata;
        if ((u->r && socklb_reaper_closed(u->r) >= u->closed) || --u->ticks <= 0)
                ev_stop(l);
        else
                ev_timer_add(l, 1, tick, u);
}

/* Runs the loop until r's reports add up to closed sockets (10 s at most). */
static void run_until_closed(struct ev_loop *l, const struct socklb_reaper *r, uint64_t closed) {
        struct until u = {r, closed, 10000};
        ev_timer_add(l, 1, tick, &u);
        CHECK(ev_run(l) == 0);
}

/* Runs the loop for some turns: a kick's timer (0 ms) fires in the first. */
static void run_turns(struct ev_loop *l, int n) {
        struct until u = {NULL, 0, n};
        ev_timer_add(l, 1, tick, &u);
        CHECK(ev_run(l) == 0);
}

static size_t sweeps_done(void) {
        pthread_mutex_lock(&fake.mu);
        size_t n = fake.sweeps;
        pthread_mutex_unlock(&fake.mu);
        return n;
}

/* A map whose UDP service at 10.96.0.53:53 has one endpoint, 10.244.7.10,
 * and three connected sockets: to it, and to two endpoints that left. */
static struct sockbpf *maps(void) {
        struct sockbpf *s;
        struct sockbpf_addr svc = {.port = 53}, ep = {.port = 8080};
        fake_reset();
        CHECK(sockbpf_open("/unused", &s) == 0);
        inet_addr_parse("10.96.0.53", &svc.ip);
        inet_addr_parse("10.244.7.10", &ep.ip);
        CHECK(sockbpf_set_service(s, IPPROTO_UDP, &svc, &ep, 1, 0) == 0);
        fake_add_socket(1, "10.244.7.10", 8080);
        fake_add_socket(2, "10.244.7.11", 8080);
        fake_add_socket(3, "10.244.7.12", 8080);
        return s;
}

static void test_kick_sweeps_and_counts(void) {
        struct ev_loop *l = ev_loop_new();
        struct sockbpf *s = maps();
        struct socklb_reaper *r;

        CHECK(socklb_reaper_new(l, s, CGROUP, &r) == 0);
        socklb_reaper_kick(NULL);
        CHECK(socklb_reaper_closed(NULL) == 0);
        socklb_reaper_kick(r);
        socklb_reaper_kick(r);          /* before the loop turns: the same sweep */
        run_until_closed(l, r, 2);
        CHECK(sweeps_done() == 1 && socklb_reaper_closed(r) == 2);
        CHECK(!fake.sockets[0].closed && fake.sockets[1].closed && fake.sockets[2].closed);

        fake_add_socket(4, "10.244.7.13", 8080);
        socklb_reaper_kick(r);
        run_until_closed(l, r, 3);
        CHECK(sweeps_done() == 2 && socklb_reaper_closed(r) == 3);
        r = socklb_reaper_free(r);
        sockbpf_close(s);
        ev_loop_free(l);
}

static void test_kick_during_a_sweep_sweeps_again(void) {
        struct ev_loop *l = ev_loop_new();
        struct sockbpf *s = maps();
        struct socklb_reaper *r;

        CHECK(socklb_reaper_new(l, s, CGROUP, &r) == 0);
        fake.hold = true;
        socklb_reaper_kick(r);
        run_turns(l, 1);                /* the sweep starts, and waits */
        fake_wait_sweeping();
        fake_add_socket(4, "10.244.7.13", 8080);        /* only a later sweep sees it */
        socklb_reaper_kick(r);          /* during the sweep: one more after it */
        socklb_reaper_kick(r);
        run_turns(l, 1);
        fake_release();
        run_until_closed(l, r, 3);
        CHECK(sweeps_done() == 2 && socklb_reaper_closed(r) == 3);
        r = socklb_reaper_free(r);
        sockbpf_close(s);
        ev_loop_free(l);
}

static void test_not_permitted_turns_it_off(void) {
        struct ev_loop *l = ev_loop_new();
        struct sockbpf *s = maps();
        struct socklb_reaper *r;

        CHECK(socklb_reaper_new(l, s, CGROUP, &r) == 0);
        fake.sweep_result = -EPERM;
        socklb_reaper_kick(r);
        run_turns(l, 1);
        fake_wait_sweeps(1);
        pthread_mutex_lock(&fake.mu);
        fake.sweep_result = 0;
        pthread_mutex_unlock(&fake.mu);
        /* Whether this kick comes before or after the loop hears of -EPERM,
         * no sweep follows. */
        socklb_reaper_kick(r);
        run_turns(l, 50);
        r = socklb_reaper_free(r);
        CHECK(sweeps_done() == 1);
        CHECK(!fake.sockets[1].closed);
        sockbpf_close(s);
        ev_loop_free(l);
}

static void test_free_waits_for_a_running_sweep(void) {
        struct ev_loop *l = ev_loop_new();
        struct sockbpf *s = maps();
        struct socklb_reaper *r;

        CHECK(socklb_reaper_new(l, s, CGROUP, &r) == 0);
        fake.hold = true;
        socklb_reaper_kick(r);
        run_turns(l, 1);
        fake_wait_sweeping();
        fake_release();                 /* it ends while free() joins it */
        r = socklb_reaper_free(r);
        CHECK(sweeps_done() == 1);
        sockbpf_close(s);
        ev_loop_free(l);
}

int main(void) {
        TEST_RUN(test_kick_sweeps_and_counts);
        TEST_RUN(test_kick_during_a_sweep_sweeps_again);
        TEST_RUN(test_not_permitted_turns_it_off);
        TEST_RUN(test_free_waits_for_a_running_sweep);
        TEST_DONE();
}
