/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * --socket-lb: socket load balancing as a backend the sync loop runs
 * beside the mode's (proxy/proxier.h's companion), not a mode of its own.
 * Implements create, destroy, sync, cleanup, render and expose of
 * backend_ops.
 */
struct backend_ops;

extern const struct backend_ops backend_socklb;
