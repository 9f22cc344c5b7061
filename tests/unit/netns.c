/* SPDX-License-Identifier: Apache-2.0 */
/* A network namespace of the test's own (netns.h). */
#include "netns.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int write_file(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, text, strlen(text));
        int r = n == (ssize_t) strlen(text) ? 0 : n < 0 ? -errno : -EIO;
        close(fd);
        return r;
}

/* Root inside a new user namespace: the caller's ids mapped to 0 (setgroups
 * denied first, as an unprivileged gid map needs). */
static int enter_userns(void) {
        char map[64];
        uid_t uid = geteuid();
        gid_t gid = getegid();
        int r;

        if (unshare(CLONE_NEWUSER) < 0)
                return -errno;
        if ((r = write_file("/proc/self/setgroups", "deny")) < 0)
                return r;
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned) uid);
        if ((r = write_file("/proc/self/uid_map", map)) < 0)
                return r;
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned) gid);
        return write_file("/proc/self/gid_map", map);
}

int test_netns_enter(void) {
        struct ifreq ifr;
        int fd, r = 0;

        if (unshare(CLONE_NEWNET) < 0) {
                if (errno != EPERM || (r = enter_userns()) < 0)
                        return r < 0 ? r : -errno;
                if (unshare(CLONE_NEWNET) < 0)
                        return -errno;
        }
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        memset(&ifr, 0, sizeof ifr);
        strcpy(ifr.ifr_name, "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                r = -errno;
        else {
                ifr.ifr_flags |= IFF_UP;
                if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                        r = -errno;
        }
        close(fd);
        return r;
}
