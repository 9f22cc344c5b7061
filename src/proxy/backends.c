/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The table of proxy modes: the one place that names them. A mode kproxy
 * accepts in its configuration but has no backend for (IPVS) has no row.
 */
#include "proxy/backends.h"

#include <stddef.h>

#include "config/config.h"
#include "proxy/backend.h"
#include "proxy/iptables/backend.h"
#include "proxy/nftables/backend.h"
#include "proxy/socklb/backend.h"
#include "proxy/userspace/backend.h"

static const struct backend_ops *const by_mode[_PROXY_MODE_MAX] = {
        [PROXY_MODE_IPTABLES] = &backend_iptables,
        [PROXY_MODE_NFTABLES] = &backend_nftables,
        [PROXY_MODE_USERSPACE] = &backend_userspace,
};

const struct backend_ops *const backend_all[] = {
        &backend_iptables,
        &backend_nftables,
        &backend_userspace,
        NULL,
};

const struct backend_ops *const backend_companions[] = {
        &backend_socklb,
        NULL,
};

const struct backend_ops *backend_for_mode(int mode) {
        return mode >= 0 && mode < _PROXY_MODE_MAX ? by_mode[mode] : NULL;
}
