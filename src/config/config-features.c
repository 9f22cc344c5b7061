/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of feature gates: behave as the kube-proxy release kproxy
 * replaces, because a DaemonSet or ConfigMap written for it must start
 * kproxy the same way or fail the same way. So the gates are upstream's
 * table (config-gates.c, generated from the release's sources) read with
 * upstream's featuregate rules:
 *
 *  - the flag and the file's featureGates only record name=bool pairs, as
 *    upstream's map flag does; whichever of them is in force once --config
 *    has been applied is checked in config_finish(), as upstream's
 *    SetFromMap() is called in Complete() (so a --feature-gates given
 *    beside --config is ignored, not checked, as upstream ignores it);
 *  - an unknown name, a locked gate set against its lock, or a gate that
 *    does not exist yet at the release is an error; setting a GA or
 *    deprecated gate is allowed with upstream's warning;
 *  - a gate's value is what was set, else AllAlpha's (alpha gates) or
 *    AllBeta's (beta gates) if that was set, else the release's default.
 *
 * What was set is kept as given (sorted), because --write-config-to and
 * /configz show only that, as upstream's do.
 */
#include "config/config-features.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config-gates.h"
#include "config/config-message.h"
#include "config/config-types.h"
#include "config/config-value.h"
#include "util/cleanup.h"

static const char *const gate_stage_table[_CONFIG_GATE_STAGE_MAX] = {
        [CONFIG_GATE_ALPHA] = "ALPHA",
        [CONFIG_GATE_BETA] = "BETA",
        [CONFIG_GATE_GA] = "",
        [CONFIG_GATE_DEPRECATED] = "DEPRECATED",
        [CONFIG_GATE_PRE_ALPHA] = "PRE-ALPHA",
};

const char *config_gate_stage_to_string(enum config_gate_stage s) {
        if (s < 0 || s >= _CONFIG_GATE_STAGE_MAX)
                return NULL;
        return gate_stage_table[s];
}

static int gate_cmp(const void *key, const void *elem) {
        return strcmp(key, ((const struct config_gate *) elem)->name);
}

const struct config_gate *config_feature_find(const char *name) {
        assert(name);
        return bsearch(name, config_gates, config_gates_count, sizeof config_gates[0], gate_cmp);
}

/* ---- what was set ---------------------------------------------------------------- */

int config_feature_gate_set(struct kproxy_config *c, const char *name, bool enabled) {
        _cleanup_free_ char *copy = NULL;
        struct config_feature_gate *n;
        size_t i;

        for (i = 0; i < c->n_feature_gates; i++) {
                int d = strcmp(c->feature_gates[i].name, name);

                if (d == 0) {
                        c->feature_gates[i].enabled = enabled;
                        return 0;
                }
                if (d > 0)
                        break;
        }
        copy = strdup(name);
        if (!copy)
                return -ENOMEM;
        n = reallocarray(c->feature_gates, c->n_feature_gates + 1, sizeof *n);
        if (!n)
                return -ENOMEM;
        c->feature_gates = n;
        memmove(n + i + 1, n + i, (c->n_feature_gates - i) * sizeof *n);
        n[i] = (struct config_feature_gate) { .name = TAKE_PTR(copy), .enabled = enabled };
        c->n_feature_gates++;
        return 0;
}

void config_feature_gates_clear(struct kproxy_config *c) {
        for (size_t i = 0; i < c->n_feature_gates; i++)
                free(c->feature_gates[i].name);
        free(c->feature_gates);
        c->feature_gates = NULL;
        c->n_feature_gates = 0;
}

static const struct config_feature_gate *gate_setting(const struct kproxy_config *c, const char *name) {
        for (size_t i = 0; i < c->n_feature_gates; i++)
                if (streq(c->feature_gates[i].name, name))
                        return &c->feature_gates[i];
        return NULL;
}

/* ---- checking and reading ------------------------------------------------------- */

int config_features_check(const struct kproxy_config *c) {
        /* The file replaced the flag's map if there is a file. */
        const char *where = c->config_file ? c->config_file : "--feature-gates";
        const char *field = c->config_file ? ": featureGates" : "";
        int r = 0;

        assert(c);

        for (size_t i = 0; i < c->n_feature_gates; i++) {
                const struct config_feature_gate *s = &c->feature_gates[i];
                const struct config_gate *g = config_feature_find(s->name);
                const char *v = s->enabled ? "true" : "false";

                if (!g)
                        r = config_error("%s%s: unrecognized feature gate: %s", where, field, s->name);
                else if (g->locked && s->enabled != g->def)
                        r = config_error("%s%s: cannot set feature gate %s to %s, feature is locked to %s", where,
                                         field, s->name, v, g->def ? "true" : "false");
                else if (g->stage == CONFIG_GATE_PRE_ALPHA)
                        r = config_error("%s%s: cannot set feature gate %s to %s, feature is PreAlpha at emulated "
                                         "version %s",
                                         where, field, s->name, v, config_gates_release);
                else if (g->stage == CONFIG_GATE_DEPRECATED)
                        config_print("Setting deprecated feature gate %s=%s. It will be removed in a future release.",
                                     s->name, v);
                else if (g->stage == CONFIG_GATE_GA)
                        config_print("Setting GA feature gate %s=%s. It will be removed in a future release.", s->name,
                                     v);
        }
        return r;
}

bool config_feature_enabled(const struct kproxy_config *c, const char *gate) {
        const struct config_feature_gate *s, *all = NULL;
        const struct config_gate *g;

        assert(c);
        assert(gate);

        g = config_feature_find(gate);
        assert(g);              /* upstream panics on an unknown gate too */
        if (!g)
                return false;
        s = gate_setting(c, gate);
        if (s)
                return s->enabled;
        /* AllAlpha=false turns the alpha gates off just as =true turns
         * them on; a gate set by name always wins. */
        if (g->stage == CONFIG_GATE_ALPHA)
                all = gate_setting(c, "AllAlpha");
        else if (g->stage == CONFIG_GATE_BETA)
                all = gate_setting(c, "AllBeta");
        return all ? all->enabled : g->def;
}

void config_features_foreach(const struct kproxy_config *c,
                             void (*fn)(void *ctx, const char *name, const char *stage, bool enabled), void *ctx) {
        for (size_t i = 0; i < config_gates_count; i++)
                if (config_gates[i].stage != CONFIG_GATE_PRE_ALPHA)
                        fn(ctx, config_gates[i].name, config_gate_stage_to_string(config_gates[i].stage),
                           config_feature_enabled(c, config_gates[i].name));
}

/* ---- --help -------------------------------------------------------------------- */

/* featuregate sorts the whole "Name=true|false (...)" lines, so a name
 * sorts as if followed by '='. */
static int known_cmp(const void *a, const void *b) {
        const char *x = (*(const struct config_gate *const *) a)->name;
        const char *y = (*(const struct config_gate *const *) b)->name;

        for (;; x++, y++) {
                unsigned char cx = *x ? (unsigned char) *x : '=', cy = *y ? (unsigned char) *y : '=';

                if (cx != cy)
                        return cx < cy ? -1 : 1;
                if (!*x || !*y)
                        return 0;
        }
}

void config_features_print_known(int indent) {
        _cleanup_free_ const struct config_gate **list = calloc(config_gates_count, sizeof *list);
        size_t n = 0;

        if (!list)
                return;
        for (size_t i = 0; i < config_gates_count; i++)
                if (config_gates[i].stage == CONFIG_GATE_ALPHA || config_gates[i].stage == CONFIG_GATE_BETA)
                        list[n++] = &config_gates[i];
        qsort(list, n, sizeof *list, known_cmp);
        for (size_t i = 0; i < n; i++)
                printf("%*s%s=true|false (%s - default=%s)\n", indent, "", list[i]->name,
                       config_gate_stage_to_string(list[i]->stage), list[i]->def ? "true" : "false");
}
