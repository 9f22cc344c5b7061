/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * How often the API client may ask (rate.c), on its own so it can be tested
 * with any clock and any dice: client-go's client-side rate limit
 * (clientConnection.qps and .burst) as a token bucket with reservations,
 * and the backoff after consecutive failures.
 */
#include <stdint.h>

struct kube_rate {
        double qps, burst, tokens;
        uint64_t last_ms;
};

/* 0 means client-go's defaults (5 and 10), a negative qps no limit. */
void kube_rate_init(struct kube_rate *r, float qps, int32_t burst, uint64_t now_ms);
/* How long the request taken at now_ms must wait (0: at once); the token
 * is reserved either way. */
uint64_t kube_rate_take(struct kube_rate *r, uint64_t now_ms);

#define KUBE_BACKOFF_BASE_MS 500
#define KUBE_BACKOFF_CAP_MS 30000

/* The wait before the next attempt after `failures` consecutive failures
 * (0 is treated as 1): d = base·2^(failures-1), at most the cap, drawn from
 * [d/2, d) with rand_r(seed). */
uint64_t kube_backoff_ms(unsigned failures, unsigned *seed);
