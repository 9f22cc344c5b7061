/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * kproxy's configuration: upstream kube-proxy's command-line flags and its
 * KubeProxyConfiguration file (kubeproxy.config.k8s.io/v1alpha1, YAML or
 * JSON, given with --config), with upstream's defaults and precedence:
 *
 *   defaults  <  flags  ;  a --config file replaces flags entirely, except
 *   --hostname-override and the logging flags (-v), which win over the file.
 *
 * The struct is public because main wires its fields into every subsystem;
 * nothing but src/config/ writes it.
 *
 * This is the interface for the rest of kproxy, gathered from the headers
 * of the files that implement it (each file of src/config/ has its own,
 * and none of them includes this one: config.c, which implements
 * config_finish(), is the top of the module and calls down into them):
 *
 *   config_init(), config_done()                     config-init.h
 *   config_parse_args()                              config-args.h
 *   config_finish()                                  here
 *   config_write(), config_format_json()             config-write.h
 *   config_print_help()                              config-flags.h
 *   config_mode_sync(), the enums' names             config-enums.h
 *   config_feature_enabled(), config_features_foreach()  config-features.h
 *   config_parse_duration(), config_format_duration()    config-duration.h
 *
 * Those headers also declare what the module's own files share; outside
 * src/config/, only the functions above are meant to be called.
 */
#include "config/config-args.h"
#include "config/config-duration.h"
#include "config/config-enums.h"
#include "config/config-features.h"
#include "config/config-flags.h"
#include "config/config-init.h"
#include "config/config-types.h"
#include "config/config-write.h"

/* Applies --config (if given) with upstream's precedence, then validates the
 * result. Errors are printed to stderr as one line naming the file and the
 * field; returns -EINVAL (bad content) or -errno (unreadable file). Unknown
 * and repeated fields in the file get a warning line and are skipped (the
 * last of repeated ones wins), as upstream's lenient fallback decoder does
 * for v1alpha1. */
int config_finish(struct kproxy_config *c);
