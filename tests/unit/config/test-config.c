/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config: defaults, every flag form, the KubeProxyConfiguration file as
 * kubeadm writes it, upstream's precedence, validation, and write/read
 * round trips. Messages on stderr are captured and checked, since naming the
 * flag or field is part of the contract.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "config/config.h"
#include "test.h"
#include "util/buf.h"

/* ---- helpers ---------------------------------------------------------- */

static int saved_fd = -1;
static FILE *capture_file;

static void capture_begin(int fd) {
        fflush(fd == 1 ? stdout : stderr);
        capture_file = tmpfile();
        saved_fd = dup(fd);
        dup2(fileno(capture_file), fd);
}

/* Returns what was written to fd since capture_begin(fd); owned. */
static char *capture_end(int fd) {
        char *text;
        long n;

        fflush(fd == 1 ? stdout : stderr);
        dup2(saved_fd, fd);
        close(saved_fd);
        n = ftell(capture_file);
        text = calloc(1, (size_t) n + 1);
        rewind(capture_file);
        if (text && fread(text, 1, (size_t) n, capture_file) != (size_t) n)
                text[0] = '\0';
        fclose(capture_file);
        return text;
}

#define CHECK_CONTAINS(hay, needle)                                                             \
        do {                                                                                    \
                const char *_h = (hay), *_n = (needle);                                         \
                if (!_h || !strstr(_h, _n)) {                                                   \
                        fprintf(stderr, "%s:%d: CHECK failed: \"%s\" not in:\n%s\n", __FILE__,  \
                                __LINE__, _n, _h ? _h : "(null)");                              \
                        test_failed_checks++;                                                   \
                }                                                                               \
        } while (0)

/* Parses the NULL-terminated flags onto c, with stderr captured into
 * *ret_err (owned) when ret_err is given. */
static int parse_v(struct kproxy_config *c, char **ret_err, va_list ap) {
        char *argv[64];
        int argc = 0, r;

        for (const char *a; (a = va_arg(ap, const char *)) && argc < 63;)
                argv[argc++] = (char *) a;
        argv[argc] = NULL;
        if (ret_err)
                capture_begin(2);
        r = config_parse_args(c, argc, argv, NULL, 0, NULL, NULL, NULL);
        if (ret_err)
                *ret_err = capture_end(2);
        return r;
}

static int parse(struct kproxy_config *c, ...) {
        va_list ap;
        int r;

        va_start(ap, c);
        r = parse_v(c, NULL, ap);
        va_end(ap);
        return r;
}

static int parse_err(struct kproxy_config *c, char **ret_err, ...) {
        va_list ap;
        int r;

        va_start(ap, ret_err);
        r = parse_v(c, ret_err, ap);
        va_end(ap);
        return r;
}

/* config_init + flags + config_finish; stderr captured into *ret_err. */
static int setup(struct kproxy_config *c, char **ret_err, ...) {
        va_list ap;
        char *err = NULL;
        int r;

        if (config_init(c) < 0)
                abort();
        va_start(ap, ret_err);
        r = parse_v(c, &err, ap);
        va_end(ap);
        if (r >= 0) {
                char *more;

                capture_begin(2);
                r = config_finish(c);
                more = capture_end(2);
                if (more && *more) {
                        size_t n = strlen(err) + strlen(more) + 1;
                        char *both = malloc(n);

                        snprintf(both, n, "%s%s", err, more);
                        free(err);
                        err = both;
                }
                free(more);
        }
        if (ret_err)
                *ret_err = err;
        else
                free(err);
        return r;
}

static char tmpdir[] = "/tmp/test-config-XXXXXX";

/* Writes text to a new file in tmpdir; returns its path (owned). */
static char *write_temp(const char *name, const char *text) {
        char *path;
        FILE *f;

        if (asprintf(&path, "%s/%s", tmpdir, name) < 0)
                abort();
        f = fopen(path, "w");
        if (!f)
                abort();
        fputs(text, f);
        fclose(f);
        return path;
}

/* What `kubectl -n kube-system get cm kube-proxy` shows in config.conf on a
 * kubeadm 1.31 cluster: almost everything zero or null, left to defaulting. */
static const char kubeadm_config[] =
        "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n"
        "bindAddress: 0.0.0.0\n"
        "bindAddressHardFail: false\n"
        "clientConnection:\n"
        "  acceptContentTypes: \"\"\n"
        "  burst: 0\n"
        "  contentType: \"\"\n"
        "  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\n"
        "  qps: 0\n"
        "clusterCIDR: 10.244.0.0/16\n"
        "configSyncPeriod: 0s\n"
        "conntrack:\n"
        "  maxPerCore: null\n"
        "  min: null\n"
        "  tcpBeLiberal: false\n"
        "  tcpCloseWaitTimeout: null\n"
        "  tcpEstablishedTimeout: null\n"
        "  udpStreamTimeout: 0s\n"
        "  udpTimeout: 0s\n"
        "detectLocal:\n"
        "  bridgeInterface: \"\"\n"
        "  interfaceNamePrefix: \"\"\n"
        "detectLocalMode: \"\"\n"
        "enableProfiling: false\n"
        "healthzBindAddress: \"\"\n"
        "hostnameOverride: \"\"\n"
        "iptables:\n"
        "  localhostNodePorts: null\n"
        "  masqueradeAll: false\n"
        "  masqueradeBit: null\n"
        "  minSyncPeriod: 0s\n"
        "  syncPeriod: 0s\n"
        "ipvs:\n"
        "  excludeCIDRs: null\n"
        "  minSyncPeriod: 0s\n"
        "  scheduler: \"\"\n"
        "  strictARP: false\n"
        "  syncPeriod: 0s\n"
        "  tcpFinTimeout: 0s\n"
        "  tcpTimeout: 0s\n"
        "  udpTimeout: 0s\n"
        "kind: KubeProxyConfiguration\n"
        "logging:\n"
        "  flushFrequency: 0\n"
        "  options:\n"
        "    json:\n"
        "      infoBufferSize: \"0\"\n"
        "    text:\n"
        "      infoBufferSize: \"0\"\n"
        "  verbosity: 0\n"
        "metricsBindAddress: \"\"\n"
        "mode: \"\"\n"
        "nftables:\n"
        "  masqueradeAll: false\n"
        "  masqueradeBit: null\n"
        "  minSyncPeriod: 0s\n"
        "  syncPeriod: 0s\n"
        "nodePortAddresses: null\n"
        "oomScoreAdj: null\n"
        "portRange: \"\"\n"
        "showHiddenMetricsForVersion: \"\"\n"
        "winkernel:\n"
        "  enableDSR: false\n"
        "  forwardHealthCheckVip: false\n"
        "  networkName: \"\"\n"
        "  rootHnsEndpointName: \"\"\n"
        "  sourceVip: \"\"\n";

static void check_upstream_defaults(const struct kproxy_config *c) {
        CHECK_STREQ(c->bind_address, "0.0.0.0");
        CHECK(!c->bind_address_hard_fail);
        CHECK_STREQ(c->healthz_bind_address, "0.0.0.0:10256");
        CHECK_STREQ(c->metrics_bind_address, "127.0.0.1:10249");
        CHECK(c->mode == PROXY_MODE_IPTABLES);
        CHECK(c->detect_local_mode == DETECT_LOCAL_CLUSTER_CIDR);
        CHECK(c->iptables.masquerade_bit == 14);
        CHECK(!c->iptables.masquerade_all);
        CHECK(c->iptables.localhost_nodeports);
        CHECK(c->iptables.sync_period_ms == 30000);
        CHECK(c->iptables.min_sync_period_ms == 1000);
        CHECK(c->nftables.masquerade_bit == 14);
        CHECK(!c->nftables.masquerade_all);
        CHECK(c->nftables.sync_period_ms == 30000);
        CHECK(c->nftables.min_sync_period_ms == 1000);
        CHECK(c->conntrack.max_per_core == 32768);
        CHECK(c->conntrack.min == 131072);
        CHECK(!c->conntrack.tcp_be_liberal);
        CHECK(c->conntrack.tcp_established_timeout_ms == 24ull * 3600 * 1000);
        CHECK(c->conntrack.tcp_close_wait_timeout_ms == 3600ull * 1000);
        CHECK(c->conntrack.udp_timeout_ms == 0);
        CHECK(c->conntrack.udp_stream_timeout_ms == 0);
        CHECK_STREQ(c->content_type, "application/vnd.kubernetes.protobuf");
        CHECK(c->accept_content_types == NULL);
        CHECK(c->qps == 5.0f);
        CHECK(c->burst == 10);
        CHECK(c->config_sync_period_ms == 15ull * 60 * 1000);
        CHECK(c->has_oom_score_adj && c->oom_score_adj == -999);
        CHECK(!c->enable_profiling);
        CHECK(c->n_feature_gates == 0);
        CHECK(c->verbosity == 0);
        CHECK_STREQ(c->logging_format, "text");
        CHECK(c->log_flush_frequency_ms == 5000);
        CHECK(c->log_vmodule == NULL);
}

