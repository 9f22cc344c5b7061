/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Connected UDP sockets whose endpoint has left, closed. A connect()ed UDP
 * socket keeps the endpoint socket load balancing translated it to, as a
 * TCP connection does; when that endpoint leaves its service, the socket
 * would go on sending to it (the socket-LB form of upstream's stale UDP
 * conntrack entries). Each network namespace of the processes in a cgroup
 * (and below) is listed with sock_diag, and the sockets the caller calls
 * stale are destroyed (SOCK_DESTROY): the application's next receive
 * fails with ECONNABORTED (a send with EDESTADDRREQ: the socket is
 * connected to nothing any more), and its new socket is translated afresh.
 */
#include <stddef.h>
#include <stdint.h>

struct sockbpf_addr;

/* 1 when the socket (its cookie, the address it is connected to) is to be
 * closed, 0 when not, -errno. Called from a thread of the reaper's. */
typedef int (*udpreap_stale_fn)(void *ctx, uint64_t cookie, const struct sockbpf_addr *peer);

struct udpreap_stats {
        size_t netns;                   /* network namespaces looked at */
        size_t sockets;                 /* connected UDP sockets in them */
        size_t destroyed;
        size_t hidden;                  /* processes of the cgroup outside kproxy's PID namespace */
};

/* Lists the processes of cgroup_dir (its cgroup.procs, and its
 * subdirectories'), visits each network namespace once, and destroys the
 * connected UDP sockets (IPv4 and IPv6) that stale() says to. A process
 * outside this process's PID namespace is listed as 0 and counted in
 * hidden: run in the host's (hostPID) to see them. Returns 0,
 * or the first -errno (-EPERM: entering a namespace needs CAP_SYS_ADMIN,
 * and seeing the processes the host's PID namespace), ret filled either
 * way with what was done. */
int udpreap_run(const char *cgroup_dir, udpreap_stale_fn stale, void *ctx, struct udpreap_stats *ret);
