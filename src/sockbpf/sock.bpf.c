/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket load balancing: cgroup hooks that translate a service address to
 * one of its endpoints when a socket connects, before any packet exists,
 * with equal chances as the rules' statistic matches give. An address that
 * is not a service, or a service without endpoints, passes untouched (the
 * packet filter then serves or rejects it as before).
 */
#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>

#include "sockbpf/maps.h"

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, SOCKLB_MAX_SERVICES);
        __uint(map_flags, BPF_F_NO_PREALLOC);
        __type(key, struct socklb_service_key);
        __type(value, struct socklb_service);
} socklb_services SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, SOCKLB_MAX_SLOTS);
        __uint(map_flags, BPF_F_NO_PREALLOC);
        __type(key, struct socklb_slot_key);
        __type(value, struct socklb_backend);
} socklb_slots SEC(".maps");

/* The backend for a service key, or 0 when there is none to go to. */
static __always_inline const struct socklb_backend *pick(const struct socklb_service_key *k) {
        const struct socklb_service *s = bpf_map_lookup_elem(&socklb_services, k);
        struct socklb_slot_key sk;

        if (!s || s->count == 0)
                return 0;
        sk.id = s->id;
        sk.slot = bpf_get_prandom_u32() % s->count;
        return bpf_map_lookup_elem(&socklb_slots, &sk);
}

SEC("cgroup/connect4")
int socklb_connect4(struct bpf_sock_addr *ctx) {
        struct socklb_service_key k = {0};
        const struct socklb_backend *b;

        if (ctx->protocol != IPPROTO_TCP && ctx->protocol != IPPROTO_UDP)
                return 1;
        k.family = 4;
        k.protocol = (__u8) ctx->protocol;
        k.port = (__u16) ctx->user_port;
        k.addr[0] = ctx->user_ip4;
        b = pick(&k);
        if (b) {
                ctx->user_ip4 = b->addr[0];
                ctx->user_port = b->port;
        }
        return 1;       /* allow, translated or not */
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
