/* SPDX-License-Identifier: Apache-2.0 */
#include "userspace/fwd-addr.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

int fwd_addr_to_sockaddr(const struct fwd_addr *a, struct sockaddr_storage *ret, socklen_t *ret_len) {
        struct sockaddr_storage ss = {0};

        if (a->ip.family == 4) {
                struct sockaddr_in *sin = (struct sockaddr_in *) &ss;
                sin->sin_family = AF_INET;
                sin->sin_port = htons(a->port);
                memcpy(&sin->sin_addr, a->ip.bytes, 4);
                *ret_len = sizeof *sin;
        } else if (a->ip.family == 6) {
                struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *) &ss;
                sin6->sin6_family = AF_INET6;
                sin6->sin6_port = htons(a->port);
                memcpy(&sin6->sin6_addr, a->ip.bytes, 16);
                *ret_len = sizeof *sin6;
        } else
                return -EAFNOSUPPORT;
        *ret = ss;
        return 0;
}

int fwd_addr_from_sockaddr(const struct sockaddr *sa, socklen_t len, struct fwd_addr *ret) {
        struct fwd_addr a = {0};

        if (sa->sa_family == AF_INET && len >= (socklen_t) sizeof(struct sockaddr_in)) {
                const struct sockaddr_in *sin = (const struct sockaddr_in *) sa;
                a.ip.family = 4;
                memcpy(a.ip.bytes, &sin->sin_addr, 4);
                a.port = ntohs(sin->sin_port);
        } else if (sa->sa_family == AF_INET6 && len >= (socklen_t) sizeof(struct sockaddr_in6)) {
                const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *) sa;
                a.ip.family = 6;
                memcpy(a.ip.bytes, &sin6->sin6_addr, 16);
                a.port = ntohs(sin6->sin6_port);
        } else
                return -EAFNOSUPPORT;
        *ret = a;
        return 0;
}

const char *fwd_addr_format(const struct fwd_addr *a, char *out) {
        char ip[INET_ADDR_STRLEN];

        inet_addr_format(&a->ip, ip);
        snprintf(out, FWD_ADDR_STRLEN, a->ip.family == 6 ? "[%s]:%u" : "%s:%u", ip, (unsigned) a->port);
        return out;
}

bool fwd_addr_equal(const struct fwd_addr *a, const struct fwd_addr *b) {
        return a->port == b->port && inet_addr_equal(&a->ip, &b->ip);
}
