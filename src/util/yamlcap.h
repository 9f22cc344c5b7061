/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Caps on what a YAML document may cost its reader (yamlcap.c), checked on
 * libyaml's events as they come, before anything is built from them: how
 * deep collections nest, and how much aliases expand to. An alias stands
 * for a copy of its anchor's whole value, so a few hundred bytes of
 * anchors that alias each other ("billion laughs") would expand to
 * gigabytes; each alias is counted as the nodes and scalar bytes its
 * anchor holds once expanded, and the total over the stream is capped.
 * The state files, the kubeconfig and the --config file all pass here.
 */
#include <stddef.h>

#include "util/cleanup.h"

struct yaml_event_s;
struct yamlcap;

#define YAMLCAP_MAX_DEPTH 64                    /* nested mappings and sequences */
#define YAMLCAP_MAX_ALIAS_NODES 100000          /* nodes all aliases of a stream may add */
#define YAMLCAP_MAX_ALIAS_BYTES (4u << 20)      /* scalar bytes all aliases of a stream may add */

/* A new counter for one stream, or NULL on out of memory. */
struct yamlcap *yamlcap_new(void);
/* Accepts NULL; returns NULL. */
struct yamlcap *yamlcap_free(struct yamlcap *c);
DEFINE_CLEANUP(struct yamlcap, yamlcap_free)

/* Counts one event of the stream, in order. Returns 0; -E2BIG when the
 * event passes a cap, -ELOOP for an alias inside its own anchor's value,
 * -EINVAL for an alias to no anchor, -ENOMEM; then yamlcap_problem()
 * says which, naming the cap. */
int yamlcap_event(struct yamlcap *c, const struct yaml_event_s *ev);
/* The last failure as one line ("" before any). */
const char *yamlcap_problem(const struct yamlcap *c);
