/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The token bucket is golang.org/x/time/rate's with reservations: tokens
 * refill at qps up to burst, and a request that finds none reserves the
 * next one, so waiters queue in order of arrival. The backoff is below it.
 */
#include "kube/rate.h"

#include <stdlib.h>

void kube_rate_init(struct kube_rate *r, float qps, int32_t burst, uint64_t now_ms) {
        /* client-go's defaults for 0; a negative qps turns the limit off. */
        r->qps = qps == 0 ? 5 : qps;
        r->burst = burst <= 0 ? 10 : (double) burst;
        r->tokens = r->burst;
        r->last_ms = now_ms;
}

uint64_t kube_rate_take(struct kube_rate *r, uint64_t now_ms) {
        if (r->qps < 0)
                return 0;
        if (now_ms > r->last_ms) {
                r->tokens += (double) (now_ms - r->last_ms) * r->qps / 1000;
                if (r->tokens > r->burst)
                        r->tokens = r->burst;
                r->last_ms = now_ms;
        }
        r->tokens -= 1;
        return r->tokens >= 0 ? 0 : (uint64_t) (-r->tokens * 1000 / r->qps + 0.999);
}

/* Exponential, capped and jittered, as client-go's reflector backs off
 * (0.8 s to 30 s there, drawn from [d, 2d)); kproxy starts lower so that a
 * blip of one or two failed requests costs well under a second, and the
 * jitter keeps the nodes of a cluster from coming back to a restarted API
 * server in lockstep. */
uint64_t kube_backoff_ms(unsigned failures, unsigned *seed) {
        uint64_t d = KUBE_BACKOFF_BASE_MS;
        for (unsigned i = 1; i < failures && d < KUBE_BACKOFF_CAP_MS; i++)
                d *= 2;
        if (d > KUBE_BACKOFF_CAP_MS)
                d = KUBE_BACKOFF_CAP_MS;
        return d / 2 + (uint64_t) rand_r(seed) % (d / 2);
}