/* ---- tests ------------------------------------------------------------ */

static void test_defaults(void) {
        struct kproxy_config c;

        CHECK(config_init(&c) == 0);
        check_upstream_defaults(&c);
        CHECK(c.hostname_override == NULL);
        CHECK(c.cluster_cidr == NULL);
        CHECK(c.n_nodeport_addresses == 0);
        CHECK(c.kubeconfig == NULL && c.master == NULL && c.config_file == NULL);
        CHECK(!c.cleanup && !c.init_only && !c.show_version && !c.show_help);
        CHECK(config_finish(&c) == 0);
        check_upstream_defaults(&c);
        CHECK(config_mode_sync(&c) == &c.iptables);
        config_done(&c);
        config_done(&c);        /* idempotent */
}

static void test_flag_forms(void) {
        struct kproxy_config c;
        char **args = NULL;
        size_t n_args = 99;
        char *argv[] = {
                "--iptables-masquerade-bit", "15",
                "--kube-api-qps=7.5",
                "--masquerade-all",
                "--iptables-localhost-nodeports=false",
                "--profiling=true",
                "--conntrack-tcp-be-liberal",
                "positional1",
                "--cluster-cidr", "10.0.0.0/8,fd00::/64",
                "-v", "4",
                "--conntrack-max-per-core=0x10",
                "--oom-score-adj", "-500",
                "--config-sync-period", "1m30s",
                "--kubeconfig=/etc/kp/kubeconfig",
                "--master", "https://10.0.0.1:6443",
                "--pod-bridge-interface", "cbr0",
                "--pod-interface-name-prefix=veth",
                "--bind-address", "10.1.2.3",
                "--bind-address-hard-fail",
                "--kube-api-burst", "20",
                "--kube-api-content-type", "application/json",
                "--show-hidden-metrics-for-version=1.30",
                "--logging-format", "json",
                "--log-flush-frequency", "2s",
                "--cleanup", "--init-only",
                "--write-config-to", "/tmp/out.yaml",
                "--ipvs-scheduler", "rr", "--ipvs-strict-arp", "--ipvs-tcp-timeout=5s",
                "--ipvs-exclude-cidrs", "10.0.0.0/8,192.168.0.0/16",
                "--log-text-split-stream=false", "--log-json-info-buffer-size", "64Ki",
                "--boot-id-file", "/x", "--machine-id-file=/y",
                "--",
                "--not-a-flag",
                NULL,
        };

        CHECK(config_init(&c) == 0);
        CHECK(config_parse_args(&c, (int) (sizeof argv / sizeof argv[0]) - 1, argv, NULL, 0, NULL, &args,
                                &n_args) == 0);
        CHECK(c.iptables.masquerade_bit == 15);
        CHECK(c.nftables.masquerade_bit == 14);         /* upstream has no nftables flag for it */
        CHECK(c.qps == 7.5f);
        CHECK(c.iptables.masquerade_all && c.nftables.masquerade_all);
        CHECK(!c.iptables.localhost_nodeports);
        CHECK(c.enable_profiling);
        CHECK(c.conntrack.tcp_be_liberal);
        CHECK_STREQ(c.cluster_cidr, "10.0.0.0/8,fd00::/64");
        CHECK(c.verbosity == 4);
        CHECK(c.conntrack.max_per_core == 16);
        CHECK(c.oom_score_adj == -500);
        CHECK(c.config_sync_period_ms == 90000);
        CHECK_STREQ(c.kubeconfig, "/etc/kp/kubeconfig");
        CHECK_STREQ(c.master, "https://10.0.0.1:6443");
        CHECK_STREQ(c.bridge_interface, "cbr0");
        CHECK_STREQ(c.interface_name_prefix, "veth");
        CHECK_STREQ(c.bind_address, "10.1.2.3");
        CHECK(c.bind_address_hard_fail);
        CHECK(c.burst == 20);
        CHECK_STREQ(c.content_type, "application/json");
        CHECK_STREQ(c.show_hidden_metrics_for_version, "1.30");
        CHECK_STREQ(c.logging_format, "json");
        CHECK(c.log_flush_frequency_ms == 2000);
        CHECK(c.cleanup && c.init_only);
        CHECK_STREQ(c.write_config_to, "/tmp/out.yaml");
        CHECK(n_args == 2);
        CHECK(args && args[0] == argv[7] && args[1] == argv[sizeof argv / sizeof argv[0] - 2] && !args[2]);
        free(args);
        config_done(&c);
}

static void test_flag_short_and_names(void) {
        struct kproxy_config c;

        CHECK(config_init(&c) == 0);
        CHECK(parse(&c, "-v5", NULL) == 0 && c.verbosity == 5);
        CHECK(parse(&c, "-v=6", NULL) == 0 && c.verbosity == 6);
        CHECK(parse(&c, "--v=7", NULL) == 0 && c.verbosity == 7);
        CHECK(parse(&c, "--v", "8", NULL) == 0 && c.verbosity == 8);
        CHECK(parse(&c, "-h", NULL) == 0 && c.show_help);
        c.show_help = false;
        CHECK(parse(&c, "--help", NULL) == 0 && c.show_help);
        c.show_help = false;
        CHECK(parse(&c, "-hv2", NULL) == 0 && c.show_help && c.verbosity == 2);
        CHECK(parse(&c, "--version", NULL) == 0 && c.show_version);
        CHECK(parse(&c, "--version=false", NULL) == 0 && !c.show_version);
        CHECK(parse(&c, "--version=raw", NULL) == 0 && c.show_version && c.show_version_raw);
        CHECK(parse(&c, "--version", NULL) == 0 && c.show_version && !c.show_version_raw);
        /* cliflag.WordSepNormalizeFunc */
        CHECK(parse(&c, "--iptables_masquerade_bit=3", NULL) == 0 && c.iptables.masquerade_bit == 3);
        /* a value that looks like a flag is still the value */
        CHECK(parse(&c, "--hostname-override", "-weird", NULL) == 0);
        /* bools take t/F/1/0 as strconv.ParseBool does */
        CHECK(parse(&c, "--masquerade-all=T", NULL) == 0 && c.iptables.masquerade_all);
        CHECK(parse(&c, "--masquerade-all=0", NULL) == 0 && !c.iptables.masquerade_all);
        /* "--flag false" is a bare flag and a positional argument, as pflag has it */
        {
                char *argv[] = { "--profiling", "false", NULL };
                char **args = NULL;
                size_t n = 0;

                CHECK(config_parse_args(&c, 2, argv, NULL, 0, NULL, &args, &n) == 0);
                CHECK(c.enable_profiling && n == 1 && args && args[0] == argv[1]);
                free(args);
        }
        config_done(&c);
}

static void test_flag_errors(void) {
        static const struct {
                const char *args[3];
                const char *message;
        } cases[] = {
                { { "--iptables-masquerade-bit", "abc" },
                  "kproxy: invalid value \"abc\" for flag --iptables-masquerade-bit: must be an integer in 0..31\n" },
                { { "--iptables-masquerade-bit=32" }, "for flag --iptables-masquerade-bit: must be an integer in 0..31" },
                { { "--iptables-masquerade-bit=-1" }, "--iptables-masquerade-bit" },
                { { "--oom-score-adj", "1001" }, "--oom-score-adj: must be an integer in -1000..1000" },
                { { "--conntrack-min", "-5" }, "--conntrack-min" },
                { { "--no-such-flag" }, "kproxy: unknown flag: --no-such-flag\n" },
                { { "--iptables-sync-period" }, "flag needs an argument: --iptables-sync-period" },
                { { "--iptables-sync-period", "30" }, "invalid value \"30\" for flag --iptables-sync-period" },
                { { "--iptables-sync-period", "-1s" }, "--iptables-sync-period" },
                { { "--config-sync-period=1x" }, "--config-sync-period" },
                { { "--masquerade-all=maybe" }, "invalid value \"maybe\" for flag --masquerade-all: must be true or false" },
                { { "--bind-address", "1.2.3" }, "--bind-address: must be an IP address" },
                { { "--bind-address", "10.0.0.1:80" }, "--bind-address" },
                { { "--healthz-bind-address", "1.2.3.4:99999" }, "--healthz-bind-address: must be IP or IP:port" },
                { { "--metrics-bind-address=localhost:10249" }, "--metrics-bind-address" },
                { { "--proxy-mode", "kernelspace" }, "--proxy-mode: must be iptables, nftables or userspace (ipvs is parsed, "
                                                          "and refused at start-up)" },
                { { "--detect-local-mode", "clustercidr" }, "--detect-local-mode" },
                { { "--feature-gates", "Foo" }, "--feature-gates: \"Foo\" is not name=true|false" },
                { { "--feature-gates", "Foo=maybe" }, "--feature-gates" },
                { { "--feature-gates", "=true" }, "--feature-gates" },
                { { "-v", "-1" }, "invalid value \"-1\" for flag --v" },
                { { "-v", "0x4" }, "--v" },
                { { "-x" }, "unknown shorthand flag: 'x' in -x" },
                { { "-v" }, "flag needs an argument: -v" },
                { { "---triple" }, "bad flag syntax: ---triple" },
                { { "--kube-api-qps", "fast" }, "--kube-api-qps: must be a number" },
                { { "--logging-format", "xml" }, "--logging-format: must be text or json" },
                { { "--vmodule", "foo" }, "--vmodule: must be pattern=N" },
                { { "--healthz-port", "70000" }, "--healthz-port" },
                { { "--ipvs-exclude-cidrs", "10.0.0.0/33" }, "--ipvs-exclude-cidrs" },
                { { "--log-json-split-stream=nope" }, "--log-json-split-stream" },
                { { "--version=maybe" }, "--version" },
        };

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                struct kproxy_config c;
                char *err = NULL;
                int r;

                CHECK(config_init(&c) == 0);
                r = parse_err(&c, &err, cases[i].args[0], cases[i].args[1], cases[i].args[2], NULL);
                if (r != -EINVAL)
                        fprintf(stderr, "case %zu (%s): r=%d\n", i, cases[i].args[0], r);
                CHECK(r == -EINVAL);
                CHECK_CONTAINS(err, cases[i].message);
                /* exactly one line */
                CHECK(err && strchr(err, '\n') == err + strlen(err) - 1);
                free(err);
                config_done(&c);
        }
}

