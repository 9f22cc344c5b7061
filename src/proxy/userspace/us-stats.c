/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode's counters: the forwarders' own, summed with those of
 * the frontends already gone (so counters only grow: us-frontends.c), as
 * kproxy_userspace_ families on /metrics; and what it serves now, on
 * /debug/backend.
 */
#include "proxy/userspace/us-stats.h"

#include <inttypes.h>
#include <stdint.h>

#include "proxy/userspace/us-addrs.h"
#include "proxy/userspace/us-frontends.h"
#include "util/buf.h"

/* kproxy's own families: one row a sample, a family's rows together,
 * its HELP and TYPE on its first row. */
struct sample {
        const char *name, *type, *help;         /* help NULL: the family of the row before */
        const char *labels;                     /* "" or "{...}" */
        uint64_t value;
};

void us_stats_expose(const struct us_frontends *f, struct buf *out) {
        struct fwd_tcp_stats t;
        struct fwd_udp_stats u;
        size_t n_fe;

        us_frontends_totals(f, &t, &u, &n_fe);
        const struct sample rows[] = {
                {"kproxy_userspace_frontends", "gauge", "Listening TCP and bound UDP service sockets.", "", n_fe},
                {"kproxy_userspace_connections_total", "counter", "TCP connections accepted.", "", t.accepted},
                {"kproxy_userspace_active_connections", "gauge", "TCP connections open now.", "", t.active},
                {"kproxy_userspace_accept_errors_total", "counter", "accept() failures.", "", t.accept_errors},
                {"kproxy_userspace_connect_errors_total", "counter", "Connections to endpoints that failed (each try).",
                 "", t.connect_errors},
                {"kproxy_userspace_refused_total", "counter",
                 "TCP clients reset and UDP sessions ended: no endpoint answered.", "{protocol=\"tcp\"}", t.refused},
                {"kproxy_userspace_refused_total", NULL, NULL, "{protocol=\"udp\"}", u.refused},
                {"kproxy_userspace_bytes_total", "counter", "Bytes forwarded.",
                 "{direction=\"to_endpoints\",protocol=\"tcp\"}", t.bytes_to_endpoints},
                {"kproxy_userspace_bytes_total", NULL, NULL, "{direction=\"to_clients\",protocol=\"tcp\"}",
                 t.bytes_to_clients},
                {"kproxy_userspace_bytes_total", NULL, NULL, "{direction=\"to_endpoints\",protocol=\"udp\"}",
                 u.bytes_to_endpoints},
                {"kproxy_userspace_bytes_total", NULL, NULL, "{direction=\"to_clients\",protocol=\"udp\"}",
                 u.bytes_to_clients},
                {"kproxy_userspace_udp_sessions_total", "counter", "UDP sessions created.", "", u.sessions},
                {"kproxy_userspace_udp_active_sessions", "gauge", "UDP sessions open now.", "", u.active},
                {"kproxy_userspace_udp_dropped_total", "counter",
                 "Datagrams dropped: no endpoint, the session limit, or a failed send.", "", u.dropped},
        };
        for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
                const struct sample *r = &rows[i];
                if (r->help)
                        buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", r->name, r->help, r->name, r->type);
                buf_printf(out, "%s%s %" PRIu64 "\n", r->name, r->labels, r->value);
        }
}

void us_stats_describe(const struct us_addrs *a, const struct us_frontends *f, struct buf *out) {
        const char *k;
        void *v;

        us_addrs_describe(a, out);
        for (size_t i = 0; hmap_next(&f->by_key, &i, &k, &v);) {
                const struct us_frontend *fe = v;
                if (!fe->tcp && !fe->udp)
                        continue;       /* wanted, not open */
                buf_put(out, fe->line.data, fe->line.len);
                buf_putc(out, '\n');
        }
}
