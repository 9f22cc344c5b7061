/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The table of proxy modes (proxy/backend.h's interface): the one place
 * that names them, above the modes' folders.
 */
struct backend_ops;

/* The table: the backend of a configured mode, or NULL when kproxy has none
 * (IPVS). */
const struct backend_ops *backend_for_mode(int mode);
/* Every backend, for mode switching and --cleanup: NULL-terminated. */
extern const struct backend_ops *const backend_all[];
/* The backends that run beside a mode rather than as one (--socket-lb:
 * create, destroy, sync, cleanup, expose), for --cleanup: NULL-terminated. */
extern const struct backend_ops *const backend_companions[];