static void test_ip_port_flags(void) {
        struct kproxy_config c;
        char *err = NULL;

        /* An empty value leaves the default, as utilflag.IPVar/IPPortVar do. */
        CHECK(setup(&c, NULL, "--bind-address=", "--healthz-bind-address=", NULL) == 0);
        CHECK_STREQ(c.bind_address, "0.0.0.0");
        CHECK_STREQ(c.healthz_bind_address, "0.0.0.0:10256");
        config_done(&c);

        /* A bare IP gets the (deprecated flag's) port. */
        CHECK(setup(&c, NULL, "--healthz-bind-address", "10.0.0.5", "--metrics-bind-address", "::", NULL) == 0);
        CHECK_STREQ(c.healthz_bind_address, "10.0.0.5:10256");
        CHECK_STREQ(c.metrics_bind_address, "[::]:10249");
        config_done(&c);

        CHECK(setup(&c, &err, "--metrics-bind-address", "0.0.0.0", "--metrics-port", "9100", "--healthz-port", "0",
                    NULL) == 0);
        CHECK_CONTAINS(err, "flag --metrics-port is deprecated");
        CHECK_STREQ(c.metrics_bind_address, "0.0.0.0:9100");
        CHECK(c.healthz_bind_address == NULL);
        free(err);
        config_done(&c);

        /* The port flags only complete an address that has no port. */
        CHECK(setup(&c, NULL, "--healthz-port", "12345", NULL) == 0);
        CHECK_STREQ(c.healthz_bind_address, "0.0.0.0:10256");
        config_done(&c);

        /* --metrics-port 0 leaves no metrics address, which upstream's
         * validation refuses. */
        CHECK(setup(&c, &err, "--metrics-port", "0", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "for flag --metrics-bind-address: must be IP:port");
        free(err);
        config_done(&c);

        CHECK(setup(&c, NULL, "--bind-address", "010.001.002.003", NULL) == 0);   /* ParseIPSloppy */
        config_done(&c);
}

static void test_nftables_flags(void) {
        struct kproxy_config c;

        CHECK(setup(&c, NULL, "--proxy-mode", "nftables", "--masquerade-all", "--iptables-sync-period", "10s",
                    "--iptables-min-sync-period=0", "--iptables-masquerade-bit", "15", NULL) == 0);
        CHECK(c.mode == PROXY_MODE_NFTABLES);
        CHECK(config_mode_sync(&c) == &c.nftables);
        CHECK(c.nftables.masquerade_all);
        CHECK(c.nftables.sync_period_ms == 10000 && c.iptables.sync_period_ms == 10000);
        CHECK(c.nftables.min_sync_period_ms == 0 && c.iptables.min_sync_period_ms == 0);
        CHECK(c.iptables.masquerade_bit == 15 && c.nftables.masquerade_bit == 14);
        /* platform default of nftables mode */
        CHECK(c.n_nodeport_addresses == 1 && strcmp(c.nodeport_addresses[0], "primary") == 0);
        config_done(&c);

        /* The iptables sync flags are ignored in ipvs mode, and the ipvs ones otherwise. */
        CHECK(setup(&c, NULL, "--ipvs-sync-period", "5s", "--iptables-sync-period", "20s", NULL) == 0);
        CHECK(c.iptables.sync_period_ms == 20000);
        config_done(&c);
        CHECK(setup(&c, NULL, "--proxy-mode=ipvs", "--ipvs-sync-period", "5s", "--iptables-sync-period", "20s",
                    NULL) == 0);
        CHECK(c.mode == PROXY_MODE_IPVS && c.iptables.sync_period_ms == 5000);
        config_done(&c);

        /* "" means the default mode */
        CHECK(setup(&c, NULL, "--proxy-mode=", "--detect-local-mode=", NULL) == 0);
        CHECK(c.mode == PROXY_MODE_IPTABLES && c.detect_local_mode == DETECT_LOCAL_CLUSTER_CIDR);
        config_done(&c);
}

static void test_list_flags(void) {
        struct kproxy_config c;

        CHECK(setup(&c, NULL, "--nodeport-addresses", "10.0.0.0/8,192.168.1.0/24", "--nodeport-addresses",
                    "fd00::/64", "--feature-gates", "ClientsAllowCBOR=true, APIServingWithRoutine=false",
                    "--feature-gates=ComponentFlagz=1,APIServingWithRoutine=true", NULL) == 0);
        CHECK(c.n_nodeport_addresses == 3);
        CHECK_STREQ(c.nodeport_addresses[2], "fd00::/64");
        CHECK(c.n_feature_gates == 3);
        CHECK_STREQ(c.feature_gates[0].name, "APIServingWithRoutine");  /* kept sorted */
        CHECK(config_feature_enabled(&c, "APIServingWithRoutine") && config_feature_enabled(&c, "ClientsAllowCBOR") &&
              config_feature_enabled(&c, "ComponentFlagz"));
        CHECK(!config_feature_enabled(&c, "ComponentStatusz"));    /* alpha, not set */
        config_done(&c);

        CHECK(setup(&c, NULL, "--nodeport-addresses", "primary", NULL) == 0);
        CHECK(c.n_nodeport_addresses == 1);
        config_done(&c);

        {
                char *err = NULL;

                CHECK(setup(&c, &err, "--nodeport-addresses", "primary,10.0.0.0/8", NULL) == -EINVAL);
                CHECK_CONTAINS(err, "for flag --nodeport-addresses: \"primary\" cannot be combined with CIDRs");
                free(err);
                config_done(&c);
                CHECK(setup(&c, &err, "--nodeport-addresses", "10.0.0.1", NULL) == -EINVAL);
                CHECK_CONTAINS(err, "invalid value \"10.0.0.1\" for flag --nodeport-addresses");
                free(err);
                config_done(&c);
        }

        CHECK(setup(&c, NULL, "--vmodule", "proxier=4", "--vmodule=sync*=2", NULL) == 0);
        CHECK_STREQ(c.log_vmodule, "proxier=4,sync*=2");
        config_done(&c);
}

/* kproxy's allow-lists: CIDRs of both families, or just "none"; kept with
 * --config (not a configuration field). */
static void test_allow_list_flags(void) {
        struct kproxy_config c;
        char *err = NULL;

        CHECK(setup(&c, NULL, NULL) == 0);
        CHECK(c.external_ip_cidrs.n == 0 && c.lb_ip_cidrs.n == 0);
        config_done(&c);
        CHECK(setup(&c, NULL, "--external-ip-cidrs", "203.0.113.0/24,192.168.0.10/32", "--external-ip-cidrs",
                    "2001:db8::/64", "--load-balancer-ip-cidrs=none", NULL) == 0);
        CHECK(c.external_ip_cidrs.n == 3);
        CHECK_STREQ(c.external_ip_cidrs.v[2], "2001:db8::/64");
        CHECK(c.lb_ip_cidrs.n == 1);
        CHECK_STREQ(c.lb_ip_cidrs.v[0], "none");
        config_done(&c);

        CHECK(setup(&c, &err, "--external-ip-cidrs", "203.0.113.7", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "invalid value \"203.0.113.7\" for flag --external-ip-cidrs: \"203.0.113.7\" is not a "
                            "CIDR (an address alone is ADDR/32 or ADDR/128; \"none\" admits nothing)");
        free(err);
        config_done(&c);
        CHECK(setup(&c, &err, "--load-balancer-ip-cidrs", "none", "--load-balancer-ip-cidrs", "10.0.0.0/8", NULL) ==
              -EINVAL);
        CHECK_CONTAINS(err, "for flag --load-balancer-ip-cidrs: \"none\" cannot be combined with CIDRs");
        free(err);
        config_done(&c);

        char *path = write_temp("kubeadm.yaml", kubeadm_config);
        err = NULL;
        CHECK(setup(&c, &err, "--config", path, "--external-ip-cidrs", "203.0.113.0/24", NULL) == 0);
        CHECK(c.external_ip_cidrs.n == 1 && c.lb_ip_cidrs.n == 0);
        CHECK_STREQ(c.external_ip_cidrs.v[0], "203.0.113.0/24");
        free(err);
        config_done(&c);
        free(path);
}

static void test_flag_validation(void) {
        struct kproxy_config c;
        char *err = NULL;

        CHECK(setup(&c, &err, "--iptables-min-sync-period", "1m", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "invalid value \"1m0s\" for flag --iptables-min-sync-period: must not exceed the sync "
                            "period (30s)");
        free(err);
        config_done(&c);

        CHECK(setup(&c, &err, "--iptables-sync-period", "0s", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "--iptables-sync-period");
        free(err);
        config_done(&c);

        CHECK(setup(&c, &err, "--config-sync-period", "0s", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "--config-sync-period: must be greater than 0");
        free(err);
        config_done(&c);

        CHECK(setup(&c, &err, "--detect-local-mode", "BridgeInterface", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "--pod-bridge-interface");
        free(err);
        config_done(&c);
        CHECK(setup(&c, NULL, "--detect-local-mode", "BridgeInterface", "--pod-bridge-interface", "cbr0", NULL) == 0);
        CHECK(c.detect_local_mode == DETECT_LOCAL_BRIDGE_INTERFACE);
        config_done(&c);
        CHECK(setup(&c, &err, "--detect-local-mode", "InterfaceNamePrefix", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "--pod-interface-name-prefix");
        free(err);
        config_done(&c);

        CHECK(setup(&c, &err, "--cluster-cidr", "10.0.0.0/8,10.1.0.0/16", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "--cluster-cidr: must be one CIDR or an IPv4,IPv6 pair");
        free(err);
        config_done(&c);
        CHECK(setup(&c, &err, "--cluster-cidr", "10.0.0.0", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "--cluster-cidr");
        free(err);
        config_done(&c);
        CHECK(setup(&c, &err, "--cluster-cidr", "10.0.0.0/8,fd00::/48,10.1.0.0/16", NULL) == -EINVAL);
        free(err);
        config_done(&c);
        /* only checked in ClusterCIDR mode, as upstream */
        CHECK(setup(&c, NULL, "--cluster-cidr", "bogus", "--detect-local-mode", "NodeCIDR", NULL) == 0);
        config_done(&c);

        CHECK(setup(&c, &err, "--show-hidden-metrics-for-version", "latest", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "--show-hidden-metrics-for-version");
        free(err);
        config_done(&c);

        CHECK(setup(&c, &err, "--kube-api-burst", "-1", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "--kube-api-burst: must not be negative");
        free(err);
        config_done(&c);
        CHECK(setup(&c, &err, "--kube-api-content-type", "text/plain", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "invalid value \"text/plain\" for flag --kube-api-content-type: kproxy reads "
                            "application/vnd.kubernetes.protobuf and application/json");
        free(err);
        config_done(&c);
        CHECK(setup(&c, NULL, "--kube-api-content-type", "application/json", NULL) == 0);
        config_done(&c);

        CHECK(setup(&c, &err, "--vmodule", "x=1", "--logging-format", "json", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "--vmodule: only works with the text format");
        free(err);
        config_done(&c);
        /* The logging checks come after the detect-local ones and run
         * whatever those found valid: upstream validates the logging
         * options after the cluster CIDRs, not instead of them. */
        CHECK(setup(&c, &err, "--cluster-cidr", "10.244.0.0/16", "--vmodule", "x=1", "--logging-format", "json",
                    NULL) == -EINVAL);
        CHECK_CONTAINS(err, "--vmodule: only works with the text format");
        free(err);
        config_done(&c);
        CHECK(setup(&c, &err, "--cluster-cidr", "10.244.0.0/16,fd00:10:244::/56", "--log-text-split-stream", NULL) ==
              -EINVAL);
        CHECK_CONTAINS(err, "--log-text-split-stream: Forbidden: Feature LoggingAlphaOptions is disabled");
        free(err);
        config_done(&c);

        /* --hostname-override is trimmed and lower-cased; blank is refused. */
        CHECK(setup(&c, NULL, "--hostname-override", " Node-1.Example ", NULL) == 0);
        CHECK_STREQ(c.hostname_override, "node-1.example");
        config_done(&c);
        CHECK(setup(&c, &err, "--hostname-override", "   ", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "--hostname-override: must not be blank");
        free(err);
        config_done(&c);
        CHECK(setup(&c, NULL, "--hostname-override=", NULL) == 0 && c.hostname_override == NULL);
        config_done(&c);
}

static int extra_value_calls;
static char extra_value[64];
static bool extra_bool;

static int set_extra_value(void *userdata, const char *value) {
        CHECK(userdata == &extra_value_calls);
        if (strcmp(value, "bad") == 0)
                return -EINVAL;
        extra_value_calls++;
        snprintf(extra_value, sizeof extra_value, "%s", value);
        return 0;
}

static int set_extra_bool(void *userdata, const char *value) {
        (void) userdata;
        extra_bool = strcmp(value, "true") == 0;
        return 0;
}

static void test_extra_flags(void) {
        static const struct config_extra_flag extra[] = {
                { .name = "host-cidr", .value_name = "CIDR,...", .help = "Pretend the host has these addresses.",
                  .set = set_extra_value },
                { .name = "dry-run", .is_bool = true, .help = "Print, do not apply.", .set = set_extra_bool },
        };
        struct kproxy_config c;
        char *argv[] = { "--host-cidr", "10.0.0.1/32", "--dry-run", "-v", "2", "--host_cidr=x", NULL };
        char *bad[] = { "--host-cidr=bad", NULL };
        char *badbool[] = { "--dry-run=perhaps", NULL };
        char *err;

        CHECK(config_init(&c) == 0);
        CHECK(config_parse_args(&c, 6, argv, extra, 2, &extra_value_calls, NULL, NULL) == 0);
        CHECK(extra_value_calls == 2);
        CHECK(strcmp(extra_value, "x") == 0);
        CHECK(extra_bool);
        CHECK(c.verbosity == 2);
        argv[2] = "--dry-run=false";
        CHECK(config_parse_args(&c, 3, argv, extra, 2, &extra_value_calls, NULL, NULL) == 0);
        CHECK(!extra_bool);

        capture_begin(2);
        CHECK(config_parse_args(&c, 1, bad, extra, 2, &extra_value_calls, NULL, NULL) == -EINVAL);
        err = capture_end(2);
        CHECK_STREQ(err, "kproxy: invalid value \"bad\" for flag --host-cidr\n");
        free(err);
        capture_begin(2);
        CHECK(config_parse_args(&c, 1, badbool, extra, 2, &extra_value_calls, NULL, NULL) == -EINVAL);
        err = capture_end(2);
        CHECK_CONTAINS(err, "--dry-run: must be true or false");
        free(err);
        config_done(&c);

        capture_begin(1);
        config_print_help("Usage: kproxy render [flags]\n\nRender rules.\n", extra, 2);
        err = capture_end(1);
        CHECK(err && strncmp(err, "Usage: kproxy render [flags]\n\nRender rules.\n\nWhen --config", 57) == 0);
        CHECK_CONTAINS(err, "--iptables-masquerade-bit int32");
        CHECK_CONTAINS(err, "(default 14)");
        CHECK_CONTAINS(err, "(default 24h0m0s)");
        CHECK_CONTAINS(err, "-v, --v Level");
        CHECK_CONTAINS(err, "--host-cidr CIDR,...");
        CHECK_CONTAINS(err, "Pretend the host has these addresses.");
        CHECK_CONTAINS(err, "--healthz-port int32");
        CHECK_CONTAINS(err, "DEPRECATED");
        /* the extra flags come after the common ones */
        CHECK(err && strstr(err, "--write-config-to") < strstr(err, "--dry-run"));
        free(err);
}

static void test_kubeadm_file(void) {
        struct kproxy_config c;
        char *path = write_temp("kubeadm.yaml", kubeadm_config), *err = NULL;

        /* kubeadm leaves nearly everything to upstream's defaulting. */
        CHECK(setup(&c, &err, "--config", path, NULL) == 0);
        CHECK_STREQ(err, "");
        check_upstream_defaults(&c);
        CHECK_STREQ(c.kubeconfig, "/var/lib/kube-proxy/kubeconfig.conf");
        CHECK_STREQ(c.cluster_cidr, "10.244.0.0/16");
        CHECK(c.hostname_override == NULL);
        CHECK(c.n_nodeport_addresses == 0);
        free(err);
        config_done(&c);

        /* Flags other than --hostname-override and logging are dropped,
         * --feature-gates too: its unknown gate is not even looked at. */
        CHECK(setup(&c, &err, "--config", path, "--masquerade-all", "--proxy-mode", "nftables",
                    "--iptables-masquerade-bit", "3", "--hostname-override", "Worker-1", "-v", "3",
                    "--kubeconfig", "/flag/kubeconfig", "--feature-gates", "X=true", "--healthz-port", "0", NULL) == 0);
        CHECK_STREQ(err, "kproxy: flag --healthz-port is deprecated, use --healthz-bind-address instead\n");
        CHECK_STREQ(c.config_file, path);
        CHECK(!c.iptables.masquerade_all && !c.nftables.masquerade_all);
        CHECK(c.mode == PROXY_MODE_IPTABLES);
        CHECK(c.iptables.masquerade_bit == 14);
        CHECK_STREQ(c.hostname_override, "worker-1");
        CHECK(c.verbosity == 3);
        CHECK_STREQ(c.kubeconfig, "/var/lib/kube-proxy/kubeconfig.conf");
        CHECK(c.n_feature_gates == 0);
        CHECK_STREQ(c.healthz_bind_address, "0.0.0.0:10256");     /* --healthz-port 0 dropped too */
        free(err);
        config_done(&c);
        free(path);
}

static void test_file_values(void) {
        struct kproxy_config c;
        char *path = write_temp("values.yaml",
                                "# comments and any key order are fine\n"
                                "kind: KubeProxyConfiguration\n"
                                "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n"
                                "mode: nftables\n"
                                "bindAddress: \"::\"\n"
                                "healthzBindAddress: \"::1\"\n"
                                "hostnameOverride: Node-A\n"
                                "clusterCIDR: 10.244.0.0/16,fd00:10:244::/56\n"
                                "featureGates:\n"
                                "  ServiceTrafficDistribution: true\n"
                                "  AllAlpha: false\n"
                                "nftables:\n"
                                "  masqueradeAll: yes\n"
                                "  masqueradeBit: 0\n"
                                "  syncPeriod: 1m\n"
                                "  minSyncPeriod: 500ms\n"
                                "iptables:\n"
                                "  masqueradeBit: 40\n"
                                "conntrack:\n"
                                "  maxPerCore: 0\n"
                                "  tcpEstablishedTimeout: 0s\n"
                                "  udpTimeout: 30s\n"
                                "clientConnection:\n"
                                "  qps: 0.5\n"
                                "  burst: 0x20\n"
                                "oomScoreAdj: 0\n"
                                "nodePortAddresses: [10.0.0.0/8, \"fd00::/64\"]\n"
                                "logging:\n"
                                "  format: text\n"
                                "  flushFrequency: 1000000000\n"
                                "  verbosity: 2\n"
                                "  vmodule:\n"
                                "  - filePattern: proxier\n"
                                "    verbosity: 5\n"),
             *err = NULL;

        /* iptables.masqueradeBit is validated whatever the mode */
        CHECK(setup(&c, &err, "--config", path, NULL) == -EINVAL);
        CHECK_CONTAINS(err, "invalid value \"40\" for iptables.masqueradeBit: must be in 0..31");
        CHECK_CONTAINS(err, path);
        free(err);
        config_done(&c);
        free(path);

        path = write_temp("values.yaml",
                          "kind: KubeProxyConfiguration\n"
                          "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n"
                          "mode: nftables\n"
                          "bindAddress: \"::\"\n"
                          "healthzBindAddress: \"::1\"\n"
                          "hostnameOverride: Node-A\n"
                          "clusterCIDR: 10.244.0.0/16,fd00:10:244::/56\n"
                          "featureGates:\n"
                          "  ServiceTrafficDistribution: true\n"
                          "  AllAlpha: false\n"
                          "nftables:\n"
                          "  masqueradeAll: yes\n"
                          "  masqueradeBit: 0\n"
                          "  syncPeriod: 1m\n"
                          "  minSyncPeriod: 500ms\n"
                          "conntrack:\n"
                          "  maxPerCore: 0\n"
                          "  tcpEstablishedTimeout: 0s\n"
                          "  udpTimeout: 30s\n"
                          "clientConnection:\n"
                          "  qps: 0.5\n"
                          "  burst: 0x20\n"
                          "oomScoreAdj: 0\n"
                          "nodePortAddresses: [10.0.0.0/8, \"fd00::/64\"]\n"
                          "logging:\n"
                          "  format: text\n"
                          "  flushFrequency: 1000000000\n"
                          "  verbosity: 2\n"
                          "  vmodule:\n"
                          "  - filePattern: proxier\n"
                          "    verbosity: 5\n");
        CHECK(setup(&c, &err, "--config", path, "--vmodule", "sync=1", NULL) == 0);
        CHECK_STREQ(err, "kproxy: Setting GA feature gate ServiceTrafficDistribution=true. It will be removed in a "
                         "future release.\n");
        CHECK(c.mode == PROXY_MODE_NFTABLES);
        CHECK(config_mode_sync(&c) == &c.nftables);
        CHECK_STREQ(c.bind_address, "::");
        CHECK_STREQ(c.healthz_bind_address, "[::1]:10256");
        CHECK_STREQ(c.metrics_bind_address, "[::1]:10249");        /* IPv6 defaults follow bindAddress */
        CHECK_STREQ(c.hostname_override, "node-a");
        CHECK(c.n_feature_gates == 2 && config_feature_enabled(&c, "ServiceTrafficDistribution") &&
              !config_feature_enabled(&c, "AllAlpha"));
        CHECK(c.nftables.masquerade_all && !c.iptables.masquerade_all);
        CHECK(c.nftables.masquerade_bit == 0);                     /* 0 is a value, not "unset" */
        CHECK(c.nftables.sync_period_ms == 60000 && c.nftables.min_sync_period_ms == 500);
        CHECK(c.iptables.sync_period_ms == 30000 && c.iptables.min_sync_period_ms == 1000);
        CHECK(c.conntrack.max_per_core == 0 && c.conntrack.min == 131072);
        CHECK(c.conntrack.tcp_established_timeout_ms == 0);
        CHECK(c.conntrack.tcp_close_wait_timeout_ms == 3600000);
        CHECK(c.conntrack.udp_timeout_ms == 30000);
        CHECK(c.qps == 0.5f && c.burst == 32);
        CHECK(c.oom_score_adj == 0);
        CHECK(c.n_nodeport_addresses == 2 && strcmp(c.nodeport_addresses[1], "fd00::/64") == 0);
        CHECK(c.log_flush_frequency_ms == 1000);
        CHECK(c.verbosity == 2);
        CHECK_STREQ(c.log_vmodule, "sync=1,proxier=5");            /* flags first, as upstream */
        free(err);
        config_done(&c);
        free(path);
}

static void test_file_lenient(void) {
        struct kproxy_config c;
        char *path = write_temp("lenient.yaml",
                                "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n"
                                "kind: KubeProxyConfiguration\n"
                                "udpIdleTimeout: 250ms\n"
                                "iptables:\n"
                                "  masqueradeBits: 3\n"
                                "  masqueradeBit: 12\n"
                                "mode: iptables\n"
                                "mode: nftables\n"),
             *err = NULL;

        /* Upstream retries leniently and carries on; so does kproxy, loudly. */
        CHECK(setup(&c, &err, "--config", path, NULL) == 0);
        CHECK_CONTAINS(err, ": line 3: unknown field \"udpIdleTimeout\", ignoring\n");
        CHECK_CONTAINS(err, ": line 5: unknown field \"iptables.masqueradeBits\", ignoring\n");
        CHECK_CONTAINS(err, ": line 8: duplicate field \"mode\", the last one wins\n");
        CHECK_CONTAINS(err, path);
        CHECK(c.iptables.masquerade_bit == 12);
        CHECK(c.mode == PROXY_MODE_NFTABLES);
        free(err);
        config_done(&c);
        free(path);
}

static void test_file_errors(void) {
        static const struct {
                const char *text;
                const char *message;
        } cases[] = {
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha2\nkind: KubeProxyConfiguration\n",
                  "line 1: unsupported apiVersion \"kubeproxy.config.k8s.io/v1alpha2\", expected "
                  "kubeproxy.config.k8s.io/v1alpha1" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n",
                  "unsupported kind \"KubeletConfiguration\"" },
                { "kind: KubeProxyConfiguration\n", "apiVersion is missing" },
                { "", "empty file" },
                { "- a\n- b\n", "expected a KubeProxyConfiguration mapping" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: [\n",
                  "line 4: " },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "iptables:\n  masqueradeBit: abc\n",
                  "line 4: iptables.masqueradeBit: expected an integer, got a string \"abc\"" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "iptables:\n  masqueradeBit: \"14\"\n",
                  "iptables.masqueradeBit: expected an integer" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "iptables:\n  syncPeriod: 30\n",
                  "line 4: iptables.syncPeriod: expected a duration such as \"30s\", got an integer \"30\"" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "iptables:\n  syncPeriod: 30 seconds\n",
                  "iptables.syncPeriod: \"30 seconds\" is not a duration" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "conntrack:\n  udpTimeout: -1s\n",
                  "conntrack.udpTimeout: -1s must not be negative" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "showHiddenMetricsForVersion: 1.30\n",
                  "showHiddenMetricsForVersion: expected a string, got a number \"1.30\"" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "enableProfiling: maybe\n",
                  "enableProfiling: expected true or false" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: kernelspace\n",
                  "line 3: mode: unsupported mode \"kernelspace\"" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "detectLocalMode: BridgeInterface\n",
                  "invalid value \"\" for detectLocal.bridgeInterface: must be set in BridgeInterface detect-local "
                  "mode" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "clusterCIDR: 10.0.0.0/8,10.1.0.0/16\n",
                  "invalid value \"10.0.0.0/8,10.1.0.0/16\" for clusterCIDR: must be one CIDR or an IPv4,IPv6 pair" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "iptables:\n  syncPeriod: 500ms\n",
                  "invalid value \"1s\" for iptables.minSyncPeriod: must not exceed the sync period (500ms)" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "clientConnection:\n  contentType: application/yaml\n",
                  "invalid value \"application/yaml\" for clientConnection.contentType: kproxy reads "
                  "application/vnd.kubernetes.protobuf and application/json" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "clientConnection:\n  acceptContentTypes: \"application/json\\r\\nX-Evil: 1\"\n",
                  "for clientConnection.acceptContentTypes: holds a control or non-ASCII character" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "metricsBindAddress: localhost:10249\n",
                  "invalid value \"localhost:10249\" for metricsBindAddress: must be a valid IP" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "healthzBindAddress: 0.0.0.0:0\n",
                  "for healthzBindAddress: must be a valid port" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "bindAddress: node1\n",
                  "invalid value \"node1\" for bindAddress: must be an IP address" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\noomScoreAdj: -1001\n",
                  "for oomScoreAdj: must be in -1000..1000" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "mode: nftables\nnftables:\n  masqueradeBit: 32\n",
                  "for nftables.masqueradeBit: must be in 0..31" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "nodePortAddresses: [primary, 10.0.0.0/8]\n",
                  "for nodePortAddresses: \"primary\" cannot be combined with CIDRs" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "nodePortAddresses: 10.0.0.0/8\n",
                  "nodePortAddresses: expected a list" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "featureGates:\n  Foo: enabled\n",
                  "featureGates.Foo: expected true or false" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "logging:\n  format: xml\n",
                  "for logging.format: must be text or json" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nportRange: 2000-300\n",
                  "for portRange" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "mode: ipvs\nipvs:\n  excludeCIDRs: [10.0.0.0]\n",
                  "ipvs.excludeCIDRs[0]" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nhostnameOverride: \" \"\n",
                  "for hostnameOverride: must not be blank" },
                { "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                  "iptables: 3\n",
                  "iptables: expected a mapping" },
        };

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                struct kproxy_config c;
                char *path = write_temp("bad.yaml", cases[i].text), *err = NULL;
                int r;

                r = setup(&c, &err, "--config", path, NULL);
                if (r != -EINVAL)
                        fprintf(stderr, "case %zu: r=%d\n", i, r);
                CHECK(r == -EINVAL);
                CHECK_CONTAINS(err, cases[i].message);
                CHECK_CONTAINS(err, path);
                CHECK(err && strchr(err, '\n') == err + strlen(err) - 1);
                free(err);
                config_done(&c);
                free(path);
        }
}

static void test_file_unreadable(void) {
        struct kproxy_config c;
        char *err = NULL, *path;

        if (asprintf(&path, "%s/does-not-exist.yaml", tmpdir) < 0)
                abort();
        CHECK(setup(&c, &err, "--config", path, NULL) == -ENOENT);
        CHECK_CONTAINS(err, path);
        CHECK_CONTAINS(err, "No such file or directory");
        free(err);
        config_done(&c);
        CHECK(setup(&c, &err, "--config", tmpdir, NULL) == -EISDIR);
        free(err);
        config_done(&c);
        free(path);
}

static void test_json_file(void) {
        struct kproxy_config c;
        char *path = write_temp("config.json",
                                "{\n"
                                "\t\"apiVersion\": \"kubeproxy.config.k8s.io/v1alpha1\",\n"
                                "\t\"kind\": \"KubeProxyConfiguration\",\n"
                                "\t\"mode\": \"nftables\",\n"
                                "\t\"conntrack\": {\"maxPerCore\": 0, \"tcpCloseWaitTimeout\": null},\n"
                                "\t\"iptables\": {\"masqueradeAll\": true, \"syncPeriod\": \"10s\"},\n"
                                "\t\"nodePortAddresses\": [\"primary\"],\n"
                                "\t\"clientConnection\": {\"qps\": 20, \"kubeconfig\": \"/k\\/c\"}\n"
                                "}\n");

        CHECK(setup(&c, NULL, "--config", path, NULL) == 0);
        CHECK(c.mode == PROXY_MODE_NFTABLES);
        CHECK(c.conntrack.max_per_core == 0);
        CHECK(c.conntrack.tcp_close_wait_timeout_ms == 3600000);
        CHECK(c.iptables.masquerade_all && c.iptables.sync_period_ms == 10000);
        CHECK(!c.nftables.masquerade_all);                      /* nftables mode reads its own section */
        CHECK(c.qps == 20.0f);
        CHECK_STREQ(c.kubeconfig, "/k/c");
        config_done(&c);
        free(path);
}

static void check_same(const struct kproxy_config *a, const struct kproxy_config *b) {
        CHECK_STREQ(a->bind_address, b->bind_address);
        CHECK(a->bind_address_hard_fail == b->bind_address_hard_fail);
        CHECK_STREQ(a->healthz_bind_address ? a->healthz_bind_address : "", b->healthz_bind_address ? b->healthz_bind_address : "");
        CHECK_STREQ(a->metrics_bind_address, b->metrics_bind_address);
        CHECK_STREQ(a->hostname_override ? a->hostname_override : "", b->hostname_override ? b->hostname_override : "");
        CHECK_STREQ(a->cluster_cidr ? a->cluster_cidr : "", b->cluster_cidr ? b->cluster_cidr : "");
        CHECK(a->detect_local_mode == b->detect_local_mode);
        CHECK_STREQ(a->bridge_interface ? a->bridge_interface : "", b->bridge_interface ? b->bridge_interface : "");
        CHECK_STREQ(a->interface_name_prefix ? a->interface_name_prefix : "",
                    b->interface_name_prefix ? b->interface_name_prefix : "");
        CHECK(a->n_nodeport_addresses == b->n_nodeport_addresses);
        for (size_t i = 0; i < a->n_nodeport_addresses && i < b->n_nodeport_addresses; i++)
                CHECK_STREQ(a->nodeport_addresses[i], b->nodeport_addresses[i]);
        CHECK(a->mode == b->mode);
        CHECK(memcmp(&a->iptables, &b->iptables, sizeof a->iptables) == 0);
        CHECK(memcmp(&a->nftables, &b->nftables, sizeof a->nftables) == 0);
        CHECK(memcmp(&a->conntrack, &b->conntrack, sizeof a->conntrack) == 0);
        CHECK_STREQ(a->kubeconfig ? a->kubeconfig : "", b->kubeconfig ? b->kubeconfig : "");
        CHECK_STREQ(a->content_type, b->content_type);
        CHECK_STREQ(a->accept_content_types ? a->accept_content_types : "",
                    b->accept_content_types ? b->accept_content_types : "");
        CHECK(a->qps == b->qps);
        CHECK(a->burst == b->burst);
        CHECK(a->config_sync_period_ms == b->config_sync_period_ms);
        CHECK(a->oom_score_adj == b->oom_score_adj);
        CHECK(a->enable_profiling == b->enable_profiling);
        CHECK_STREQ(a->show_hidden_metrics_for_version ? a->show_hidden_metrics_for_version : "",
                    b->show_hidden_metrics_for_version ? b->show_hidden_metrics_for_version : "");
        CHECK(a->n_feature_gates == b->n_feature_gates);
        for (size_t i = 0; i < a->n_feature_gates && i < b->n_feature_gates; i++) {
                CHECK_STREQ(a->feature_gates[i].name, b->feature_gates[i].name);
                CHECK(a->feature_gates[i].enabled == b->feature_gates[i].enabled);
        }
        CHECK(a->verbosity == b->verbosity);
        CHECK_STREQ(a->logging_format, b->logging_format);
        CHECK(a->log_flush_frequency_ms == b->log_flush_frequency_ms);
        CHECK_STREQ(a->log_vmodule ? a->log_vmodule : "", b->log_vmodule ? b->log_vmodule : "");
        CHECK(memcmp(&a->log_json, &b->log_json, sizeof a->log_json) == 0);
        CHECK(memcmp(&a->log_text, &b->log_text, sizeof a->log_text) == 0);
}

static char *slurp(const char *path) {
        FILE *f = fopen(path, "r");
        char *text = calloc(1, 65536);

        if (!f || !text)
                abort();
        if (fread(text, 1, 65535, f) == 0)
                text[0] = '\0';
        fclose(f);
        return text;
}

/* logging.options: alpha, so forbidden without LoggingAlphaOptions (as
 * component-base refuses them), taken from flags and file, and written back. */
static void test_log_options(void) {
        struct kproxy_config a, b;
        char *err = NULL, *out;

        CHECK(setup(&a, &err, "--log-text-split-stream", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "--log-text-split-stream: Forbidden: Feature LoggingAlphaOptions is disabled");
        free(err);
        config_done(&a);
        CHECK(setup(&a, &err, "--log-json-info-buffer-size", "1Mi", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "LoggingAlphaOptions");
        free(err);
        config_done(&a);
        CHECK(setup(&a, &err, "--log-json-info-buffer-size", "lots", NULL) == -EINVAL);
        free(err);
        config_done(&a);

        CHECK(setup(&a, NULL, "--feature-gates", "LoggingAlphaOptions=true", "--log-text-split-stream",
                    "--log-text-info-buffer-size", "64Ki", "--log-json-info-buffer-size", "1.5k", NULL) == 0);
        CHECK(a.log_text.split_stream && a.log_text.info_buffer_size == 65536);
        CHECK(!a.log_json.split_stream && a.log_json.info_buffer_size == 1500);
        if (asprintf(&out, "%s/log-options.yaml", tmpdir) < 0)
                abort();
        CHECK(config_write(&a, out) == 0);
        char *text = slurp(out);
        CHECK_CONTAINS(text, "    text:\n      infoBufferSize: 64Ki\n      splitStream: true\n");
        CHECK_CONTAINS(text, "    json:\n      infoBufferSize: \"1500\"\n");
        free(text);
        CHECK(setup(&b, NULL, "--config", out, NULL) == 0);
        check_same(&a, &b);
        config_done(&a);
        config_done(&b);
        free(out);

        char *path = write_temp("log-options-off.yaml",
                                "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n"
                                "kind: KubeProxyConfiguration\n"
                                "logging:\n"
                                "  options:\n"
                                "    json:\n"
                                "      splitStream: true\n");
        CHECK(setup(&a, &err, "--config", path, NULL) == -EINVAL);
        CHECK_CONTAINS(err, "logging.options.json.splitStream: Forbidden: Feature LoggingAlphaOptions is disabled");
        free(err);
        config_done(&a);
        /* Logging flags win over the file, as upstream's copyLogsFromFlags. */
        CHECK(setup(&a, NULL, "--config", path, "--log-json-split-stream=false", NULL) == 0);
        CHECK(!a.log_json.split_stream);
        config_done(&a);
        free(path);
}

static void test_round_trip(void) {
        struct kproxy_config a, b, d;
        char *out, *text, *again;

        if (asprintf(&out, "%s/written.yaml", tmpdir) < 0)
                abort();

        /* Defaults: written, read back, written again byte for byte. */
        CHECK(setup(&a, NULL, NULL) == 0);
        CHECK(config_write(&a, out) == 0);
        text = slurp(out);
        CHECK_CONTAINS(text, "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n");
        CHECK_CONTAINS(text, "kind: KubeProxyConfiguration\n");
        CHECK_CONTAINS(text, "  tcpEstablishedTimeout: 24h0m0s\n");
        CHECK_CONTAINS(text, "configSyncPeriod: 15m0s\n");
        CHECK_CONTAINS(text, "  syncPeriod: 30s\n");
        CHECK_CONTAINS(text, "  minSyncPeriod: 1s\n");
        CHECK_CONTAINS(text, "healthzBindAddress: 0.0.0.0:10256\n");
        CHECK_CONTAINS(text, "  contentType: application/vnd.kubernetes.protobuf\n");
        CHECK_CONTAINS(text, "  acceptContentTypes: \"\"\n");
        CHECK_CONTAINS(text, "  qps: 5\n");
        CHECK_CONTAINS(text, "oomScoreAdj: -999\n");
        CHECK_CONTAINS(text, "nodePortAddresses: null\n");
        CHECK_CONTAINS(text, "mode: iptables\n");
        CHECK_CONTAINS(text, "detectLocalMode: ClusterCIDR\n");
        CHECK(strstr(text, "featureGates") == NULL);            /* omitempty */
        CHECK(setup(&b, NULL, "--config", out, NULL) == 0);
        check_same(&a, &b);
        CHECK(config_write(&b, out) == 0);
        again = slurp(out);
        CHECK_STREQ(again, text);
        free(text);
        free(again);
        config_done(&a);
        config_done(&b);

        /* Everything changed that can be. */
        CHECK(setup(&a, NULL, "--bind-address", "fd00::1", "--bind-address-hard-fail", "--healthz-bind-address",
                    "[fd00::1]:1234", "--metrics-bind-address", "0.0.0.0:9999", "--hostname-override", "node-7",
                    "--cluster-cidr", "10.0.0.0/8,fd00::/64", "--nodeport-addresses", "10.0.0.0/8,fd00::/64",
                    "--proxy-mode", "nftables", "--masquerade-all", "--iptables-sync-period", "1h2m3.5s",
                    "--iptables-min-sync-period", "250ms", "--iptables-masquerade-bit", "7",
                    "--iptables-localhost-nodeports=false", "--conntrack-max-per-core", "0", "--conntrack-min", "5",
                    "--conntrack-tcp-be-liberal", "--conntrack-tcp-timeout-established", "2h",
                    "--conntrack-tcp-timeout-close-wait", "90s", "--conntrack-udp-timeout", "30s",
                    "--conntrack-udp-timeout-stream", "2m", "--kubeconfig", "/etc/k k/config: x",
                    "--kube-api-content-type", "application/json", "--kube-api-qps", "0.1", "--kube-api-burst",
                    "3", "--config-sync-period", "30m", "--oom-score-adj", "0", "--profiling",
                    "--show-hidden-metrics-for-version", "1.30", "--feature-gates",
                    "WatchListClient=true,APIServingWithRoutine=false",
                    "-v", "6", "--log-flush-frequency", "1s", "--vmodule", "proxier=4,sync*=2", NULL) == 0);
        CHECK(config_write(&a, out) == 0);
        text = slurp(out);
        CHECK_CONTAINS(text, "  syncPeriod: 1h2m3.5s\n");
        CHECK_CONTAINS(text, "  minSyncPeriod: 250ms\n");
        CHECK_CONTAINS(text, "healthzBindAddress: \"[fd00::1]:1234\"\n");
        CHECK_CONTAINS(text, "  kubeconfig: \"/etc/k k/config: x\"\n");
        CHECK_CONTAINS(text, "showHiddenMetricsForVersion: \"1.30\"\n");
        CHECK_CONTAINS(text, "featureGates:\n  APIServingWithRoutine: false\n  WatchListClient: true\n");
        CHECK_CONTAINS(text, "nodePortAddresses:\n- 10.0.0.0/8\n- fd00::/64\n");
        CHECK_CONTAINS(text, "  vmodule:\n  - filePattern: proxier\n    verbosity: 4\n  - filePattern: sync*\n");
        CHECK(setup(&b, NULL, "--config", out, NULL) == 0);
        check_same(&a, &b);
        CHECK(config_write(&b, out) == 0);
        again = slurp(out);
        CHECK_STREQ(again, text);
        free(text);
        free(again);
        config_done(&b);

        /* --write-config-to with a config file writes the file's settings. */
        CHECK(setup(&d, NULL, "--config", out, "--write-config-to", "/dev/null", "--hostname-override", "other",
                    NULL) == 0);
        CHECK_STREQ(d.write_config_to, "/dev/null");
        CHECK_STREQ(d.hostname_override, "other");
        CHECK(d.iptables.masquerade_bit == 7);
        config_done(&d);
        config_done(&a);

        CHECK(config_write(&a, "/nonexistent-dir/x.yaml") == -ENOENT);
        free(out);
}

static void test_durations(void) {
        static const struct {
                const char *text;
                uint64_t ms;
        } good[] = {
                { "0", 0 }, { "0s", 0 }, { "+0", 0 }, { "-0", 0 }, { "300ms", 300 }, { "1.5h", 5400000 },
                { "1h2m3s", 3723000 }, { "2h45m", 9900000 }, { "1.5s", 1500 }, { ".5s", 500 }, { "1.s", 1000 },
                { "1000000us", 1000 }, { "1000\xc2\xb5s", 1 }, { "1000\xce\xbcs", 1 }, { "1500000ns", 1 },
                { "999us", 0 }, { "24h", 86400000 }, { "1m0s", 60000 }, { "1h1h", 7200000 },
                { "2562047h", UINT64_C(2562047) * 3600000 },
        };
        static const char *const bad[] = { "", "s", "1", "1x", "1.5", "h1", ".s", "1s ", " 1s", "1 s", "--1s",
                                           "1e3s", "1sm", "1,5s" };
        static const char *const too_big[] = { "-1s", "-0.5ms", "2562048h", "9223372036854775808ns" };
        static const struct {
                uint64_t ms;
                const char *text;
        } formats[] = {
                { 0, "0s" }, { 1, "1ms" }, { 250, "250ms" }, { 999, "999ms" }, { 1000, "1s" }, { 1500, "1.5s" },
                { 1001, "1.001s" }, { 1010, "1.01s" }, { 30000, "30s" }, { 60000, "1m0s" }, { 90000, "1m30s" },
                { 900000, "15m0s" }, { 3600000, "1h0m0s" }, { 86400000, "24h0m0s" }, { 3723500, "1h2m3.5s" },
                { 90061001, "25h1m1.001s" },
        };

        for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
                uint64_t ms = 12345;
                int r = config_parse_duration(good[i].text, &ms);

                if (r != 0 || ms != good[i].ms)
                        fprintf(stderr, "duration \"%s\": r=%d ms=%llu\n", good[i].text, r, (unsigned long long) ms);
                CHECK(r == 0 && ms == good[i].ms);
        }
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                uint64_t ms = 12345;

                CHECK(config_parse_duration(bad[i], &ms) == -EINVAL);
                CHECK(ms == 12345);
        }
        for (size_t i = 0; i < sizeof too_big / sizeof too_big[0]; i++) {
                uint64_t ms = 12345;

                CHECK(config_parse_duration(too_big[i], &ms) == -ERANGE);
                CHECK(ms == 12345);
        }
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
                char buf[32];
                uint64_t back;

                config_format_duration(formats[i].ms, buf, sizeof buf);
                CHECK_STREQ(buf, formats[i].text);
                CHECK(config_parse_duration(buf, &back) == 0 && back == formats[i].ms);
        }
        {
                char small[4];

                config_format_duration(3723500, small, sizeof small);      /* truncates, NUL-terminated */
                CHECK_STREQ(small, "1h2");
        }
}

static void test_enums(void) {
        CHECK_STREQ(proxy_mode_to_string(PROXY_MODE_IPTABLES), "iptables");
        CHECK_STREQ(proxy_mode_to_string(PROXY_MODE_NFTABLES), "nftables");
        CHECK_STREQ(proxy_mode_to_string(PROXY_MODE_IPVS), "ipvs");
        CHECK(proxy_mode_to_string(_PROXY_MODE_MAX) == NULL);
        CHECK(proxy_mode_to_string(_PROXY_MODE_INVALID) == NULL);
        for (int i = 0; i < _PROXY_MODE_MAX; i++)
                CHECK(proxy_mode_from_string(proxy_mode_to_string((enum proxy_mode) i)) == i);
        CHECK(proxy_mode_from_string("IPTABLES") == _PROXY_MODE_INVALID);
        CHECK(proxy_mode_from_string("") == _PROXY_MODE_INVALID);
        CHECK(proxy_mode_from_string(NULL) == _PROXY_MODE_INVALID);

        CHECK_STREQ(detect_local_mode_to_string(DETECT_LOCAL_CLUSTER_CIDR), "ClusterCIDR");
        CHECK_STREQ(detect_local_mode_to_string(DETECT_LOCAL_NODE_CIDR), "NodeCIDR");
        CHECK_STREQ(detect_local_mode_to_string(DETECT_LOCAL_BRIDGE_INTERFACE), "BridgeInterface");
        CHECK_STREQ(detect_local_mode_to_string(DETECT_LOCAL_INTERFACE_NAME_PREFIX), "InterfaceNamePrefix");
        CHECK(detect_local_mode_to_string(_DETECT_LOCAL_MAX) == NULL);
        for (int i = 0; i < _DETECT_LOCAL_MAX; i++)
                CHECK(detect_local_mode_from_string(detect_local_mode_to_string((enum detect_local_mode) i)) == i);
        CHECK(detect_local_mode_from_string("clustercidr") == _DETECT_LOCAL_INVALID);
}

/* The sample shipped in examples/ must load (run from the source tree). */
static void test_example_file(void) {
        struct kproxy_config c;

        if (access("examples/kube-proxy-config.yaml", R_OK) < 0)
                return;
        CHECK(setup(&c, NULL, "--config", "examples/kube-proxy-config.yaml", NULL) == 0);
        CHECK(c.mode == PROXY_MODE_IPTABLES);
        CHECK(c.iptables.sync_period_ms == 30000);
        config_done(&c);
}

static double now_s(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* Loads text as the --config file: the result, stderr into *ret_err and the
 * time it took into *ret_s. */
static int load_timed(const char *text, char **ret_err, double *ret_s) {
        struct kproxy_config c;
        char *path = write_temp("caps.yaml", text);
        double t0 = now_s();
        int r = setup(&c, ret_err, "--config", path, NULL);

        *ret_s = now_s() - t0;
        config_done(&c);
        free(path);
        return r;
}

/* The input caps: pathological files fail at once with the cap named, or
 * (many fields) load in linear time. */
static void test_file_caps(void) {
        static const char head[] = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n";
        struct buf b = BUF_INIT;
        char *err = NULL;
        double s;

        /* Deep nesting in a field kproxy does not know: took 27 s. */
        buf_printf(&b, "%sbogus: ", head);
        for (int i = 0; i < 100000; i++)
                buf_putc(&b, '[');
        for (int i = 0; i < 100000; i++)
                buf_putc(&b, ']');
        CHECK(load_timed(b.data, &err, &s) == -EINVAL);
        CHECK_CONTAINS(err, "caps.yaml: line 3: collections nest deeper than 64 levels (the YAML depth cap)\n");
        CHECK(s < 5.0);
        free(err);

        /* A list of aliases of a long string: each a copy. */
        buf_clear(&b);
        buf_printf(&b, "%sx: &a ", head);
        for (int i = 0; i < (1 << 20); i++)
                buf_putc(&b, 'x');
        buf_puts(&b, "\nnodePortAddresses: [*a, *a, *a, *a, *a]\n");
        CHECK(load_timed(b.data, &err, &s) == -EINVAL);
        CHECK_CONTAINS(err, "line 4: aliases expand to more than 4 MiB of text (the YAML alias expansion cap)\n");
        free(err);

        buf_clear(&b);
        buf_puts(&b, head);
        while (b.len <= (4u << 20))
                buf_puts(&b, "# a comment that goes on and on and on\n");
        CHECK(load_timed(b.data, &err, &s) == -EINVAL);
        CHECK_CONTAINS(err, "caps.yaml: larger than 4 MiB (the --config file size cap)\n");
        free(err);

        /* Many fields, one of them twice: each compared with all before
         * it, 400k fields took minutes. */
        buf_clear(&b);
        buf_puts(&b, head);
        for (int i = 0; i < 50000; i++)
                buf_printf(&b, "k%d: 1\n", i);
        buf_puts(&b, "k7: 2\n");
        CHECK(load_timed(b.data, &err, &s) == 0);
        CHECK_CONTAINS(err, "line 50003: duplicate field \"k7\", the last one wins\n");
        CHECK_CONTAINS(err, "line 50002: unknown field \"k49999\", ignoring\n");
        CHECK(s < 5.0);
        free(err);
        buf_done(&b);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) st, (void) flag, (void) ftw;
        return remove(path);
}

int main(void) {
        if (!mkdtemp(tmpdir)) {
                perror("mkdtemp");
                return 1;
        }

        TEST_RUN(test_defaults);
        TEST_RUN(test_flag_forms);
        TEST_RUN(test_flag_short_and_names);
        TEST_RUN(test_flag_errors);
        TEST_RUN(test_ip_port_flags);
        TEST_RUN(test_nftables_flags);
        TEST_RUN(test_list_flags);
        TEST_RUN(test_allow_list_flags);
        TEST_RUN(test_flag_validation);
        TEST_RUN(test_extra_flags);
        TEST_RUN(test_kubeadm_file);
        TEST_RUN(test_file_values);
        TEST_RUN(test_file_lenient);
        TEST_RUN(test_file_errors);
        TEST_RUN(test_file_unreadable);
        TEST_RUN(test_file_caps);
        TEST_RUN(test_json_file);
        TEST_RUN(test_log_options);
        TEST_RUN(test_round_trip);
        TEST_RUN(test_durations);
        TEST_RUN(test_enums);
        TEST_RUN(test_example_file);

        if (nftw(tmpdir, remove_entry, 8, FTW_DEPTH | FTW_PHYS) < 0)
                fprintf(stderr, "could not remove %s\n", tmpdir);
        TEST_DONE();
}
