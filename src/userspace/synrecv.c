/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One sock_diag dump per family, states SYN_RECV only (the kernel reports
 * its request sockets under that state), kept as local addresses sorted by
 * port. The kernel walks its whole established hash for a dump, so a
 * caller dumps once and asks about each of its listeners.
 */
#include "userspace/synrecv.h"

#include <errno.h>
#include <linux/inet_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "userspace/fwd-addr.h"
#include "util/cleanup.h"
#include "util/sockdiag.h"

struct synrecv {
        struct fwd_addr *v;     /* sorted by port */
        size_t n, cap;
};

struct synrecv *synrecv_free(struct synrecv *s) {
        if (!s)
                return NULL;
        free(s->v);
        free(s);
        return NULL;
}

static void sockdiag_closep(struct sockdiag **d) {
        sockdiag_close(*d);
}

static int synrecv_add(struct synrecv *s, const struct fwd_addr *a) {
        if (s->n == s->cap) {
                size_t cap = s->cap ? s->cap * 2 : 16;
                struct fwd_addr *v = reallocarray(s->v, cap, sizeof *v);
                if (!v)
                        return -ENOMEM;
                s->v = v;
                s->cap = cap;
        }
        s->v[s->n++] = *a;
        return 0;
}

static int each(const struct inet_diag_msg *m, void *ctx) {
        struct synrecv *s = ctx;
        struct fwd_addr a = {0};

        if (m->idiag_state != TCP_SYN_RECV || (m->idiag_family != AF_INET && m->idiag_family != AF_INET6))
                return 0;
        a.ip.family = m->idiag_family == AF_INET ? 4 : 6;
        memcpy(a.ip.bytes, m->id.idiag_src, a.ip.family == 4 ? 4 : 16);
        a.port = ntohs(m->id.idiag_sport);
        return synrecv_add(s, &a);
}

static int cmp_port(const void *x, const void *y) {
        const struct fwd_addr *a = x, *b = y;
        return (a->port > b->port) - (a->port < b->port);
}

int synrecv_dump(struct synrecv **ret) {
        _cleanup_(synrecv_freep) struct synrecv *s = calloc(1, sizeof *s);
        _cleanup_(sockdiag_closep) struct sockdiag *d = NULL;
        int r;

        if (!s)
                return -ENOMEM;
        r = sockdiag_open(&d);
        if (r >= 0)
                r = sockdiag_dump(d, AF_INET, IPPROTO_TCP, 1u << TCP_SYN_RECV, each, s);
        if (r >= 0)
                r = sockdiag_dump(d, AF_INET6, IPPROTO_TCP, 1u << TCP_SYN_RECV, each, s);
        if (r < 0)
                return r;
        if (s->n > 1)
                qsort(s->v, s->n, sizeof *s->v, cmp_port);
        *ret = TAKE_PTR(s);
        return 0;
}

bool synrecv_has(const struct synrecv *s, const struct fwd_addr *local) {
        size_t lo = 0, hi = s->n;
        bool any = inet_addr_is_unspecified(&local->ip);

        while (lo < hi) {               /* the first entry with local's port, if any */
                size_t mid = lo + (hi - lo) / 2;
                if (s->v[mid].port < local->port)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        for (size_t i = lo; i < s->n && s->v[i].port == local->port; i++)
                if (any || inet_addr_equal(&s->v[i].ip, &local->ip))
                        return true;
        return false;
}
