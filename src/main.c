/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kproxy's entry point: argv and configuration, then one of
 *
 *   kproxy render [flags] STATE...   print the iptables-restore input for a cluster state
 *   kproxy [flags]                   the node proxy (kube-proxy's command line)
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "host/host.h"
#include "kube/decode.h"
#include "kube/load.h"
#include "model/model.h"
#include "model/servicecidrs.h"
#include "proxy/backend.h"
#include "proxy/daemon.h"
#include "render/render.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/log.h"

/* kproxy render is kproxy's own: a usage error is 2, as for most tools.
 * The daemon's command line is kube-proxy's, which exits 1 for every error
 * (flags, --config, start-up), as cobra and component-base's cli.Run do. */
#define EXIT_USAGE 2

struct render_opts {
        struct host_facts host;
        enum iptables_backend iptables_backend;
        int random_fully;               /* --host-random-fully, or -1: probed */
        struct inet_cidr *flag_cidrs;           /* --service-cidrs */
        size_t n_flag_cidrs;
        struct service_cidrs *service_cidrs;    /* and the state's ServiceCIDR objects */
        int ip_family;
        bool netlink;                   /* --output netlink */
        const char *node_name;
        struct model *model;
};

/* -v, --vmodule, --logging-format and its options, once the configuration
 * is final (all were validated with it). */
static void setup_logging(const struct kproxy_config *c) {
        log_set_verbosity(c->verbosity);
        log_set_vmodule(c->log_vmodule);
        bool json = c->logging_format && strcmp(c->logging_format, "json") == 0;
        const struct config_log_output *o = json ? &c->log_json : &c->log_text;
        log_set_format(json ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT);
        log_set_split_stream(o->split_stream, (unsigned long) o->info_buffer_size);
}

static int parse_bool(const char *v, bool *ret) {
        if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
                *ret = true;
        else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
                *ret = false;
        else
                return -EINVAL;
        return 0;
}

static int set_host_addresses(void *u, const char *v) {
        struct render_opts *o = u;
        struct inet_cidr *a;
        size_t n;
        int r = host_parse_addresses(v, &a, &n);
        if (r < 0)
                return r;
        free(o->host.addrs);
        o->host.addrs = a;
        o->host.n_addrs = n;
        return 0;
}

static int set_random_fully(void *u, const char *v) {
        bool b;
        int r = parse_bool(v, &b);
        if (r == 0)
                ((struct render_opts *) u)->random_fully = b;
        return r;
}

static int set_iptables_backend(enum iptables_backend *ret, const char *v) {
        enum iptables_backend b = iptables_backend_from_string(v);
        if (b < 0)
                return -EINVAL;
        *ret = b;
        return 0;
}

static int set_render_backend(void *u, const char *v) {
        return set_iptables_backend(&((struct render_opts *) u)->iptables_backend, v);
}

#define IPTABLES_BACKEND_HELP                                                                                      \
        "kproxy's own: the iptables backend to program, legacy or nft; auto (the default) picks the one the "   \
        "node's kubelet uses, as upstream's image does with iptables-wrapper"

static int set_nfacct(void *u, const char *v) {
        return parse_bool(v, &((struct render_opts *) u)->host.nfacct);
}

static int set_tcp_be_liberal(void *u, const char *v) {
        return parse_bool(v, &((struct render_opts *) u)->host.tcp_be_liberal);
}

static int set_ip_family(void *u, const char *v) {
        struct render_opts *o = u;
        if (strcmp(v, "4") == 0 || strcmp(v, "IPv4") == 0)
                o->ip_family = 4;
        else if (strcmp(v, "6") == 0 || strcmp(v, "IPv6") == 0)
                o->ip_family = 6;
        else
                return -EINVAL;
        return 0;
}

static int set_service_cidrs(void *u, const char *v) {
        struct render_opts *o = u;
        size_t n = 1;
        for (const char *c = v; *c; c++)
                n += *c == ',';
        struct inet_cidr *a = calloc(n, sizeof *a);
        if (!a)
                return -ENOMEM;
        size_t k = 0;
        for (const char *c = v; *c;) {
                size_t len = strcspn(c, ",");
                char tmp[INET_CIDR_STRLEN + 8];
                if (len == 0 || len >= sizeof tmp)
                        goto bad;
                memcpy(tmp, c, len);
                tmp[len] = '\0';
                if (inet_cidr_parse(tmp, &a[k++]) < 0)
                        goto bad;
                c += len + (c[len] == ',');
        }
        free(o->flag_cidrs);
        o->flag_cidrs = a;
        o->n_flag_cidrs = k;
        return 0;
bad:
        free(a);
        return -EINVAL;
}

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
        {"service-cidrs", false, "CIDR,...",
         "ServiceCIDRs besides the state's ServiceCIDR objects (nftables mode drops traffic to unallocated "
         "cluster IPs in them)",
         set_service_cidrs},
        {"ip-family", false, "4|6", "IP family to render (default 4)", set_ip_family},
        {"host-addresses", false, "CIDR,...",
         "the node's interface addresses, for nodePortAddresses (default: probed)", set_host_addresses},
        {"host-random-fully", true, "BOOL",
         "iptables supports MASQUERADE --random-fully (default: probed, with the --iptables-backend tools)",
         set_random_fully},
        {"iptables-backend", false, "auto|legacy|nft", IPTABLES_BACKEND_HELP, set_render_backend},
        {"host-nfacct", true, "BOOL", "the nfacct counters exist (default: probed)", set_nfacct},
        {"host-tcp-be-liberal", true, "BOOL",
         "net.netfilter.nf_conntrack_tcp_be_liberal is set (default: probed)", set_tcp_be_liberal},
};

