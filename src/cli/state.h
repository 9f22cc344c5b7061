/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A cluster state for the commands that read one (`kproxy render`,
 * `kproxy explain`): the model from STATE files (kubectl's -o json or -o
 * yaml, manifests), this node's name and host facts, and the flags that
 * stand in for a node's probes (--host-addresses, --host-nfacct, …).
 * A bad object is skipped with a warning naming it; the rest loads.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host/host.h"
#include "host/render-params.h"
#include "model/admit.h"
#include "util/inet.h"

struct buf;
struct config_extra_flag;
struct kproxy_config;
struct model;
struct render_params;
struct service_cidrs;

struct cli_state {
        struct host_facts host;
        enum iptables_backend iptables_backend;
        int random_fully;                       /* --host-random-fully, or -1: probed */
        struct inet_cidr *flag_cidrs;           /* --service-cidrs */
        size_t n_flag_cidrs;
        struct service_cidrs *service_cidrs;    /* and the state's ServiceCIDR objects */
        int ip_family;                          /* --ip-family, or 0 */
        const char *node_name;
        struct model *model;
        struct admit_policy admit;              /* --external-ip-cidrs, --load-balancer-ip-cidrs */
};

/* The state's flags, for config_parse_args() with userdata a struct
 * cli_state: copies them after the n_own flags of own into out (room for
 * n_own + CLI_STATE_N_FLAGS); returns the count. */
#define CLI_STATE_N_FLAGS 7
size_t cli_state_flags(const struct config_extra_flag *own, size_t n_own, struct config_extra_flag *out);

/* Probes the host. Returns 0 or -ENOMEM. */
int cli_state_init(struct cli_state *s);
/* After config_finish(): the node name, the iptables backend's probe, an
 * empty model. Returns 0 or -ENOMEM. */
int cli_state_prepare(struct cli_state *s, const struct kproxy_config *c);
/* Loads the files into the model, the services' claimed addresses
 * decided by the allow-lists (each refusal a warning, as the daemon logs
 * it). Returns 0, or -errno with the problem said on stderr, prefixed
 * with cmd. */
int cli_state_load(struct cli_state *s, const char *cmd, char **files, size_t n_files);
/* The ServiceCIDRs: the state's objects' and --service-cidrs. */
const struct inet_cidr *cli_state_service_cidrs(struct cli_state *s, size_t *ret_n);
void cli_state_done(struct cli_state *s);

/* -v, --vmodule, --logging-format and its options, from the final
 * configuration. */
void cli_setup_logging(const struct kproxy_config *c);
/* The daemon's actions (--cleanup, --init-only, --write-config-to,
 * --version) given to command cmd: said on stderr, -EINVAL. */
int cli_refuses_daemon_actions(const struct kproxy_config *c, const char *cmd);
/* Writes buf's lines (render_params_init()'s warnings) as warnings. */
void cli_log_lines(const struct buf *b);
