/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of precedence. kproxy reads its settings the way upstream
 * kube-proxy 1.34 does, because it is dropped into DaemonSets and unit
 * files written for kube-proxy:
 *
 *   1. config_init() sets the defaults of kubeproxy.config.k8s.io/v1alpha1.
 *   2. config_parse_args() writes each flag over its field, as pflag does,
 *      and notes which flags were given.
 *   3. config_finish(), without --config, folds in the flags that upstream
 *      keeps outside its configuration (--iptables-sync-period and friends,
 *      the deprecated --healthz-port/--metrics-port). With --config, the file
 *      replaces every flag-set field: it is decoded onto a zeroed
 *      configuration, v1alpha1 defaulting fills the zero and null fields, and
 *      only --hostname-override and the logging flags (-v, --vmodule,
 *      --logging-format, --log-flush-frequency) are laid back on top.
 *   4. Platform defaults (mode, detect-local mode, nftables' "primary"
 *      NodePort addresses), then upstream's validation.
 *
 * Upstream decodes the file strictly and, when only strictness fails (an
 * unknown or repeated field), decodes it again leniently and carries on with
 * a log line. Clusters upgraded by kubeadm still carry removed fields such as
 * udpIdleTimeout, so a drop-in replacement must not refuse them: kproxy warns
 * with the field's path and line and carries on too. Type errors and invalid
 * values are fatal, as upstream.
 *
 * Durations are kept in milliseconds; finer parts of a Go duration are cut.
 *
 * The module's files, one concept each:
 *
 *   config.c            config_finish() (steps 3 and 4): the top, which
 *                       calls down into the others
 *   config-init.c       config_init(): the defaults (step 1); config_done()
 *   config-flags.c      the flag table: what each flag sets, and --help
 *   config-args.c       argv in pflag's syntax onto the flag table (step 2)
 *   config-file.c       reading --config, v1alpha1 defaulting, precedence
 *   config-decode.c     a KubeProxyConfiguration YAML document onto a struct
 *   config-validate.c   upstream's validation
 *   config-write.c      --write-config-to
 *   config-features.c   feature gates: upstream's rules over config-gates.c,
 *                       the table tools/gen-gates.py writes
 *   config-value.c      Go's syntax of bools, numbers and addresses; YAML scalars
 *   config-duration.c   Go's time.Duration syntax
 *   config-enums.c      the enums' names
 *   config-message.c    the one-line messages on stderr
 *
 * Each file has its own header and includes only the headers of what it
 * uses, so the calls run one way, down: config.c; config-file.c and
 * config-args.c; the flags, the decoder, the validation, the writer and
 * config-init.c; the feature gates, durations and enums; at the bottom
 * the gates' table, values and messages, and the headers that only
 * declare (config-types.h, config-defaults.h, config-cmdline.h). No file
 * of the module includes config.h, which gathers what the rest of kproxy
 * calls.
 */
#include "config/config.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/config-cmdline.h"
#include "config/config-file.h"
#include "config/config-message.h"
#include "config/config-validate.h"
#include "config/config-value.h"

/* addressFromDeprecatedFlags: port 0 turns the server off, any other port
 * completes an address that has none. */
static int address_from_port_flag(char **addr, int32_t port) {
        if (port == 0)
                return config_value_str_set(addr, NULL);
        return config_value_append_port(addr, (unsigned) port);
}

/* Without --config: what upstream's Complete() and processV1Alpha1Flags()
 * do with the flags that are not bound to the configuration directly. */
static int config_fold_flags(struct kproxy_config *c) {
        const struct config_cmdline *cl = c->cmdline;
        bool ipvs = c->mode == PROXY_MODE_IPVS;
        int r;

        /* Upstream has one internal sync period for whichever backend runs,
         * so the iptables flags set the nftables periods too. */
        if (!ipvs && config_flags_changed(c, "iptables-sync-period"))
                c->iptables.sync_period_ms = c->nftables.sync_period_ms = cl->iptables_sync_period_ms;
        if (!ipvs && config_flags_changed(c, "iptables-min-sync-period"))
                c->iptables.min_sync_period_ms = c->nftables.min_sync_period_ms = cl->iptables_min_sync_period_ms;
        if (ipvs && config_flags_changed(c, "ipvs-sync-period"))
                c->iptables.sync_period_ms = c->nftables.sync_period_ms = cl->ipvs_sync_period_ms;
        if (ipvs && config_flags_changed(c, "ipvs-min-sync-period"))
                c->iptables.min_sync_period_ms = c->nftables.min_sync_period_ms = cl->ipvs_min_sync_period_ms;

        if (c->write_config_to)
                return 0;
        r = address_from_port_flag(&c->healthz_bind_address, cl->healthz_port);
        if (r < 0)
                return r;
        return address_from_port_flag(&c->metrics_bind_address, cl->metrics_port);
}

/* platformApplyDefaults (Linux); the enums already turned "" into iptables
 * and ClusterCIDR. */
static int config_platform_defaults(struct kproxy_config *c) {
        if (c->mode == PROXY_MODE_NFTABLES && c->n_nodeport_addresses == 0)
                return config_value_strv_push(&c->nodeport_addresses, &c->n_nodeport_addresses, "primary",
                                              strlen("primary"));
        return 0;
}

/* --hostname-override wins over the file; either is trimmed and lower-cased
 * as upstream's processHostnameOverrideFlag() and GetHostname() do. */
static int config_resolve_hostname(struct kproxy_config *c) {
        const char *src = c->cmdline->hostname_override ? c->cmdline->hostname_override : c->hostname_override;
        bool from_flag = c->cmdline->hostname_override;
        size_t len = 0;
        char *n;

        if (!src)
                return 0;
        len = strlen(src);
        config_value_trim(&src, &len);
        if (len == 0) {
                if (from_flag)
                        return config_error("invalid value \"%s\" for flag --hostname-override: must not be blank",
                                            c->cmdline->hostname_override);
                return config_error("%s: invalid value \"%s\" for hostnameOverride: must not be blank", c->config_file,
                                    c->hostname_override);
        }
        n = strndup(src, len);
        if (!n)
                return -ENOMEM;
        for (char *p = n; *p; p++)
                *p = (char) tolower((unsigned char) *p);
        free(c->hostname_override);
        c->hostname_override = n;
        return 0;
}

int config_finish(struct kproxy_config *c) {
        int r;

        assert(c);
        assert(c->cmdline);

        r = c->config_file ? config_file_load(c) : config_fold_flags(c);
        if (r < 0)
                return r;
        r = config_platform_defaults(c);
        if (r < 0)
                return r;
        r = config_resolve_hostname(c);
        if (r < 0)
                return r;
        /* Where upstream's Complete() calls SetFromMap(): after the file has
         * replaced the flags, before validation. */
        r = config_features_check(c);
        if (r < 0)
                return r;
        c->nftables_shards = c->cmdline->nftables_shards;
        return config_validate(c);
}
