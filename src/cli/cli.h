/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * kproxy's own commands besides the daemon and render (main.c dispatches).
 */
#include <stddef.h>

typedef struct json_t json_t;
struct explain_query;
struct host_facts;
struct inet_cidr;
struct kproxy_config;
struct model;

/* `kproxy explain`: argv after the subcommand. Returns the exit status. */
int cli_explain(int argc, char **argv);

/* explain's answer as JSON for q against model m, on the node that
 * configuration c, node_name and host describe; the daemon's
 * /debug/explain asks it too. Returns 0, or -errno (-EINVAL: a mode
 * explain does not know, said on stderr). */
int cli_explain_answer(const struct model *m, const struct kproxy_config *c, const char *node_name,
                       const struct host_facts *host, const struct inet_cidr *cidrs, size_t n_cidrs,
                       const struct explain_query *q, json_t **ret);
