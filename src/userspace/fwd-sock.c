/* SPDX-License-Identifier: Apache-2.0 */
#include "userspace/fwd-sock.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>

#include "util/cleanup.h"

int fwd_sock_open(const struct fwd_addr *addr, int type, int backlog, struct fwd_addr *ret_local) {
        _cleanup_close_ int fd = -1;
        struct sockaddr_storage ss;
        socklen_t len;
        const int one = 1;
        bool stream = type == SOCK_STREAM;
        int r;

        if (type != SOCK_STREAM && type != SOCK_DGRAM)
                return -EINVAL;
        r = fwd_addr_to_sockaddr(addr, &ss, &len);
        if (r < 0)
                return r;
        fd = socket(ss.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, stream ? IPPROTO_TCP : IPPROTO_UDP);
        if (fd < 0)
                return -errno;
        /* SO_REUSEPORT: a successor (restart, rolling update) can bind the
         * same address beside this socket before it closes. */
        if ((stream && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0) ||
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
                return -errno;
        if (ss.ss_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &ss, len) < 0 || (stream && listen(fd, backlog) < 0))
                return -errno;
        len = sizeof ss;
        if (getsockname(fd, (struct sockaddr *) &ss, &len) < 0)
                return -errno;
        r = fwd_addr_from_sockaddr((struct sockaddr *) &ss, len, ret_local);
        if (r < 0)
                return r;
        return TAKE_FD(fd);
}

int fwd_sock_adopt(int fd, int type, struct fwd_addr *ret_local) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int v = 0, flags;
        socklen_t ilen = sizeof v;

        if (fd < 0 || (type != SOCK_STREAM && type != SOCK_DGRAM))
                return -EINVAL;
        if (type == SOCK_STREAM ? getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &ilen) < 0 || !v
                                : getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &ilen) < 0 || v != IPPROTO_UDP)
                return -ENOTSOCK;
        if (getsockname(fd, (struct sockaddr *) &ss, &len) < 0 ||
            fwd_addr_from_sockaddr((struct sockaddr *) &ss, len, ret_local) < 0 ||
            (type == SOCK_DGRAM && ret_local->port == 0))
                return -ENOTSOCK;
        flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
                return -errno;
        return 0;
}
