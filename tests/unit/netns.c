/* SPDX-License-Identifier: Apache-2.0 */
/* A network namespace of the test's own (netns.h). */
#include "netns.h"

#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

int test_netns_enter(void) {
        struct ifreq ifr;
        int fd, r = 0;

        if (unshare(CLONE_NEWNET) < 0)
                return -errno;
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
