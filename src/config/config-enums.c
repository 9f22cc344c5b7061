/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration's enums by the names flags and files spell them: one
 * designated-initializer table each, read both ways.
 */
#include "config/config-enums.h"

#include <assert.h>
#include <stddef.h>

#include "config/config-value.h"

static const char *const proxy_mode_table[_PROXY_MODE_MAX] = {
        [PROXY_MODE_IPTABLES] = "iptables",
        [PROXY_MODE_NFTABLES] = "nftables",
        [PROXY_MODE_IPVS] = "ipvs",
        [PROXY_MODE_USERSPACE] = "userspace",
};

static const char *const detect_local_mode_table[_DETECT_LOCAL_MAX] = {
        [DETECT_LOCAL_CLUSTER_CIDR] = "ClusterCIDR",
        [DETECT_LOCAL_NODE_CIDR] = "NodeCIDR",
        [DETECT_LOCAL_BRIDGE_INTERFACE] = "BridgeInterface",
        [DETECT_LOCAL_INTERFACE_NAME_PREFIX] = "InterfaceNamePrefix",
};

const char *proxy_mode_to_string(enum proxy_mode m) {
        if (m < 0 || m >= _PROXY_MODE_MAX)
                return NULL;
        return proxy_mode_table[m];
}

enum proxy_mode proxy_mode_from_string(const char *s) {
        if (!s)
                return _PROXY_MODE_INVALID;
        for (int i = 0; i < _PROXY_MODE_MAX; i++)
                if (streq(s, proxy_mode_table[i]))
                        return (enum proxy_mode) i;
        return _PROXY_MODE_INVALID;
}

const char *detect_local_mode_to_string(enum detect_local_mode m) {
        if (m < 0 || m >= _DETECT_LOCAL_MAX)
                return NULL;
        return detect_local_mode_table[m];
}

enum detect_local_mode detect_local_mode_from_string(const char *s) {
        if (!s)
                return _DETECT_LOCAL_INVALID;
        for (int i = 0; i < _DETECT_LOCAL_MAX; i++)
                if (streq(s, detect_local_mode_table[i]))
                        return (enum detect_local_mode) i;
        return _DETECT_LOCAL_INVALID;
}

const struct config_sync *config_mode_sync(const struct kproxy_config *c) {
        assert(c);
        return c->mode == PROXY_MODE_NFTABLES ? &c->nftables : &c->iptables;
}
