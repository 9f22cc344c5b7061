/* SPDX-License-Identifier: Apache-2.0 */
#include "apply/sysctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"

int sysctl_write(const char *name, const char *value) {
        char path[256];
        snprintf(path, sizeof path, "/proc/sys/%s", name);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t len = strlen(value);
        if (write(fd, value, len) != (ssize_t) len)
                return -errno;
        return 0;
}
