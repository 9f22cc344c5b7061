/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * iptables mode behind the backend interface (proxy/backend.h): the
 * object (struct iptables_mode) over one iptsync per family
 * (proxy/iptables/iptsync.h), the node's set-up and clean-up, render.
 */
struct backend_ops;

extern const struct backend_ops backend_iptables;
