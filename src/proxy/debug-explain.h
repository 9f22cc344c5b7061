/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The daemon's /debug/explain: explain (explain/explain.h) for the query
 * in the URL (?source=…&destination=…&protocol=…&from=…&ct-state=…),
 * answered from the model the daemon serves, as JSON. Read-only.
 */
#include <stdbool.h>
#include <stddef.h>

struct explain_query;
struct host_facts;
struct inet_cidr;
struct kproxy_config;
struct mhd_reply;
struct mhd_request;
struct model;

struct debug_explain_node {
        const struct model *m;
        const struct kproxy_config *cfg;
        bool socket_lb;                 /* it runs (not only asked for) */
        const char *node_name;
        const struct host_facts *host;
        const struct inet_cidr *service_cidrs;
        size_t n_service_cidrs;
};

/* Answers req into reply: 200 and the JSON, or 400 naming the bad field. */
void debug_explain(const struct debug_explain_node *n, const struct mhd_request *req, struct mhd_reply *reply);
/* The answer to a query already read and checked: the JSON, or a 500. */
void debug_explain_answer(const struct debug_explain_node *n, const struct explain_query *q,
                          struct mhd_reply *reply);
