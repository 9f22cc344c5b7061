/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The allow-lists of the addresses services claim (model/admit.h), from
 * kproxy's flags (--external-ip-cidrs, --load-balancer-ip-cidrs): what the
 * daemon, render and explain decide with.
 */
struct admit_policy;
struct kproxy_config;

/* Fills ret (release with admit_policy_done()). Returns 0 or -EINVAL (a
 * value the flag's check let through: a bug). */
int admission_from_config(const struct kproxy_config *c, struct admit_policy *ret);
