/* SPDX-License-Identifier: Apache-2.0 */
#include "userspace/fwd-filter.h"

#include <errno.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "util/cleanup.h"

#define PASS UINT32_MAX
#define DROP 0
/* Offsets of the source address from the network header, which a socket
 * filter reaches through SKF_NET_OFF whatever layer its data starts at. */
#define V4_SADDR 12
#define V6_SADDR 8

/* The mask of word w (0-3) of an address with prefix bits, host order. */
static uint32_t word_mask(uint8_t prefix, unsigned w) {
        int bits = (int) prefix - 32 * (int) w;
        if (bits <= 0)
                return 0;
        return bits >= 32 ? UINT32_MAX : ~(UINT32_MAX >> bits);
}

static uint32_t word_of(const struct inet_cidr *c, unsigned w) {
        const uint8_t *b = c->addr.bytes + 4 * w;
        return (uint32_t) b[0] << 24 | (uint32_t) b[1] << 16 | (uint32_t) b[2] << 8 | b[3];
}

/* Appends one CIDR's test: the words its prefix covers, each loaded,
 * masked and compared; all equal: pass; the first that differs skips to
 * the next CIDR's test. */
static void put_cidr(struct sock_filter *p, size_t *n, const struct inet_cidr *c) {
        unsigned words = c->addr.family == 4 ? 1 : 4, used = 0, off = c->addr.family == 4 ? V4_SADDR : V6_SADDR;
        while (used < words && word_mask(c->prefix, used))
                used++;
        /* Three instructions a word, then the pass: a differing word jumps
         * over what is left of them. */
        for (unsigned w = 0; w < used; w++) {
                uint8_t left = (uint8_t) (3 * (used - w - 1) + 1);
                p[(*n)++] = (struct sock_filter) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_NET_OFF + off + 4 * w);
                p[(*n)++] = (struct sock_filter) BPF_STMT(BPF_ALU | BPF_AND | BPF_K, word_mask(c->prefix, w));
                p[(*n)++] = (struct sock_filter) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, word_of(c, w), 0, left);
        }
        p[(*n)++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, PASS);
}

int fwd_filter_sources(int fd, uint8_t family, const struct inet_cidr *allow, size_t n) {
        size_t k = 0, len = 0;

        if (n == 0) {
                int dummy = 0;
                if (setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, &dummy, sizeof dummy) < 0 && errno != ENOENT)
                        return -errno;
                return 0;
        }
        for (size_t i = 0; i < n; i++)
                k += allow[i].addr.family == family;
        if (k > FWD_FILTER_MAX_CIDRS)
                return -E2BIG;
        _cleanup_free_ struct sock_filter *prog = calloc(13 * k + 1, sizeof *prog);
        if (!prog)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (allow[i].addr.family == family)
                        put_cidr(prog, &len, &allow[i]);
        /* No CIDR of the family: nothing passes. */
        prog[len++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, DROP);
        const struct sock_fprog fprog = {.len = (unsigned short) len, .filter = prog};
        if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fprog, sizeof fprog) < 0)
                return -errno;
        return 0;
}
