/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * client-go's client-side rate limit (clientConnection.qps and .burst) as a
 * token bucket with reservations, on its own so it can be tested with any
 * clock: how long the request taken at now_ms must wait (0: at once); the
 * token is reserved either way.
 */
#include <stdint.h>

struct kube_rate {
        double qps, burst, tokens;
        uint64_t last_ms;
};

/* 0 means client-go's defaults (5 and 10), a negative qps no limit. */
void kube_rate_init(struct kube_rate *r, float qps, int32_t burst, uint64_t now_ms);
uint64_t kube_rate_take(struct kube_rate *r, uint64_t now_ms);
