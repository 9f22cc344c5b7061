/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The maps of socket load balancing, shared by the programs (sock.bpf.c)
 * and kproxy (sockbpf.c): what a service address translates to.
 *
 *   services: (family, protocol, port, address) -> (id, count)
 *   slots:    (id, slot)                       -> backend, for slot < count
 *
 * Addresses and ports are in network byte order, as the socket hooks see
 * them; an IPv4 address sits in addr[0], the rest zero. A change writes the
 * slots first and the service's count last, so a connect() never reads a
 * slot that is not written yet.
 */
#include <linux/types.h>

#define SOCKLB_MAX_SERVICES 262144
#define SOCKLB_MAX_SLOTS (SOCKLB_MAX_SERVICES * 4)

struct socklb_service_key {
        __u32 addr[4];
        __u16 port;
        __u8 protocol;          /* IPPROTO_TCP or IPPROTO_UDP */
        __u8 family;            /* 4 or 6 */
};

struct socklb_service {
        __u32 id;               /* names its slots */
        __u32 count;            /* slots in use; 0: not translated */
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
