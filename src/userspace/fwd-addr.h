/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * An IP address and port, as the forwarders name clients, service
 * addresses and endpoints, and its conversion to and from the socket API's
 * sockaddr. Text is for logs only.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "util/inet.h"

#define FWD_ADDR_STRLEN (INET_ADDR_STRLEN + 8)  /* "[" addr "]:" port */

struct fwd_addr {
        struct inet_addr ip;
        uint16_t port;          /* host order */
};

/* Fills ret (AF_INET or AF_INET6) and ret_len. Returns 0, or -EAFNOSUPPORT
 * when a->ip has no family. */
int fwd_addr_to_sockaddr(const struct fwd_addr *a, struct sockaddr_storage *ret, socklen_t *ret_len);
/* Reads an AF_INET or AF_INET6 sockaddr of len bytes. Returns 0, or
 * -EAFNOSUPPORT for another family or a short len. */
int fwd_addr_from_sockaddr(const struct sockaddr *sa, socklen_t len, struct fwd_addr *ret);
/* "10.0.0.1:80" or "[fd00::1]:80" into out (FWD_ADDR_STRLEN bytes). */
const char *fwd_addr_format(const struct fwd_addr *a, char *out);
bool fwd_addr_equal(const struct fwd_addr *a, const struct fwd_addr *b);
