/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Feature gates: featureGates and --feature-gates as upstream's featuregate
 * reads them, over the release's table (config-gates.h). The principle is
 * at the top of config-features.c.
 */
#include <stdbool.h>

#include "config/config-gates.h"

struct kproxy_config;

/* Sets one gate, keeping the array sorted by name. Names are not checked
 * here (config_features_check() does, once the source is settled). Returns
 * 0 or -ENOMEM. */
int config_feature_gate_set(struct kproxy_config *c, const char *name, bool enabled);
void config_feature_gates_clear(struct kproxy_config *c);
/* The table's entry for name, or NULL. */
const struct config_gate *config_feature_find(const char *name);
/* "ALPHA", "BETA", "" (GA), "DEPRECATED", "PRE-ALPHA", as featuregate spells
 * its stages in --help and messages. */
const char *config_gate_stage_to_string(enum config_gate_stage s);
/* upstream's SetFromMap() over the gates that were set: prints one line for
 * each unknown, locked or not-yet-existing gate (naming the flag or the
 * file's field) and returns -EINVAL if there was any; prints upstream's
 * warning for each GA or deprecated gate set. */
int config_features_check(const struct kproxy_config *c);
/* Prints the alpha and beta gates (and AllAlpha, AllBeta) one a line, each
 * indented by indent, as featuregate's KnownFeatures() lists them. */
void config_features_print_known(int indent);


/* The gate's effective value, as upstream's featuregate computes it: what
 * --feature-gates or featureGates set, else AllAlpha's or AllBeta's setting
 * for an alpha or beta gate, else its default in the kube-proxy release
 * kproxy follows (1.34: src/config/config-gates.c). gate must be one of its
 * gates (asserted, as upstream panics). Meaningful after config_finish(),
 * which refuses unknown and locked settings. */
bool config_feature_enabled(const struct kproxy_config *c, const char *gate);
/* Calls fn for every gate of the release (those upstream's featuregate
 * GetAll() gives), in name order: its stage as featuregate spells it
 * ("ALPHA", "BETA", "" for GA, "DEPRECATED") and its effective value.
 * Upstream's kubernetes_feature_enabled metric lists the same. */
void config_features_foreach(const struct kproxy_config *c,
                             void (*fn)(void *ctx, const char *name, const char *stage, bool enabled), void *ctx);
