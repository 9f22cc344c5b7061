/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * kube-proxy's flags as one table (config-flags.c): finding a flag by name,
 * setting its field from a value, and --help.
 */
#include <stdbool.h>
#include <stddef.h>

struct config_extra_flag;
struct kproxy_config;

struct config_flag;

/* By name, "_" matching "-"; NULL if there is no such flag. */
const struct config_flag *config_flags_find(const char *name);
const struct config_flag *config_flags_find_shorthand(char shorthand);
const char *config_flags_name(const struct config_flag *f);
bool config_flags_is_bool(const struct config_flag *f);
/* cliflag.WordSepNormalizeFunc's equality: "_" and "-" are the same. */
bool config_flags_name_eq(const char *a, const char *b);
/* Sets the flag's field from value and marks the flag given; a bad value is
 * reported on stderr and gives -EINVAL. */
int config_flags_apply(struct kproxy_config *c, const struct config_flag *f, const char *value);
/* Whether the flag called name (which must exist) was given. */
bool config_flags_changed(const struct kproxy_config *c, const char *name);


/* Prints the usage text, the common flags and the extra ones, to stdout. */
void config_print_help(const char *usage, const struct config_extra_flag *extra, size_t n_extra);
