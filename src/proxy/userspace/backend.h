/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Userspace mode behind the backend interface (proxy/backend.h): a
 * forwarder (src/userspace/) per service port, the addresses it listens
 * on, hand-over to a successor process (docs/userspace.md).
 */
struct backend_ops;

extern const struct backend_ops backend_userspace;
