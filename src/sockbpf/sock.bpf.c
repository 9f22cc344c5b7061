/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket load balancing: cgroup hooks that translate a service address to
 * one of its endpoints when a socket connects (or an unconnected UDP socket
 * sends), before any packet exists, with equal chances as the rules'
 * statistic matches give, and ClientIP affinity per network namespace. An
 * address that is not a service, or a service without endpoints, passes
 * untouched: the packet filter then serves or rejects it as before.
 * getpeername() and recvmsg() show the service address, not the endpoint.
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

struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, SOCKLB_MAX_REVNAT);
        __type(key, struct socklb_revnat_key);
        __type(value, struct socklb_backend);
} socklb_revnat SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, SOCKLB_MAX_AFFINITY);
        __type(key, struct socklb_affinity_key);
        __type(value, struct socklb_affinity);
} socklb_affinity SEC(".maps");

/* Translations made, one slot per CPU, summed at scrape time. */
struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, __u64);
} socklb_translations SEC(".maps");

static __always_inline int same_backend(const struct socklb_backend *a, const struct socklb_backend *b) {
        return a->addr[0] == b->addr[0] && a->addr[1] == b->addr[1] && a->addr[2] == b->addr[2] &&
               a->addr[3] == b->addr[3] && a->port == b->port;
}

/* The backend for a service key, or 0 when there is none to go to. */
static __always_inline const struct socklb_backend *pick(struct bpf_sock_addr *ctx,
                                                         const struct socklb_service_key *k) {
        const struct socklb_service *s = bpf_map_lookup_elem(&socklb_services, k);
        struct socklb_affinity_key ak = {0};
        struct socklb_affinity *a = 0;
        const struct socklb_backend *b;
        struct socklb_slot_key sk;
        __u64 now = 0;

        if (!s || s->count == 0)
                return 0;
        sk.id = s->id;
        if (s->affinity_s) {
                ak.netns = bpf_get_netns_cookie(ctx);
                ak.id = s->id;
                now = bpf_ktime_get_ns();
                a = bpf_map_lookup_elem(&socklb_affinity, &ak);
                /* Still within the timeout, and still one of the service's
                 * backends (its slot holds it): the same one again. */
                if (a && now - a->last_ns < (__u64) s->affinity_s * 1000000000ULL) {
                        for (__u32 i = 0; i < 64 && i < s->count; i++) {
                                sk.slot = i;
                                b = bpf_map_lookup_elem(&socklb_slots, &sk);
                                if (b && same_backend(b, &a->backend)) {
                                        a->last_ns = now;
                                        return b;
                                }
                        }
                }
        }
        sk.slot = bpf_get_prandom_u32() % s->count;
        b = bpf_map_lookup_elem(&socklb_slots, &sk);
        if (b && s->affinity_s) {
                struct socklb_affinity v = {.backend = *b, .last_ns = now};
                bpf_map_update_elem(&socklb_affinity, &ak, &v, BPF_ANY);
        }
        return b;
}

static __always_inline void count_translation(void) {
        __u32 zero = 0;
        __u64 *n = bpf_map_lookup_elem(&socklb_translations, &zero);
        if (n)
                (*n)++;
}

/* Remembers the service address for the socket and backend. */
static __always_inline void remember(struct bpf_sock_addr *ctx, const struct socklb_backend *b,
                                     const struct socklb_backend *service) {
        struct socklb_revnat_key rk;

        __builtin_memset(&rk, 0, sizeof rk);
        rk.cookie = bpf_get_socket_cookie(ctx);
        rk.backend = *b;
        bpf_map_update_elem(&socklb_revnat, &rk, service, BPF_ANY);
}

static __always_inline int translate4(struct bpf_sock_addr *ctx) {
        struct socklb_service_key k = {0};
        struct socklb_backend service = {0};
        const struct socklb_backend *b;

        if (ctx->protocol != IPPROTO_TCP && ctx->protocol != IPPROTO_UDP)
                return 1;
        k.family = 4;
        k.protocol = (__u8) ctx->protocol;
        k.port = (__u16) ctx->user_port;
        k.addr[0] = ctx->user_ip4;
        b = pick(ctx, &k);
        if (!b)
                return 1;
        service.addr[0] = k.addr[0];
        service.port = k.port;
        ctx->user_ip4 = b->addr[0];
        ctx->user_port = b->port;
        remember(ctx, b, &service);
        count_translation();
        return 1;
}

