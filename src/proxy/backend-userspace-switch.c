/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode and conntrack, when the node switches between it and a
 * NAT mode. conntrack keeps entries of the mode before, and a client that
 * reuses the port of one has its new connection matched to it: the entry's
 * NAT (or its lack of one) applies, not what the node does now. Each way,
 * the entries that would mislead are deleted once. Only where conntrack is
 * loaded at all: asking would load it.
 */
#include "proxy/backend-userspace.h"

#include <stdlib.h>
#include <unistd.h>

#include "apply/conntrack.h"
#include "util/log.h"

static bool conntrack_loaded(void) {
        return access("/proc/sys/net/netfilter/nf_conntrack_count", F_OK) == 0;
}

/* Into this mode: the other mode's rules go after this mode's first sync
 * (proxy/proxier.c). An entry DNAT-ed by them keeps its binding, which no
 * NAT hook applies any more, and the listener's answer is dropped; so the
 * DNAT-ed entries to the addresses and ports this mode now serves go. */
void userspace_on_nat_flush(struct ev_loop *l, void *userdata) {
        struct backend *b = userdata;
        const char *k;
        void *v;
        (void) l;

        b->nat_flush = NULL;
        if (!conntrack_loaded())
                return;
        struct ct_frontend *cf = calloc(b->frontends.len ? b->frontends.len : 1, sizeof *cf);
        if (!cf)
                return;
        for (size_t f = 0; f < b->env.n_families; f++) {
                uint8_t family = b->env.families[f];
                size_t n = 0;
                for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v);) {
                        const struct frontend *fe = v;
                        if (fe->family == family)
                                cf[n++] = (struct ct_frontend) {.ip = fe->addr.ip, .port = fe->addr.port,
                                                                .node_port = inet_addr_is_unspecified(&fe->addr.ip)};
                }
                int r = conntrack_flush_dnat(family, cf, n);
                if (r < 0)
                        log_warning_errno(r, "Failed to delete IPv%u conntrack entries of the NAT mode before this one",
                                          family);
                else if (r > 0)
                        log_v(2, "Deleted %d IPv%u conntrack entries DNAT-ed by the mode before this one", r, family);
        }
        free(cf);
}

/* Out of it, once its addresses are gone: entries of its own connections,
 * made wherever anything else on the node has conntrack on, or in the
 * instant a NAT mode's table came or went. Not DNAT-ed, such an entry would
 * keep a reused port's new connection from being DNAT-ed, and send it to an
 * address that is no longer local. */
void userspace_flush_own_entries(const struct inet_addr *addrs, size_t n) {
        if (n == 0 || !conntrack_loaded())
                return;
        for (uint8_t family = 4; family <= 6; family += 2) {
                int r = conntrack_flush_unnatted(family, addrs, n);
                if (r < 0)
                        log_warning_errno(r, "Failed to delete IPv%u conntrack entries of userspace mode", family);
                else if (r > 0)
                        log_v(2, "Deleted %d IPv%u conntrack entries of userspace mode's connections", r, family);
        }
}
