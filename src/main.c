/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kproxy's entry point: argv and configuration, then one of
 *
 *   kproxy render [flags] STATE...   print what a mode writes for a cluster state
 *   kproxy explain [flags] ...       what the proxy does with one connection, and why (cli/)
 *   kproxy trace [flags] ...         the kernel's walk of real packets (cli/, trace/)
 *   kproxy [flags]                   the node proxy (kube-proxy's command line)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/snapshot.h"
#include "cli/state.h"
#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "kube/intake.h"
#include "model/model.h"
#include "proxy/backend.h"
#include "proxy/backends.h"
#include "daemon/daemon.h"
#include "render/render.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/log.h"

/* kproxy render is kproxy's own: a usage error is 2, as for most tools.
 * The daemon's command line is kube-proxy's, which exits 1 for every error
 * (flags, --config, start-up), as cobra and component-base's cli.Run do. */
#define EXIT_USAGE 2

static int set_iptables_backend(enum iptables_backend *ret, const char *v) {
        enum iptables_backend b = iptables_backend_from_string(v);
        if (b < 0)
                return -EINVAL;
        *ret = b;
        return 0;
}

#define IPTABLES_BACKEND_HELP                                                                                      \
        "kproxy's own: the iptables backend to program, legacy or nft; auto (the default) picks the one the "   \
        "node's kubelet uses, as upstream's image does with iptables-wrapper"

/* The state comes first: its flags' setters take the same userdata. */
struct render_opts {
        struct cli_state st;
        bool netlink;                   /* --output netlink */
};

static int set_output(void *u, const char *v) {
        struct render_opts *o = u;
        if (strcmp(v, "text") != 0 && strcmp(v, "netlink") != 0)
                return -EINVAL;
        o->netlink = strcmp(v, "netlink") == 0;
        return 0;
}

static const struct config_extra_flag render_flags[] = {
        {"output", false, "text|netlink",
         "nftables mode: the nft script (default), or the nf_tables netlink batch the daemon sends, as bytes",
         set_output},
};

/* The same, once --config has had its say on the mode. */
static int render_refuses_config(const struct kproxy_config *c, const struct render_opts *o) {
        if (!backend_for_mode(c->mode)) {
                fprintf(stderr, "kproxy render: proxy mode %s is not supported: kproxy runs in " PROXY_MODE_NAMES
                                " mode\n",
                        proxy_mode_to_string(c->mode));
                return -EINVAL;
        }
        if (c->socket_lb && c->mode == PROXY_MODE_USERSPACE) {
                fprintf(stderr, "kproxy render: --socket-lb works beside iptables or nftables mode, not userspace "
                                "mode\n");
                return -EINVAL;
        }
        if (o->netlink && (c->mode != PROXY_MODE_NFTABLES || c->socket_lb)) {
                fprintf(stderr, "kproxy render: --output netlink is nftables mode's (its netlink batch), not %s\n",
                        c->socket_lb ? "--socket-lb's" : proxy_mode_to_string(c->mode));
                return -EINVAL;
        }
        return 0;
}

static const char render_usage[] =
        "Usage: kproxy render [flags] STATE...\n"
        "       kproxy render --kubeconfig FILE [flags]\n\n"
        "Print what kproxy would apply on a first full sync for the cluster\n"
        "state in STATE (files as printed by `kubectl get\n"
        "services,endpointslices,nodes -A -o json|yaml`, or YAML manifests; - is\n"
        "stdin), or, without STATE, for the API server's state now (one list of\n"
        "each resource, as --kubeconfig or --master reach it), in the mode of\n"
        "--proxy-mode (" PROXY_MODE_NAMES "):\n"
        "the iptables-restore input, the nft script (--output netlink: the netlink\n"
        "batch), or the addresses and frontends userspace mode serves. With\n"
        "--socket-lb: what its maps would hold instead, a line per translated\n"
        "service port. The daemon's actions (--cleanup, --init-only,\n"
        "--write-config-to, --version) are refused.\n";

/* How long render waits for the API server's lists. */
#define RENDER_API_TIMEOUT_MS 30000

static int cmd_render(int argc, char **argv) {
        struct kproxy_config cfg;
        struct render_opts o;
        struct render_params params;
        struct config_extra_flag flags[ELEMENTSOF(render_flags) + CLI_STATE_N_FLAGS];
        size_t n_flags = cli_state_flags(render_flags, ELEMENTSOF(render_flags), flags);
        struct buf out = BUF_INIT, warnings = BUF_INIT;
        struct intake *intake = NULL;
        char **files = NULL;
        size_t n_files = 0;
        int r, ret = EXIT_USAGE;

        o = (struct render_opts) {0};
        if (config_init(&cfg) < 0 || cli_state_init(&o.st) < 0)
                return EXIT_FAILURE;
        r = config_parse_args(&cfg, argc, argv, flags, n_flags, &o, &files, &n_files);
        if (r < 0)
                goto out;
        if (cfg.show_help) {
                config_print_help(render_usage, flags, n_flags);
                ret = 0;
                goto out;
        }
        if (cli_refuses_daemon_actions(&cfg, "render") < 0)
                goto out;
        if (config_finish(&cfg) < 0)
                goto out;
        if (render_refuses_config(&cfg, &o) < 0)
                goto out;
        cli_setup_logging(&cfg);
        bool from_api = n_files == 0 && ((cfg.kubeconfig && *cfg.kubeconfig) || (cfg.master && *cfg.master));
        if (n_files == 0 && !from_api) {
                fprintf(stderr, "kproxy render: no STATE file given, nor --kubeconfig or --master to list the "
                                "cluster's (see kproxy render --help)\n");
                goto out;
        }
        if (cli_state_prepare(&o.st, &cfg) < 0) {
                ret = EXIT_FAILURE;
                goto out;
        }
        const struct model *m = o.st.model;
        const struct inet_cidr *cidrs;
        size_t n_cidrs;
        if (from_api) {
                /* One list of everything the daemon watches, as explain
                 * takes it: what the daemon would write for this cluster now. */
                if (cli_snapshot(&cfg, o.st.node_name, &o.st.admit, RENDER_API_TIMEOUT_MS, &intake) < 0) {
                        ret = EXIT_FAILURE;
                        goto out;
                }
                m = intake_model(intake);
                cidrs = intake_service_cidrs(intake, &n_cidrs);
        } else {
                if (cli_state_load(&o.st, "render", files, n_files) < 0)
                        goto out;
                cidrs = cli_state_service_cidrs(&o.st, &n_cidrs);
        }

        r = render_params_init(&params, o.st.ip_family ? (uint8_t) o.st.ip_family : 4, &cfg, o.st.node_name,
                               model_node(m), &o.st.host, &warnings);
        cli_log_lines(&warnings);
        if (r < 0)
                goto out;
        /* --socket-lb: what its maps would hold, instead of the rules. */
        const struct backend_ops *ops = cfg.socket_lb ? backend_companions[0] : backend_for_mode(cfg.mode);
        r = ops ? ops->render(m, &params, cidrs, n_cidrs, o.netlink, &out) : -EOPNOTSUPP;
        render_params_done(&params);
        if (r < 0) {
                log_error_errno(r, "Failed to render rules");
                ret = EXIT_FAILURE;
                goto out;
        }
        /* Nothing to print leaves out.data NULL (no service translated). */
        if ((out.len && fwrite(out.data, 1, out.len, stdout) != out.len) || fflush(stdout) != 0) {
                log_error_errno(-errno, "Failed to write the rules");
                ret = EXIT_FAILURE;
                goto out;
        }
        ret = 0;
out:
        free(files);
        buf_done(&out);
        buf_done(&warnings);
        cli_state_done(&o.st);
        intake_free(intake);
        config_done(&cfg);
        return ret;
}

static int set_watch_idle(void *u, const char *v) {
        return config_parse_duration(v, &((struct daemon_opts *) u)->watch_idle_timeout_ms);
}

static int set_proxy_backend(void *u, const char *v) {
        return set_iptables_backend(&((struct daemon_opts *) u)->iptables_backend, v);
}

/* kproxy's own flags (not kube-proxy's); --config leaves them alone. */
static const struct config_extra_flag proxy_flags[] = {
        {"iptables-backend", false, "auto|legacy|nft",
         IPTABLES_BACKEND_HELP "; --cleanup cleans both backends unless this names one",
         set_proxy_backend},
        {"watch-idle-timeout", false, "DURATION",
         "restart a watch that has sent nothing (not even a bookmark) for this long (default 5m)", set_watch_idle},
};

static int cmd_proxy(int argc, char **argv) {
        struct kproxy_config cfg;
        struct daemon_opts dopts = {0};
        char **args = NULL;
        size_t n_args = 0;
        int ret = EXIT_FAILURE;

        if (config_init(&cfg) < 0)
                return EXIT_FAILURE;
        if (config_parse_args(&cfg, argc, argv, proxy_flags, ELEMENTSOF(proxy_flags), &dopts, &args, &n_args) < 0)
                goto out;
        if (cfg.show_help) {
                config_print_help("Usage: kproxy [flags]\n       kproxy render [flags] STATE...\n"
                                  "       kproxy explain [flags] --source IP --destination IP:PORT [STATE...]\n"
                                  "       kproxy trace [flags] --destination IP[:PORT]\n\n"
                                  "kproxy is a Kubernetes service proxy, a drop-in replacement for\n"
                                  "kube-proxy: it takes kube-proxy's flags and configuration file. Modes:\n"
                                  PROXY_MODE_NAMES " (--proxy-mode), and eBPF socket load balancing\n"
                                  "beside iptables or nftables (--socket-lb). Exit status: 0, or 1 for any\n"
                                  "error, as kube-proxy's.\n",
                                  proxy_flags, ELEMENTSOF(proxy_flags));
                ret = 0;
                goto out;
        }
        if (cfg.show_version) {
                /* Upstream's line, which scripts parse for the release;
                 * =raw: kproxy's own version (upstream prints its build's
                 * details there). */
                if (cfg.show_version_raw)
                        printf("kproxy version %s, following kube-proxy %s\n", KPROXY_VERSION, CONFIG_KUBE_VERSION);
                else
                        printf("Kubernetes %s\n", CONFIG_KUBE_VERSION);
                ret = 0;
                goto out;
        }
        if (n_args > 0) {
                fprintf(stderr, "kproxy: unexpected argument \"%s\" (see kproxy --help)\n", args[0]);
                goto out;
        }
        if (config_finish(&cfg) < 0)
                goto out;
        if (cfg.write_config_to) {
                int r = config_write(&cfg, cfg.write_config_to);
                if (r < 0) {
                        fprintf(stderr, "kproxy: cannot write %s: %s\n", cfg.write_config_to, strerror(-r));
                        ret = EXIT_FAILURE;
                } else {
                        ret = 0;
                }
                goto out;
        }
        cli_setup_logging(&cfg);
        ret = cfg.cleanup     ? daemon_cleanup(&cfg, &dopts)
              : cfg.init_only ? daemon_init_only(&cfg)
                              : daemon_run(&cfg, &dopts);
out:
        free(args);
        config_done(&cfg);
        return ret;
}

int main(int argc, char **argv) {
        if (argc > 1 && strcmp(argv[1], "render") == 0)
                return cmd_render(argc - 2, argv + 2);
        if (argc > 1 && strcmp(argv[1], "explain") == 0)
                return cli_explain(argc - 2, argv + 2);
        if (argc > 1 && strcmp(argv[1], "trace") == 0)
                return cli_trace(argc - 2, argv + 2);
        return cmd_proxy(argc - 1, argv + 1);
}