static __always_inline int translate6(struct bpf_sock_addr *ctx) {
        struct socklb_service_key k = {0};
        struct socklb_backend service = {0};
        const struct socklb_backend *b;

        if (ctx->protocol != IPPROTO_TCP && ctx->protocol != IPPROTO_UDP)
                return 1;
        k.family = 6;
        k.protocol = (__u8) ctx->protocol;
        k.port = (__u16) ctx->user_port;
        k.addr[0] = ctx->user_ip6[0];
        k.addr[1] = ctx->user_ip6[1];
        k.addr[2] = ctx->user_ip6[2];
        k.addr[3] = ctx->user_ip6[3];
        b = pick(ctx, &k);
        if (!b)
                return 1;
        service.addr[0] = k.addr[0];
        service.addr[1] = k.addr[1];
        service.addr[2] = k.addr[2];
        service.addr[3] = k.addr[3];
        service.port = k.port;
        ctx->user_ip6[0] = b->addr[0];
        ctx->user_ip6[1] = b->addr[1];
        ctx->user_ip6[2] = b->addr[2];
        ctx->user_ip6[3] = b->addr[3];
        ctx->user_port = b->port;
        remember(ctx, b, &service);
        count_translation();
        return 1;
}

/* The peer the application sees: the service address it used. */
static __always_inline int reverse4(struct bpf_sock_addr *ctx) {
        struct socklb_revnat_key rk;
        const struct socklb_backend *s;

        __builtin_memset(&rk, 0, sizeof rk);
        rk.cookie = bpf_get_socket_cookie(ctx);
        rk.backend.addr[0] = ctx->user_ip4;
        rk.backend.port = (__u16) ctx->user_port;
        s = bpf_map_lookup_elem(&socklb_revnat, &rk);
        if (s) {
                ctx->user_ip4 = s->addr[0];
                ctx->user_port = s->port;
        }
        return 1;
}

static __always_inline int reverse6(struct bpf_sock_addr *ctx) {
        struct socklb_revnat_key rk;
        const struct socklb_backend *s;

        __builtin_memset(&rk, 0, sizeof rk);
        rk.cookie = bpf_get_socket_cookie(ctx);
        rk.backend.addr[0] = ctx->user_ip6[0];
        rk.backend.addr[1] = ctx->user_ip6[1];
        rk.backend.addr[2] = ctx->user_ip6[2];
        rk.backend.addr[3] = ctx->user_ip6[3];
        rk.backend.port = (__u16) ctx->user_port;
        s = bpf_map_lookup_elem(&socklb_revnat, &rk);
        if (s) {
                ctx->user_ip6[0] = s->addr[0];
                ctx->user_ip6[1] = s->addr[1];
                ctx->user_ip6[2] = s->addr[2];
                ctx->user_ip6[3] = s->addr[3];
                ctx->user_port = s->port;
        }
        return 1;
}

SEC("cgroup/connect4")
int socklb_connect4(struct bpf_sock_addr *ctx) { return translate4(ctx); }

SEC("cgroup/connect6")
int socklb_connect6(struct bpf_sock_addr *ctx) { return translate6(ctx); }

SEC("cgroup/sendmsg4")
int socklb_sendmsg4(struct bpf_sock_addr *ctx) { return translate4(ctx); }

SEC("cgroup/sendmsg6")
int socklb_sendmsg6(struct bpf_sock_addr *ctx) { return translate6(ctx); }

SEC("cgroup/recvmsg4")
int socklb_recvmsg4(struct bpf_sock_addr *ctx) { return reverse4(ctx); }

SEC("cgroup/recvmsg6")
int socklb_recvmsg6(struct bpf_sock_addr *ctx) { return reverse6(ctx); }

SEC("cgroup/getpeername4")
int socklb_getpeername4(struct bpf_sock_addr *ctx) { return reverse4(ctx); }

SEC("cgroup/getpeername6")
int socklb_getpeername6(struct bpf_sock_addr *ctx) { return reverse6(ctx); }

char LICENSE[] SEC("license") = "Dual BSD/GPL";
