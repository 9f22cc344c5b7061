/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The table of feature gates kproxy follows, one release's: config-gates.c,
 * written by tools/gen-gates.py from that release's sources. Read through
 * featuregate's rules in config-features.c.
 */
#include <stdbool.h>
#include <stddef.h>

/* featuregate's pre-release stages; PRE_ALPHA is a gate the sources list
 * only from a later release on (none in 1.34, but the table could hold one). */
enum config_gate_stage {
        CONFIG_GATE_ALPHA,
        CONFIG_GATE_BETA,
        CONFIG_GATE_GA,
        CONFIG_GATE_DEPRECATED,
        CONFIG_GATE_PRE_ALPHA,
        _CONFIG_GATE_STAGE_MAX,
};

struct config_gate {
        const char *name;
        enum config_gate_stage stage;
        bool def;               /* the default at kproxy's release */
        bool locked;            /* LockToDefault: setting it to !def is refused */
};

/* Every gate kube-proxy knows, sorted by strcmp() of the name. */
extern const struct config_gate config_gates[];
extern const size_t config_gates_count;
/* The release the table is for, "MAJOR.MINOR": upstream's emulated version. */
extern const char config_gates_release[];
