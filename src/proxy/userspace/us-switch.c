/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode and the node around it: its set-up, and what is left
 * when the node switches between it and a NAT mode, or cleans up. When it
 * switches, conntrack keeps entries of the mode before, and a client that
 * reuses the port of one has its new connection matched to it: the entry's
 * NAT (or its lack of one) applies, not what the node does now. Each way,
 * the entries that would mislead are deleted once. Only where conntrack is
 * loaded at all: asking would load it.
 */
#include "proxy/userspace/us-switch.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "apply/conntrack.h"
#include "apply/sysctl.h"
#include "proxy/userspace/us-addrs.h"
#include "proxy/userspace/us-frontends.h"
#include "userspace/ifaddr.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/log.h"

static bool conntrack_loaded(void) {
        return access("/proc/sys/net/netfilter/nf_conntrack_count", F_OK) == 0;
}

/* Into this mode: the other mode's rules go after this mode's first sync
 * (proxy/proxier.c). An entry DNAT-ed by them keeps its binding, which no
 * NAT hook applies any more, and the listener's answer is dropped; so the
 * DNAT-ed entries to the addresses and ports this mode now serves go. */
void us_switch_flush_nat(const struct us_frontends *fes, const uint8_t *families, size_t n_families) {
        const char *k;
        void *v;

        if (!conntrack_loaded())
                return;
        struct ct_frontend *cf = xcalloc(fes->by_key.len ? fes->by_key.len : 1, sizeof *cf);
        for (size_t f = 0; f < n_families; f++) {
                uint8_t family = families[f];
                size_t n = 0;
                for (size_t i = 0; hmap_next(&fes->by_key, &i, &k, &v);) {
                        const struct us_frontend *fe = v;
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
static void flush_own_entries(const struct inet_addr *addrs, size_t n) {
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

/* --- set-up, switching modes, --cleanup --- */

/* Each forwarded connection leaves a TIME_WAIT toward its endpoint (the
 * client's FIN is passed on first, so kproxy's side closes first, and no
 * socket option avoids it short of a reset that could lose data): without
 * reuse, ~28k connections a minute to one endpoint exhaust the ports. The
 * sysctl is the network namespace's (the node's, on the host network);
 * docs/userspace.md says so, and the log names it once set. */
#define TW_REUSE "/proc/sys/net/ipv4/tcp_tw_reuse"
int us_switch_setup(const struct kproxy_config *c, struct host_facts *host, const char *node_name,
                     const char *root) {
        uint64_t cur;
        (void) c, (void) host, (void) node_name;
        if (sysctl_read_u64(root, TW_REUSE, &cur) == 0 && cur == 1)
                return 0;
        int r = sysctl_write_u64(root, TW_REUSE, 1);
        if (r < 0) {
                log_warning_errno(r, "Failed to set net.ipv4.tcp_tw_reuse to 1 (connections to one endpoint "
                                     "may run out of local ports)");
                return sysctl_not_permitted(r) ? 0 : r;
        }
        log_info_kv("Set sysctl", KV_STR("entry", "net/ipv4/tcp_tw_reuse"), KV_INT("value", 1),
                    KV_STR("reason", "forwarded connections leave TIME_WAIT sockets toward endpoints"));
        return 0;
}

static bool link_present(void) {
        struct ifaddr *ia;
        struct inet_addr *have = NULL;
        size_t n = 0;

        if (ifaddr_open(US_LINK, &ia) < 0)
                return true;    /* unsure */
        int r = ifaddr_list(ia, &have, &n);
        free(have);
        ifaddr_close(ia);
        return r != -ENODEV;
}

static int link_remove(void) {
        struct ifaddr *ia;
        int r = ifaddr_open(US_LINK, &ia);

        if (r < 0)
                return log_error_errno(r, "Failed to open rtnetlink");
        r = ifaddr_link_delete(ia);
        ifaddr_close(ia);
        if (r == -EEXIST)
                return log_warning_errno(r, "Interface " US_LINK " is not kproxy's, left alone");
        if (r < 0)
                return log_error_errno(r, "Failed to delete interface " US_LINK);
        return 0;
}

bool us_switch_leftovers(const struct host_facts *h, bool running) {
        (void) h;
        return !running && link_present();
}

/* Leaving this mode for a NAT mode, after that mode's first sync: the
 * addresses go, then conntrack's entries of their connections
 * (flush_own_entries). */
int us_switch_remove_leftovers(const struct host_facts *h, bool running) {
        _cleanup_free_ struct inet_addr *addrs = NULL;
        struct ifaddr *ia;
        size_t n = 0;

        (void) h;
        if (running)
                return 0;
        if (ifaddr_open(US_LINK, &ia) >= 0) {
                (void) ifaddr_list(ia, &addrs, &n);
                ifaddr_close(ia);
        }
        int r = link_remove();
        if (r >= 0)
                flush_own_entries(addrs, n);
        return r;
}

int us_switch_cleanup(const struct kproxy_config *c, const struct host_facts *h) {
        (void) c, (void) h;
        return link_remove();
}
