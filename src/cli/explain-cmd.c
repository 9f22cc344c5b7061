/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `kproxy explain`: what this node's proxy does with one connection, from
 * a cluster state (STATE files, as render reads them), from the API
 * server (no STATE: --kubeconfig, --master or in cluster), or from the
 * running daemon (--daemon URL: its /debug/explain, which answers from the
 * model it serves). One answer (explain/explain.h), printed for people or
 * as JSON.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/daemon-query.h"
#include "cli/snapshot.h"
#include "cli/state.h"
#include "config/config.h"
#include "explain/explain.h"
#include "kube/intake.h"
#include "model/model.h"
#include "proxy/backend.h"
#include "render/render.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/log.h"

#define EXIT_USAGE 2
#define API_TIMEOUT_MS 30000

/* The query's fields, in the order the daemon is asked them. */
static const char *const fields[] = {"source", "destination", "protocol", "from", "ct-state"};

/* The state comes first: its flags' setters take the same userdata. */
struct explain_opts {
        struct cli_state st;
        struct explain_query q;
        const char *raw[ELEMENTSOF(fields)];
        bool json;
        const char *daemon;
};

static int set_field(struct explain_opts *o, unsigned i, const char *v) {
        char err[EXPLAIN_ERRLEN];
        int r = explain_query_set(&o->q, fields[i], v, err);
        if (r < 0) {
                fprintf(stderr, "kproxy explain: --%s: %s\n", fields[i], err);
                return r;
        }
        o->raw[i] = v;
        return 0;
}

static int set_source(void *u, const char *v) {
        return set_field(u, 0, v);
}
static int set_destination(void *u, const char *v) {
        return set_field(u, 1, v);
}
static int set_protocol(void *u, const char *v) {
        return set_field(u, 2, v);
}
static int set_from(void *u, const char *v) {
        return set_field(u, 3, v);
}
static int set_ct_state(void *u, const char *v) {
        return set_field(u, 4, v);
}

static int set_output(void *u, const char *v) {
        struct explain_opts *o = u;
        if (strcmp(v, "text") != 0 && strcmp(v, "json") != 0)
                return -EINVAL;
        o->json = strcmp(v, "json") == 0;
        return 0;
}

static int set_daemon(void *u, const char *v) {
        ((struct explain_opts *) u)->daemon = v;
        return 0;
}

static const struct config_extra_flag explain_flags[] = {
        {"source", false, "IP[:PORT]", "the client's address", set_source},
        {"destination", false, "IP:PORT", "where it connects to (a cluster, external or load-balancer IP, a node "
                                          "address and node port, or anything else)", set_destination},
        {"protocol", false, "tcp|udp|sctp", "the protocol (default tcp)", set_protocol},
        {"from", false, "pod|node|external|IFACE",
         "where the connection comes from: a pod on this node, the node's own processes, another node or outside, "
         "or the interface it comes in by (default: from the source address)", set_from},
        {"ct-state", false, "new|invalid", "what conntrack calls the packet (default new)", set_ct_state},
        {"output", false, "text|json", "for people (default), or JSON (docs/explain.md's schema)", set_output},
        {"daemon", false, "URL",
         "ask the running daemon instead, at its metrics server (e.g. http://127.0.0.1:10249): its /debug/explain",
         set_daemon},
};

static const char explain_usage[] =
        "Usage: kproxy explain [flags] --source IP --destination IP:PORT [STATE...]\n\n"
        "Say what this node's proxy does with one connection and why: forwarded\n"
        "(to which endpoints, with what chances), rejected or dropped (and why),\n"
        "masqueraded or not (and why), session affinity, and the walk through the\n"
        "mode's chains (--proxy-mode " PROXY_MODE_NAMES ", --socket-lb). The\n"
        "cluster comes from STATE files (as kproxy render reads them), else from\n"
        "the API server (--kubeconfig, --master, or in cluster), or from the\n"
        "running daemon (--daemon). --hostname-override names the node.\n";

