/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * argv in pflag's syntax onto the flag table (config-args.c).
 */
#include <stddef.h>

struct config_extra_flag;
struct kproxy_config;

/* Parses argv[0..argc) (the program and subcommand already removed):
 * "--flag value", "--flag=value", "-v 4", bare booleans and "--bool=false".
 * Flags not in the common table are looked up in extra. Positional
 * arguments (and everything after "--") are returned in *ret_args, an owned
 * NULL-terminated array of borrowed argv pointers, with their count in
 * *ret_n_args. On a bad flag or value, prints one line naming the flag to
 * stderr and returns -EINVAL. */
int config_parse_args(struct kproxy_config *c, int argc, char **argv,
                      const struct config_extra_flag *extra, size_t n_extra, void *userdata,
                      char ***ret_args, size_t *ret_n_args);
