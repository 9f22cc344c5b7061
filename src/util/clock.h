/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The clocks, read in one place. CLOCK_MONOTONIC decides everything that
 * is timed (timers, backoff, health, sync durations): a stepped wall clock
 * must not change a decision. CLOCK_REALTIME is only for what is printed
 * or exported as a date.
 */
#include <stdint.h>
#include <time.h>

static inline uint64_t clock_mono_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static inline uint64_t clock_mono_ms(void) {
        return clock_mono_ns() / 1000000u;
}

/* Seconds, for durations measured and reported (metrics, logs). */
static inline double clock_mono_s(void) {
        return (double) clock_mono_ns() / 1e9;
}

static inline double clock_wall_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}
