/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The interface's own names (proxy/backend.h).
 */
#include "proxy/backend.h"

#include <stddef.h>

static const char *const kind_names[_BACKEND_SYNC_KIND_MAX] = {
        [BACKEND_SYNC_PARTIAL] = "partial",
        [BACKEND_SYNC_RESYNC] = "resync",
        [BACKEND_SYNC_FULL] = "full",
};

const char *backend_sync_kind_to_string(enum backend_sync_kind k) {
        return k >= 0 && k < _BACKEND_SYNC_KIND_MAX ? kind_names[k] : NULL;
}
