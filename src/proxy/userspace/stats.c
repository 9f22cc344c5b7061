/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode's counters: the forwarders' own, summed with those of
 * the frontends already gone (so counters only grow), as kproxy_userspace_
 * families on /metrics; and what it serves now, on /debug/backend.
 */
#include "proxy/userspace/mode.h"

#include <inttypes.h>

#include "ev/ev.h"

void userspace_add_tcp_stats(struct fwd_tcp_stats *t, const struct fwd_tcp_stats *s) {
        t->accepted += s->accepted;
        t->active += s->active;
        t->bytes_to_endpoints += s->bytes_to_endpoints;
        t->bytes_to_clients += s->bytes_to_clients;
        t->accept_errors += s->accept_errors;
        t->connect_errors += s->connect_errors;
        t->retries += s->retries;
        t->refused += s->refused;
        t->idle_timeouts += s->idle_timeouts;
        t->resets += s->resets;
}

void userspace_add_udp_stats(struct fwd_udp_stats *t, const struct fwd_udp_stats *s) {
        t->sessions += s->sessions;
        t->active += s->active;
        t->to_endpoints += s->to_endpoints;
        t->to_clients += s->to_clients;
        t->bytes_to_endpoints += s->bytes_to_endpoints;
        t->bytes_to_clients += s->bytes_to_clients;
        t->dropped += s->dropped;
        t->refused += s->refused;
        t->idle_timeouts += s->idle_timeouts;
}

static void totals(struct userspace_mode *b, struct fwd_tcp_stats *tcp, struct fwd_udp_stats *udp, size_t *n_fe) {
        const char *k;
        void *v;

        *tcp = b->gone.tcp;
        *udp = b->gone.udp;
        *n_fe = 0;
        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v);) {
                struct frontend *fe = v;
                struct fwd_tcp_stats ts;
                struct fwd_udp_stats us;
                if (fe->tcp) {
                        fwd_tcp_get_stats(fe->tcp, &ts);
                        userspace_add_tcp_stats(tcp, &ts);
                        ++*n_fe;
                }
                if (fe->udp) {
                        fwd_udp_get_stats(fe->udp, &us);
                        userspace_add_udp_stats(udp, &us);
                        ++*n_fe;
                }
        }
        for (struct frontend *fe = b->draining; fe; fe = fe->next_draining) {
                struct fwd_tcp_stats ts;
                fwd_tcp_get_stats(fe->tcp, &ts);
                userspace_add_tcp_stats(tcp, &ts);
        }
}

/* kproxy's own families: one row a sample, a family's rows together,
 * its HELP and TYPE on its first row. */
struct sample {
        const char *name, *type, *help;         /* help NULL: the family of the row before */
        const char *labels;                     /* "" or "{...}" */
        uint64_t value;
};

void userspace_expose(struct userspace_mode *b, struct buf *out) {
        struct fwd_tcp_stats t;
        struct fwd_udp_stats u;
        size_t n_fe;

        totals(b, &t, &u, &n_fe);
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

/* After a hand-over: the UDP sessions whose last datagram, passed on less
 * than UDP_REPLY_WAIT_MS ago, has had no reply yet. The successor reads
 * the service sockets, but the reply comes back to this process's
 * session socket, and would meet a closed port if the process exited. */
static size_t udp_awaiting(struct userspace_mode *b) {
        uint64_t now = ev_now_ms(b->env.loop);
        uint64_t since = now > UDP_REPLY_WAIT_MS ? now - UDP_REPLY_WAIT_MS : 0;
        const char *k;
        void *v;
        size_t n = 0;

        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v);) {
                struct frontend *fe = v;
                if (fe->udp)
                        n += fwd_udp_awaiting(fe->udp, since);
        }
        return n;
}

/* Open TCP connections; on a stop, the listeners whose handshakes are
 * still under way; after a hand-over, the UDP datagrams awaiting their
 * reply. On a stop the UDP sockets have closed (a client's next datagram
 * is refused), so nothing of UDP is waited for. */
size_t userspace_busy(struct userspace_mode *b) {
        struct fwd_tcp_stats t;
        struct fwd_udp_stats u;
        size_t n_fe, listening = userspace_close_settled(b);

        totals(b, &t, &u, &n_fe);
        return (size_t) t.active + listening + (b->retired ? udp_awaiting(b) : 0);
}

void userspace_describe(struct userspace_mode *b, struct buf *out) {
        const char *k;
        void *v;

        for (size_t i = 0; hmap_next(&b->addrs, &i, &k, &v);)
                buf_printf(out, "address %s\n", k);
        for (size_t i = 0; hmap_next(&b->frontends, &i, &k, &v);) {
                struct frontend *fe = v;
                if (!fe->tcp && !fe->udp)
                        continue;       /* wanted, not open */
                buf_put(out, fe->line.data, fe->line.len);
                buf_putc(out, '\n');
        }
}
