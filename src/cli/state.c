/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A cluster state from files, for render and explain (cli/state.h): the
 * flags that describe the node instead of probing it, and each object of
 * the files decoded into the model as the API client would decode it.
 */
#include "cli/state.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "host/admission.h"
#include "kube/decode.h"
#include "kube/load.h"
#include "model/model.h"
#include "model/servicecidrs.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/log.h"

#define IPTABLES_BACKEND_HELP                                                                                      \
        "kproxy's own: the iptables backend to program, legacy or nft; auto (the default) picks the one the "   \
        "node's kubelet uses, as upstream's image does with iptables-wrapper"

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
        struct cli_state *o = u;
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
                ((struct cli_state *) u)->random_fully = b;
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
        return set_iptables_backend(&((struct cli_state *) u)->iptables_backend, v);
}

static int set_nfacct(void *u, const char *v) {
        return parse_bool(v, &((struct cli_state *) u)->host.nfacct);
}

static int set_tcp_be_liberal(void *u, const char *v) {
        return parse_bool(v, &((struct cli_state *) u)->host.tcp_be_liberal);
}

static int set_ip_family(void *u, const char *v) {
        struct cli_state *o = u;
        if (strcmp(v, "4") == 0 || strcmp(v, "IPv4") == 0)
                o->ip_family = 4;
        else if (strcmp(v, "6") == 0 || strcmp(v, "IPv6") == 0)
                o->ip_family = 6;
        else
                return -EINVAL;
        return 0;
}

static int set_service_cidrs(void *u, const char *v) {
        struct cli_state *o = u;
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

static const struct config_extra_flag state_flags[CLI_STATE_N_FLAGS] = {
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

size_t cli_state_flags(const struct config_extra_flag *own, size_t n_own, struct config_extra_flag *out) {
        memcpy(out, own, n_own * sizeof *own);
        memcpy(out + n_own, state_flags, sizeof state_flags);
        return n_own + CLI_STATE_N_FLAGS;
}

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
        struct cli_state *o = userdata;
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

/* -v, --vmodule, --logging-format and its options, once the configuration
 * is final (all were validated with it). */
void cli_setup_logging(const struct kproxy_config *c) {
        log_set_verbosity(c->verbosity);
        log_set_vmodule(c->log_vmodule);
        bool json = c->logging_format && strcmp(c->logging_format, "json") == 0;
        const struct config_log_output *o = json ? &c->log_json : &c->log_text;
        log_set_format(json ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT);
        log_set_split_stream(o->split_stream, (unsigned long) o->info_buffer_size);
}

/* What render cannot honour is refused, naming the flag, rather than
 * ignored: the daemon's actions (a user who adds --cleanup to a render
 * expects something else), and the flags' combinations the daemon refuses.
 * Returns 0 or -EINVAL (said on stderr). */
int cli_refuses_daemon_actions(const struct kproxy_config *c, const char *cmd) {
        static const char *const actions[] = {"--cleanup", "--init-only", "--write-config-to", "--version"};
        const bool given[] = {c->cleanup, c->init_only, c->write_config_to != NULL, c->show_version};
        for (size_t i = 0; i < ELEMENTSOF(actions); i++)
                if (given[i]) {
                        fprintf(stderr, "kproxy %s: %s is the daemon's (kproxy %s), not %s's\n", cmd, actions[i],
                                actions[i], cmd);
                        return -EINVAL;
                }
        return 0;
}

void cli_log_lines(const struct buf *b) {
        if (!b->data)
                return;
        for (const char *p = b->data; *p;) {
                size_t len = strcspn(p, "\n");
                log_warning("%.*s", (int) len, p);
                p += len + (p[len] == '\n');
        }
}

int cli_state_init(struct cli_state *s) {
        *s = (struct cli_state) {.random_fully = -1};
        return host_probe(&s->host);
}

int cli_state_prepare(struct cli_state *s, const struct kproxy_config *c) {
        /* Only --random-fully depends on the iptables backend: probe only
         * for it (the modes that do not masquerade with iptables ignore it). */
        if (s->random_fully < 0) {
                host_probe_iptables(&s->host, s->iptables_backend);
                log_v(2, "iptables backend %s, run as %s: %s", iptables_backend_to_string(s->host.iptables.backend),
                      iptables_tool_name(&s->host.iptables, 4, IPTABLES_TOOL_CMD), s->host.iptables_why);
        } else {
                s->host.random_fully = s->random_fully > 0;
        }
        s->node_name = c->hostname_override && *c->hostname_override ? c->hostname_override
                       : s->host.hostname                              ? s->host.hostname
                                                                       : "";
        s->model = model_new();
        s->service_cidrs = service_cidrs_new();
        if (!s->model || !s->service_cidrs)
                return -ENOMEM;
        return admission_from_config(c, &s->admit);
}

/* The claimed addresses, decided once every object is in (the API
 * server's endpoints and the Node among them); each refusal a warning,
 * in the services' order. */
static void admit_all(struct cli_state *s) {
        struct buf line = BUF_INIT;
        size_t n;
        const struct svc **all = model_services_sorted(s->model, &n);

        for (size_t i = 0; i < n; i++) {
                struct svc *a = admit_claims(all[i]) ? admit_service(&s->admit, s->model, all[i]) : NULL;
                if (!a)
                        continue;
                for (uint32_t k = 0; k < a->n_refused; k++) {
                        buf_clear(&line);
                        admit_describe_refusal(a->key, &a->refused[k], &line);
                        log_warning("%s", line.data);
                }
                model_service_upsert(s->model, a);      /* frees all[i], not read again */
        }
        free(all);
        buf_done(&line);
}

int cli_state_load(struct cli_state *s, const char *cmd, char **files, size_t n_files) {
        for (size_t i = 0; i < n_files; i++) {
                char err[KUBE_LOAD_ERRLEN];
                int r = kube_load_file(files[i], add_object, s, err);
                if (r < 0) {
                        fprintf(stderr, "kproxy %s: %s\n", cmd, err);
                        return r;
                }
        }
        if (!model_node(s->model))
                log_warning("Node %s is not in the state: no node IPs, labels or pod CIDRs", s->node_name);
        admit_all(s);
        return 0;
}

const struct inet_cidr *cli_state_service_cidrs(struct cli_state *s, size_t *ret_n) {
        /* The flag's CIDRs join the state's objects' (not a name an object can have). */
        service_cidrs_set(s->service_cidrs, "--service-cidrs", s->flag_cidrs, s->n_flag_cidrs);
        return service_cidrs_all(s->service_cidrs, ret_n);
}

void cli_state_done(struct cli_state *s) {
        free(s->flag_cidrs);
        service_cidrs_free(s->service_cidrs);
        model_free(s->model);
        admit_policy_done(&s->admit);
        host_facts_done(&s->host);
        *s = (struct cli_state) {0};
}