/* Decodes one object from a state file into the model. A bad object is
 * skipped with a warning naming it; the rest of the state still renders. */
/* A manifest's namespaced object without a namespace is created in
 * "default" by kubectl (with no other context): render reads it there, as
 * the API server would hold it. Returns a new reference to obj, or to a
 * shallow copy with metadata.namespace set. */
static json_t *as_created(const json_t *obj) {
        const json_t *md = json_object_get(obj, "metadata");
        const char *ns = json_string_value(json_object_get(md, "namespace"));
        json_t *copy, *mdcopy;

        if (!json_is_object(md) || (ns && *ns))
                return json_incref((json_t *) obj);
        copy = json_copy((json_t *) obj);
        mdcopy = json_copy((json_t *) md);
        if (!copy || !mdcopy || json_object_set_new(mdcopy, "namespace", json_string("default")) < 0 ||
            json_object_set_new(copy, "metadata", mdcopy) < 0)
                abort();
        return copy;
}

static int add_object(void *userdata, const json_t *in) {
        struct render_opts *o = userdata;
        const char *kind = json_string_value(json_object_get(in, "kind"));
        enum kube_kind k = kube_kind_from_string(kind);
        json_auto_t *obj = NULL;
        char err[KUBE_ERRLEN], ref[512];
        int r;

        obj = k == KUBE_KIND_SERVICE || k == KUBE_KIND_ENDPOINT_SLICE ? as_created(in) : json_incref((json_t *) in);
        kube_object_ref(obj, ref, sizeof ref);
        switch (k) {
        case KUBE_KIND_SERVICE: {
                struct svc *s;
                r = kube_decode_service(obj, &s, err);
                if (r == 0)
                        model_service_upsert(o->model, s);
                break;
        }
        case KUBE_KIND_ENDPOINT_SLICE: {
                struct slice *s;
                r = kube_decode_slice(obj, &s, err);
                if (r == 0)
                        model_slice_upsert(o->model, s);
                break;
        }
        case KUBE_KIND_NODE: {
                struct node *n;
                const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
                if (!name || strcmp(name, o->node_name) != 0)
                        return 0;       /* another node */
                r = kube_decode_node(obj, &n, err);
                if (r == 0)
                        model_node_set(o->model, n);
                break;
        }
        case KUBE_KIND_SERVICE_CIDR: {
                _cleanup_free_ char *name = NULL;
                _cleanup_free_ struct inet_cidr *cidrs = NULL;
                size_t n;
                r = kube_decode_service_cidr(obj, &name, &cidrs, &n, err);
                if (r == 0)
                        service_cidrs_set(o->service_cidrs, name, cidrs, n);
                break;
        }
        default:
                log_v(2, "Ignoring object %s of kind %s", ref, kind ? kind : "(none)");
                return 0;
        }
        if (r < 0)
                log_warning("Skipping invalid %s %s: %s", kind, ref, err);
        else if (r == KUBE_IGNORED)
                log_v(2, "Ignoring %s %s: %s", kind, ref, err);
        return 0;
}

static void log_lines(const struct buf *b) {
        if (!b->data)
                return;
        for (const char *p = b->data; *p;) {
                size_t len = strcspn(p, "\n");
                log_warning("%.*s", (int) len, p);
                p += len + (p[len] == '\n');
        }
}

/* What render cannot honour is refused, naming the flag, rather than
 * ignored: the daemon's actions (a user who adds --cleanup to a render
 * expects something else), and the flags' combinations the daemon refuses.
 * Returns 0 or -EINVAL (said on stderr). */
