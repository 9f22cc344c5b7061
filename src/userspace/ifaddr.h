/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The dummy interface that holds the service addresses in userspace mode
 * (kube-proxy0, as IPVS mode's kube-ipvs0; an "ifb" where the kernel has
 * no dummy driver, see ifaddr.c): each cluster, external and
 * load-balancer IP is a host address on it (IPv4 /32, IPv6 /128, no DAD, no
 * prefix route), so the kernel delivers traffic for it to the local
 * listeners. rtnetlink over libmnl; every call is one request answered
 * inside the kernel's sendmsg(), so none of them waits on the network.
 */
#include <stddef.h>

struct ifaddr;
struct inet_addr;

/* Opens an rtnetlink socket for the interface called name (nothing is
 * created yet). Returns 0, -EINVAL for a name that is empty or longer than
 * IFNAMSIZ-1, or -errno from the socket. */
int ifaddr_open(const char *name, struct ifaddr **ret);
/* Closes the socket; the interface stays. Accepts NULL, returns NULL. */
struct ifaddr *ifaddr_close(struct ifaddr *ia);

/* Creates the interface (kind dummy, else ifb; up) if it is missing,
 * brings it up if it is down. Returns its ifindex (> 0), -EEXIST if an
 * interface of that name exists and is of another kind (kproxy never puts
 * addresses on an interface it does not own), -EOPNOTSUPP if the kernel
 * has neither kind, or -errno. */
int ifaddr_link_ensure(struct ifaddr *ia);
/* Deletes the interface and with it its addresses. Returns 0 also when it
 * does not exist, -EEXIST if it is of another kind, or -errno. */
int ifaddr_link_delete(struct ifaddr *ia);

/* The global-scope addresses on the interface, both families, in the
 * kernel's order, into a newly allocated array (*ret_addrs, NULL when
 * there are none). Returns 0, -ENODEV if the interface does not exist, or
 * -errno. */
int ifaddr_list(struct ifaddr *ia, struct inet_addr **ret_addrs, size_t *ret_n);
/* Adds a as a host address. Returns 0 (also when it is already there),
 * -ENODEV without the interface, -EAFNOSUPPORT for an address without a
 * family, or -errno. */
int ifaddr_add(struct ifaddr *ia, const struct inet_addr *a);
/* Removes a. Returns 0 (also when it is not there), -ENODEV, or -errno. */
int ifaddr_del(struct ifaddr *ia, const struct inet_addr *a);
