/* SPDX-License-Identifier: Apache-2.0 */
/*
 * golang.org/x/time/rate's reservations: tokens refill at qps up to burst,
 * and a request that finds none reserves the next one, so waiters queue in
 * order of arrival.
 */
#include "kube/rate.h"

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
