/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The maps of socket load balancing, shared by the programs (sock.bpf.c)
 * and kproxy (sockbpf.c): what a service address translates to.
 *
 *   services: (family, protocol, port, address) -> (id, count, affinity)
 *   slots:    (id, slot)                        -> backend, for slot < count
 *   revnat:   (socket cookie, backend)          -> service address (LRU),
 *             so getpeername() and recvmsg() show the address the
 *             application used
 *   affinity: (netns cookie, id)                -> backend, time (LRU):
 *             ClientIP affinity, the client being the network namespace
 *
 * Addresses and ports are in network byte order, as the socket hooks see
 * them; an IPv4 address sits in addr[0], the rest zero. A change writes the
 * slots first and the service's count last, so a connect() never reads a
 * slot that is not written yet.
 */
#include <linux/types.h>

#define SOCKLB_MAX_SERVICES 262144
#define SOCKLB_MAX_SLOTS (SOCKLB_MAX_SERVICES * 8)
#define SOCKLB_MAX_REVNAT 262144
#define SOCKLB_MAX_AFFINITY 65536

struct socklb_service_key {
        __u32 addr[4];
        __u16 port;
        __u8 protocol;          /* IPPROTO_TCP or IPPROTO_UDP */
        __u8 family;            /* 4 or 6 */
};

struct socklb_service {
        __u32 id;               /* names its slots */
        __u32 count;            /* slots in use; 0: not translated */
        __u32 affinity_s;       /* ClientIP affinity timeout in seconds; 0: none */
        __u32 pad;
};

struct socklb_slot_key {
        __u32 id;
        __u32 slot;
};

struct socklb_backend {
        __u32 addr[4];
        __u16 port;
        __u16 pad;
};

struct socklb_revnat_key {
        __u64 cookie;           /* the socket's */
        struct socklb_backend backend;
        __u32 pad;              /* explicit: keys are compared bytewise */
};

struct socklb_affinity_key {
        __u64 netns;            /* the client's network namespace cookie */
        __u32 id;
        __u32 pad;
};

struct socklb_affinity {
        struct socklb_backend backend;
        __u64 last_ns;          /* bpf_ktime_get_ns() of the last use */
};
