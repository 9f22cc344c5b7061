/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Userspace mode and socket load balancing answer from their plan
 * (userspace/plan.h), which is what they serve. Internal to src/explain/.
 */
#include <stdbool.h>

struct explain_ctx;

/* Userspace mode (local_plan false) or socket load balancing (true): the
 * answer from the plan, in c->r, with *ret_found; not found, c->r is left
 * for the caller. Returns 0 or -ENOMEM. */
int explain_plan(struct explain_ctx *c, bool local_plan, bool *ret_found);
