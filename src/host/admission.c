/* SPDX-License-Identifier: Apache-2.0 */
#include "host/admission.h"

#include "config/config.h"
#include "model/admit.h"

int admission_from_config(const struct kproxy_config *c, struct admit_policy *ret) {
        int r;

        *ret = (struct admit_policy) {0};
        r = admit_policy_set(ret, ADMIT_EXTERNAL_IPS, c->external_ip_cidrs.v, c->external_ip_cidrs.n);
        if (r >= 0)
                r = admit_policy_set(ret, ADMIT_LB_IPS, c->lb_ip_cidrs.v, c->lb_ip_cidrs.n);
        if (r < 0)
                admit_policy_done(ret);
        return r;
}