static int print_answer(const json_t *j, bool json) {
        if (json) {
                if (json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS) < 0 || fputc('\n', stdout) == EOF)
                        return -EIO;
        } else if (explain_print(j, stdout) < 0) {
                fprintf(stderr, "kproxy explain: the answer does not have explain's form\n");
                return -EINVAL;
        }
        return fflush(stdout) == 0 ? 0 : -errno;
}

static int from_daemon(const struct explain_opts *o, json_t **ret) {
        const char *keys[ELEMENTSOF(fields)], *values[ELEMENTSOF(fields)];
        char err[CLI_DAEMON_ERRLEN];
        unsigned n = 0;
        for (unsigned i = 0; i < ELEMENTSOF(fields); i++)
                if (o->raw[i]) {
                        keys[n] = fields[i];
                        values[n++] = o->raw[i];
                }
        int r = cli_daemon_get_json(o->daemon, "/debug/explain", keys, values, n, ret, err);
        if (r < 0)
                fprintf(stderr, "kproxy explain: %s\n", err);
        return r;
}

int cli_explain(int argc, char **argv) {
        struct kproxy_config cfg;
        struct explain_opts o;
        struct config_extra_flag flags[ELEMENTSOF(explain_flags) + CLI_STATE_N_FLAGS];
        size_t n_flags = cli_state_flags(explain_flags, ELEMENTSOF(explain_flags), flags);
        struct intake *intake = NULL;
        json_t *answer = NULL;
        char **files = NULL, err[EXPLAIN_ERRLEN];
        size_t n_files = 0;
        enum explain_mode mode;
        int r, ret = EXIT_USAGE;

        o = (struct explain_opts) {0};
        if (config_init(&cfg) < 0 || cli_state_init(&o.st) < 0)
                return EXIT_FAILURE;
        if (config_parse_args(&cfg, argc, argv, flags, n_flags, &o, &files, &n_files) < 0)
                goto out;
        if (cfg.show_help) {
                config_print_help(explain_usage, flags, n_flags);
                ret = 0;
                goto out;
        }
        if (cli_refuses_daemon_actions(&cfg, "explain") < 0 || config_finish(&cfg) < 0 ||
            explain_mode_of_config(&cfg, &mode, stderr) < 0)
                goto out;
        cli_setup_logging(&cfg);
        if (explain_query_check(&o.q, err) < 0) {
                fprintf(stderr, "kproxy explain: %s (see kproxy explain --help)\n", err);
                goto out;
        }
        if (o.daemon && n_files > 0) {
                fprintf(stderr, "kproxy explain: --daemon asks the daemon; give no STATE file with it\n");
                goto out;
        }
        ret = EXIT_FAILURE;
        if (o.daemon) {
                r = from_daemon(&o, &answer);
        } else {
                r = cli_state_prepare(&o.st, &cfg);
                if (r < 0)
                        goto out;
                const struct model *m = o.st.model;
                const struct inet_cidr *cidrs;
                size_t n_cidrs;
                if (n_files > 0) {
                        r = cli_state_load(&o.st, "explain", files, n_files);
                        if (r < 0)
                                goto out;
                        cidrs = cli_state_service_cidrs(&o.st, &n_cidrs);
                } else {
                        r = cli_snapshot(&cfg, o.st.node_name, &o.st.admit, API_TIMEOUT_MS, &intake);
                        if (r < 0)
                                goto out;
                        m = intake_model(intake);
                        cidrs = intake_service_cidrs(intake, &n_cidrs);
                }
                r = explain_answer(m, &cfg, cfg.socket_lb, o.st.node_name, &o.st.host, cidrs, n_cidrs, &o.q, &answer);
                if (r < 0)
                        log_error_errno(r, "Failed to explain the connection");
        }
        if (r < 0)
                goto out;
        ret = print_answer(answer, o.json) < 0 ? EXIT_FAILURE : 0;
out:
        json_decref(answer);
        intake_free(intake);
        free(files);
        cli_state_done(&o.st);
        config_done(&cfg);
        return ret;
}
