/* SPDX-License-Identifier: Apache-2.0 */
#include "apply/sysctl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"

const char *sysctl_root(void) {
        const char *r = getenv("KPROXY_SYSROOT");
        return r && *r ? r : NULL;
}

static int full_path(const char *root, const char *path, char *out, size_t len) {
        int n = snprintf(out, len, "%s%s", root ? root : "", path);
        return n < 0 || (size_t) n >= len ? -ENAMETOOLONG : 0;
}

int sysctl_read_u64(const char *root, const char *path, uint64_t *ret) {
        char p[4096], text[64];
        int r = full_path(root, path, p, sizeof p);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, text, sizeof text - 1);
        if (n < 0)
                return -errno;
        text[n] = '\0';
        char *end;
        errno = 0;
        unsigned long long v = strtoull(text, &end, 10);
        if (end == text || errno != 0 || text[0] == '-')
                return -EINVAL;
        *ret = v;
        return 0;
}

int sysctl_read_word(const char *root, const char *path, char *out, size_t len) {
        char p[4096];
        int r = full_path(root, path, p, sizeof p);
        if (r < 0)
                return r;
        if (len == 0)
                return -EINVAL;
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, out, len - 1);
        if (n < 0)
                return -errno;
        out[n] = '\0';
        out[strcspn(out, " \t\n")] = '\0';
        return out[0] ? 0 : -EINVAL;
}

int sysctl_write(const char *root, const char *path, const char *value) {
        char p[4096];
        int r = full_path(root, path, p, sizeof p);
        if (r < 0)
                return r;
        /* O_TRUNC for the scratch trees of tests; the kernel's files
         * ignore it. */
        _cleanup_close_ int fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t len = strlen(value);
        ssize_t n = write(fd, value, len);
        if (n < 0)
                return -errno;
        return (size_t) n == len ? 0 : -EIO;
}

int sysctl_write_u64(const char *root, const char *path, uint64_t v) {
        char text[32];
        snprintf(text, sizeof text, "%" PRIu64, v);
        return sysctl_write(root, path, text);
}

bool sysctl_not_permitted(int r) {
        /* EACCES: a 0444 sysctl (nf_conntrack_max outside the initial
         * network namespace); EROFS: a read-only mount; EPERM: no
         * capability; EOPNOTSUPP: the hash size outside the initial network
         * namespace. */
        return r == -EACCES || r == -EROFS || r == -EPERM || r == -EOPNOTSUPP;
}
