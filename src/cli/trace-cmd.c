/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `kproxy trace`: arms a trace of the packets that match the filter
 * (trace/trace.h), says so on stderr, and prints each packet's walk
 * through this network namespace's tables (nf_tables' and the legacy
 * x_tables') until the packet or time limit, SIGINT or SIGTERM.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/state.h"
#include "config/config.h"
#include "explain/explain.h"
#include "model/model.h"
#include "trace/trace.h"
#include "util/cleanup.h"

#define EXIT_USAGE 2

struct trace_cmd {
        struct explain_query q;         /* the same parsing as explain's */
        struct trace_opts o;
        bool has_proto;
};

static int set_query(struct trace_cmd *t, const char *field, const char *v) {
        char err[EXPLAIN_ERRLEN];
        if (explain_query_set(&t->q, field, v, err) < 0) {
                fprintf(stderr, "kproxy trace: --%s: %s\n", field, err);
                return -EINVAL;
        }
        return 0;
}

static int set_source(void *u, const char *v) {
        return set_query(u, "source", v);
}

static int set_destination(void *u, const char *v) {
        struct trace_cmd *t = u;
        char err[EXPLAIN_ERRLEN];
        /* A destination without a port traces every port. */
        if (explain_query_set(&t->q, "destination", v, err) == 0)
                return 0;
        if (explain_query_set(&t->q, "source", v, err) < 0 || t->q.src_port) {
                fprintf(stderr, "kproxy trace: --destination \"%.64s\": want IP or IP:PORT\n", v);
                return -EINVAL;
        }
        /* parsed as a source: move it */
        t->q.dst = t->q.src;
        t->q.has_dst = true;
        t->q.has_src = false;
        return 0;
}

static int set_protocol(void *u, const char *v) {
        ((struct trace_cmd *) u)->has_proto = true;
        return set_query(u, "protocol", v);
}

static int set_packets(void *u, const char *v) {
        char *end;
        unsigned long n = strtoul(v, &end, 10);
        if (!*v || *end || n == 0 || n > 64)
                return -EINVAL;
        ((struct trace_cmd *) u)->o.max_packets = (unsigned) n;
        return 0;
}

static int set_timeout(void *u, const char *v) {
        uint64_t ms;
        int r = config_parse_duration(v, &ms);
        if (r < 0 || ms == 0)
                return -EINVAL;
        ((struct trace_cmd *) u)->o.timeout_ms = ms;
        return 0;
}

static int set_all(void *u, const char *v) {
        ((struct trace_cmd *) u)->o.all_connections = strcmp(v, "true") == 0 || strcmp(v, "1") == 0;
        return 0;
}

static int set_output(void *u, const char *v) {
        if (strcmp(v, "text") != 0 && strcmp(v, "json") != 0)
                return -EINVAL;
        ((struct trace_cmd *) u)->o.json = strcmp(v, "json") == 0;
        return 0;
}

static const struct config_extra_flag trace_flags[] = {
        {"source", false, "IP[:PORT]", "trace packets from this address (and port)", set_source},
        {"destination", false, "IP[:PORT]", "trace packets to this address (and port)", set_destination},
        {"protocol", false, "tcp|udp|sctp", "trace this protocol (default: tcp when a port is given)", set_protocol},
        {"packets", false, "N", "stop after N packets (default 10, at most 64)", set_packets},
        {"timeout", false, "DURATION", "stop after this long (default 60s)", set_timeout},
        {"all-connections", true, "BOOL", "every matching connection's packets, not only the first's",
         set_all},
        {"output", false, "text|json", "for people (default), or a JSON object per line", set_output},
};

static const char trace_usage[] =
        "Usage: kproxy trace [flags] --destination IP[:PORT] [--source IP[:PORT]]\n\n"
        "Trace real packets through this node's tables (kproxy's and everyone\n"
        "else's: iptables-nft, iptables-legacy, a CNI's, a firewall's): it arms a trace\n"
        "for the packets that match, waits for them (reproduce the problem now),\n"
        "and prints every chain and rule each passed, with the rule's text and\n"
        "the kernel's verdict, as the kernel reports it. Only the first\n"
        "connection's packets are printed unless --all-connections. What it arms\n"
        "(table ip|ip6 " TRACE_TABLE ") goes when it stops, however it stops;\n"
        "kproxy --cleanup removes one a kernel before 5.12 kept. Run it in the\n"
        "node's network namespace, as root (CAP_NET_ADMIN).\n";

static void on_ready(void *ctx) {
        (void) ctx;
        fprintf(stderr, "kproxy trace: armed; waiting for matching packets (Ctrl-C to stop)\n");
}

int cli_trace(int argc, char **argv) {
        struct kproxy_config cfg;
        struct trace_cmd t = {.o = {.max_packets = 10, .timeout_ms = 60000}};
        char **args = NULL;
        size_t n_args = 0;
        int ret = EXIT_USAGE;

        if (config_init(&cfg) < 0)
                return EXIT_FAILURE;
        if (config_parse_args(&cfg, argc, argv, trace_flags, ELEMENTSOF(trace_flags), &t, &args, &n_args) < 0)
                goto out;
        if (cfg.show_help) {
                config_print_help(trace_usage, trace_flags, ELEMENTSOF(trace_flags));
                ret = 0;
                goto out;
        }
        if (n_args > 0) {
                fprintf(stderr, "kproxy trace: unexpected argument \"%s\" (see kproxy trace --help)\n", args[0]);
                goto out;
        }
        if (cli_refuses_daemon_actions(&cfg, "trace") < 0)
                goto out;
        if (!t.q.has_src && !t.q.has_dst) {
                fprintf(stderr, "kproxy trace: give --destination or --source (a trace of everything is not "
                                "offered)\n");
                goto out;
        }
        if (t.q.has_src && t.q.has_dst && t.q.src.family != t.q.dst.family) {
                fprintf(stderr, "kproxy trace: source and destination are of different IP families\n");
                goto out;
        }
        cli_setup_logging(&cfg);
        bool ports = t.q.dst_port || t.q.src_port;
        const struct trace_filter f = {
                .family = t.q.has_dst ? t.q.dst.family : t.q.src.family,
                .src = t.q.src,
                .dst = t.q.dst,
                .has_src = t.q.has_src,
                .has_dst = t.q.has_dst,
                .proto = !ports && !t.has_proto  ? 0
                         : t.q.proto == L4_UDP  ? IPPROTO_UDP
                         : t.q.proto == L4_SCTP ? IPPROTO_SCTP
                                                : IPPROTO_TCP,
                .dport = t.q.dst_port,
                .sport = t.q.src_port,
        };
        int r = trace_run(&f, &t.o, stdout, on_ready, NULL);
        if (r < 0) {
                ret = EXIT_FAILURE;
                goto out;
        }
        if (r == 0)
                fprintf(stderr, "kproxy trace: no matching packet was seen\n");
        ret = 0;
out:
        free(args);
        config_done(&cfg);
        return ret;
}