static int render_refuses(const struct kproxy_config *c) {
        static const char *const actions[] = {"--cleanup", "--init-only", "--write-config-to", "--version"};
        const bool given[] = {c->cleanup, c->init_only, c->write_config_to != NULL, c->show_version};
        for (size_t i = 0; i < ELEMENTSOF(actions); i++)
                if (given[i]) {
                        fprintf(stderr, "kproxy render: %s is the daemon's (kproxy %s), not render's\n", actions[i],
                                actions[i]);
                        return -EINVAL;
                }
        return 0;
}

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
        "Usage: kproxy render [flags] STATE...\n\n"
        "Print what kproxy would apply on a first full sync for the cluster\n"
        "state in STATE (files as printed by `kubectl get\n"
        "services,endpointslices,nodes -A -o json|yaml`, or YAML manifests; - is\n"
        "stdin), in the mode of --proxy-mode (" PROXY_MODE_NAMES "):\n"
        "the iptables-restore input, the nft script (--output netlink: the netlink\n"
        "batch), or the addresses and frontends userspace mode serves. With\n"
        "--socket-lb: what its maps would hold instead, a line per translated\n"
        "service port. The daemon's actions (--cleanup, --init-only,\n"
        "--write-config-to, --version) are refused.\n";

static int cmd_render(int argc, char **argv) {
        struct kproxy_config cfg;
        struct render_opts o = {.ip_family = 4, .random_fully = -1};
        struct render_params params;
        struct buf out = BUF_INIT, warnings = BUF_INIT;
        char **files = NULL;
        size_t n_files = 0;
        int r, ret = EXIT_USAGE;

        if (config_init(&cfg) < 0 || host_probe(&o.host) < 0)
                return EXIT_FAILURE;
        r = config_parse_args(&cfg, argc, argv, render_flags, ELEMENTSOF(render_flags), &o, &files, &n_files);
        if (r < 0)
                goto out;
        if (cfg.show_help) {
                config_print_help(render_usage, render_flags, ELEMENTSOF(render_flags));
                ret = 0;
                goto out;
        }
        if (render_refuses(&cfg) < 0)
                goto out;
        if (config_finish(&cfg) < 0)
                goto out;
        if (render_refuses_config(&cfg, &o) < 0)
                goto out;
        setup_logging(&cfg);
        if (n_files == 0) {
                fprintf(stderr, "kproxy render: no STATE file given (see kproxy render --help)\n");
                goto out;
        }

        /* Only --random-fully depends on the iptables backend: probe only
         * for it (the modes that do not masquerade with iptables ignore it). */
        if (o.random_fully < 0) {
                host_probe_iptables(&o.host, o.iptables_backend);
                log_v(2, "iptables backend %s, run as %s: %s", iptables_backend_to_string(o.host.iptables.backend),
                      iptables_tool_name(&o.host.iptables, 4, IPTABLES_TOOL_CMD), o.host.iptables_why);
        } else {
                o.host.random_fully = o.random_fully > 0;
        }
        o.node_name = cfg.hostname_override && *cfg.hostname_override ? cfg.hostname_override
                      : o.host.hostname                                 ? o.host.hostname
                                                                        : "";
        o.model = model_new();
        o.service_cidrs = service_cidrs_new();
        if (!o.model || !o.service_cidrs) {
                ret = EXIT_FAILURE;
                goto out;
        }
        for (size_t i = 0; i < n_files; i++) {
                char err[KUBE_LOAD_ERRLEN];
                r = kube_load_file(files[i], add_object, &o, err);
                if (r < 0) {
                        fprintf(stderr, "kproxy render: %s\n", err);
                        goto out;
                }
        }
        if (!model_node(o.model))
                log_warning("Node %s is not in the state: no node IPs, labels or pod CIDRs", o.node_name);
        /* The flag's CIDRs join the state's objects' (not a name an object can have). */
        service_cidrs_set(o.service_cidrs, "--service-cidrs", o.flag_cidrs, o.n_flag_cidrs);
        size_t n_cidrs;
        const struct inet_cidr *cidrs = service_cidrs_all(o.service_cidrs, &n_cidrs);

        r = render_params_init(&params, (uint8_t) o.ip_family, &cfg, o.node_name, model_node(o.model), &o.host,
                               &warnings);
        log_lines(&warnings);
        if (r < 0)
                goto out;
        /* --socket-lb: what its maps would hold, instead of the rules. */
        const struct backend_ops *ops = cfg.socket_lb ? backend_companions[0] : backend_for_mode(cfg.mode);
        r = ops ? ops->render(o.model, &params, cidrs, n_cidrs, o.netlink, &out) : -EOPNOTSUPP;
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
        free(o.flag_cidrs);
        service_cidrs_free(o.service_cidrs);
        buf_done(&out);
        buf_done(&warnings);
        model_free(o.model);
        host_facts_done(&o.host);
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
                config_print_help("Usage: kproxy [flags]\n       kproxy render [flags] STATE...\n\n"
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
        setup_logging(&cfg);
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
        return cmd_proxy(argc - 1, argv + 1);
}
