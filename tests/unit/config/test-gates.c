/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Feature gates: the generated table (order, uniqueness, spot checks against
 * kube-proxy 1.34's values), upstream's featuregate rules from the flag and
 * from a config file (unknown and locked gates refused, GA and deprecated
 * ones warned about, AllAlpha/AllBeta), and the --help listing. Messages
 * are captured, since their text is what operators grep for.
 */
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config-gates.h"
#include "config/config.h"
#include "test.h"
#include "util/cleanup.h"

/* ---- helpers ---------------------------------------------------------- */

static FILE *capture_file;
static int saved_fd = -1;

static void capture_begin(int fd) {
        fflush(fd == 1 ? stdout : stderr);
        capture_file = tmpfile();
        if (!capture_file)
                abort();
        saved_fd = dup(fd);
        dup2(fileno(capture_file), fd);
}

/* What fd received since capture_begin(fd); owned. */
static char *capture_end(int fd) {
        char *text;
        long n;

        fflush(fd == 1 ? stdout : stderr);
        dup2(saved_fd, fd);
        close(saved_fd);
        n = ftell(capture_file);
        text = calloc(1, (size_t) n + 1);
        if (!text)
                abort();
        rewind(capture_file);
        if (fread(text, 1, (size_t) n, capture_file) != (size_t) n)
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

/* config_init, the NULL-terminated flags, config_finish; everything on
 * stderr goes to *ret_err (owned). Returns the first error. */
static int setup(struct kproxy_config *c, char **ret_err, ...) {
        char *argv[32];
        int argc = 0, r;
        va_list ap;

        if (config_init(c) < 0)
                abort();
        va_start(ap, ret_err);
        for (const char *a; (a = va_arg(ap, const char *)) && argc < 31;)
                argv[argc++] = (char *) a;
        va_end(ap);
        argv[argc] = NULL;
        capture_begin(2);
        r = config_parse_args(c, argc, argv, NULL, 0, NULL, NULL, NULL);
        if (r >= 0)
                r = config_finish(c);
        *ret_err = capture_end(2);
        return r;
}

static char tmpdir[] = "/tmp/test-gates-XXXXXX";

/* A KubeProxyConfiguration whose featureGates mapping is gates (YAML lines
 * indented by two); returns its path, owned. */
static char *write_config(const char *name, const char *gates) {
        char *path;
        FILE *f;

        if (asprintf(&path, "%s/%s", tmpdir, name) < 0)
                abort();
        f = fopen(path, "w");
        if (!f)
                abort();
        fprintf(f, "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nfeatureGates:\n%s",
                gates);
        fclose(f);
        return path;
}

/* ---- the table ---------------------------------------------------------- */

static void test_table_sorted_unique(void) {
        CHECK(config_gates_count > 200);        /* 208 in v1.34.2 */
        for (size_t i = 0; i < config_gates_count; i++) {
                const struct config_gate *g = &config_gates[i];

                CHECK(g->name && *g->name);
                CHECK(g->stage >= 0 && g->stage < _CONFIG_GATE_STAGE_MAX);
                /* strictly increasing: sorted, and no name twice */
                if (i > 0 && strcmp(config_gates[i - 1].name, g->name) >= 0) {
                        fprintf(stderr, "out of order or repeated: %s, %s\n", config_gates[i - 1].name, g->name);
                        CHECK(false);
                }
                /* the lookup finds every entry at its own place */
                CHECK(config_feature_find(g->name) == g);
        }
        CHECK(config_feature_find("") == NULL);
        CHECK(config_feature_find("preferSameTrafficDistribution") == NULL);    /* names are case-sensitive */
        CHECK_STREQ(config_gates_release, "1.34");
}

struct expect {
        const char *name;
        enum config_gate_stage stage;
        bool def, locked;
};

/* Spot checks, each read off upstream's v1.34.2 sources by hand, one or more
 * from every file the table comes from. */
static void test_table_values(void) {
        static const struct expect want[] = {
                /* pkg/features: the one kproxy reads, beta and on since 1.34 */
                { "PreferSameTrafficDistribution", CONFIG_GATE_BETA, true, false },
                { "APIServingWithRoutine", CONFIG_GATE_ALPHA, false, false },          /* generic, relisted */
                { "ClusterTrustBundle", CONFIG_GATE_BETA, false, false },              /* beta, off */
                { "NFTablesProxyMode", CONFIG_GATE_GA, true, true },
                { "TopologyAwareHints", CONFIG_GATE_GA, true, true },
                { "ServiceTrafficDistribution", CONFIG_GATE_GA, true, true },
                { "MultiCIDRServiceAllocator", CONFIG_GATE_GA, true, true },           /* locked in 1.34 */
                { "DisableAllocatorDualWrite", CONFIG_GATE_GA, true, false },          /* GA, not locked */
                { "KMSv1", CONFIG_GATE_DEPRECATED, false, false },
                { "AllowServiceLBStatusOnNonLB", CONFIG_GATE_DEPRECATED, false, true },
                { "AggregatedDiscoveryRemoveBetaType", CONFIG_GATE_DEPRECATED, true, false },
                { "StatefulSetSemanticRevisionComparison", CONFIG_GATE_BETA, true, false }, /* new in v1.34.2 */
                { "SchedulerAsyncAPICalls", CONFIG_GATE_BETA, false, false },          /* off since v1.34.2 */
                /* the constant CPUCFSQuotaPeriod names this gate */
                { "CustomCPUCFSQuotaPeriod", CONFIG_GATE_ALPHA, false, false },
                { "CloudControllerManagerWebhook", CONFIG_GATE_ALPHA, false, false },  /* controller-manager */
                { "CustomResourceFieldSelectors", CONFIG_GATE_GA, true, true },        /* apiextensions */
                /* component-base */
                { "AllAlpha", CONFIG_GATE_ALPHA, false, false },
                { "AllBeta", CONFIG_GATE_BETA, false, false },
                { "ComponentFlagz", CONFIG_GATE_ALPHA, false, false },
                { "ContextualLogging", CONFIG_GATE_BETA, true, false },
                { "LoggingAlphaOptions", CONFIG_GATE_ALPHA, false, false },
                { "LoggingBetaOptions", CONFIG_GATE_BETA, true, false },
                { "ComponentSLIs", CONFIG_GATE_GA, true, true },
                /* client-go, through the adapter */
                { "WatchListClient", CONFIG_GATE_BETA, false, false },
                { "InOrderInformers", CONFIG_GATE_BETA, true, false },
                { "ClientsAllowCBOR", CONFIG_GATE_ALPHA, false, false },
        };
        /* Gone before 1.34, or new after it. */
        static const char *const absent[] = {
                "KubeProxyDrainingTerminatingNodes", "ProxyTerminatingEndpoints", "CPUManager", "CPUCFSQuotaPeriod",
                "GangScheduling", "NodeDeclaredFeatures", "InformerMetrics",
        };

        for (size_t i = 0; i < ELEMENTSOF(want); i++) {
                const struct config_gate *g = config_feature_find(want[i].name);

                if (!g) {
                        fprintf(stderr, "missing gate %s\n", want[i].name);
                        CHECK(false);
                        continue;
                }
                if (g->stage != want[i].stage || g->def != want[i].def || g->locked != want[i].locked) {
                        fprintf(stderr, "gate %s: stage %d default %d locked %d\n", g->name, g->stage, g->def,
                                g->locked);
                        CHECK(false);
                }
        }
        for (size_t i = 0; i < ELEMENTSOF(absent); i++)
                CHECK(config_feature_find(absent[i]) == NULL);
}

/* ---- defaults and AllAlpha / AllBeta ---------------------------------------- */

static void test_defaults(void) {
        struct kproxy_config c;
        char *err;

        CHECK(setup(&c, &err, NULL) == 0);
        CHECK_STREQ(err, "");
        CHECK(c.n_feature_gates == 0);
        CHECK(config_feature_enabled(&c, "PreferSameTrafficDistribution"));
        CHECK(config_feature_enabled(&c, "NFTablesProxyMode"));
        CHECK(config_feature_enabled(&c, "ContextualLogging"));
        CHECK(!config_feature_enabled(&c, "WatchListClient"));
        CHECK(!config_feature_enabled(&c, "APIServingWithRoutine"));
        CHECK(!config_feature_enabled(&c, "KMSv1"));
        CHECK(!config_feature_enabled(&c, "AllAlpha") && !config_feature_enabled(&c, "AllBeta"));
        free(err);
        config_done(&c);

        CHECK(setup(&c, &err, "--feature-gates", "PreferSameTrafficDistribution=false", NULL) == 0);
        CHECK_STREQ(err, "");                   /* beta: no warning */
        CHECK(!config_feature_enabled(&c, "PreferSameTrafficDistribution"));
        free(err);
        config_done(&c);
}

static void test_all_alpha_beta(void) {
        struct kproxy_config c;
        char *err;

        CHECK(setup(&c, &err, "--feature-gates", "AllAlpha=true", NULL) == 0);
        CHECK_STREQ(err, "");
        CHECK(config_feature_enabled(&c, "APIServingWithRoutine"));
        CHECK(config_feature_enabled(&c, "ClientsAllowCBOR"));
        CHECK(!config_feature_enabled(&c, "WatchListClient"));      /* beta: left alone */
        CHECK(!config_feature_enabled(&c, "KMSv1"));                /* deprecated: left alone */
        CHECK(!config_feature_enabled(&c, "AllBeta"));
        free(err);
        config_done(&c);

        /* A gate set by name wins, in either order. */
        CHECK(setup(&c, &err, "--feature-gates", "APIServingWithRoutine=false,AllAlpha=true,AllBeta=true", NULL) == 0);
        CHECK(!config_feature_enabled(&c, "APIServingWithRoutine"));
        CHECK(config_feature_enabled(&c, "ComponentFlagz"));
        CHECK(config_feature_enabled(&c, "WatchListClient") && config_feature_enabled(&c, "ClusterTrustBundle"));
        free(err);
        config_done(&c);

        /* AllBeta=false turns every beta gate off, PreferSameTrafficDistribution
         * too, and leaves GA gates at their defaults. */
        CHECK(setup(&c, &err, "--feature-gates", "AllBeta=false", NULL) == 0);
        CHECK(!config_feature_enabled(&c, "PreferSameTrafficDistribution"));
        CHECK(!config_feature_enabled(&c, "ContextualLogging"));
        CHECK(config_feature_enabled(&c, "NFTablesProxyMode"));
        CHECK(config_feature_enabled(&c, "DisableAllocatorDualWrite"));
        CHECK(!config_feature_enabled(&c, "AllBeta"));
        free(err);
        config_done(&c);

        CHECK(setup(&c, &err, "--feature-gates", "AllBeta=false,PreferSameTrafficDistribution=true", NULL) == 0);
        CHECK(config_feature_enabled(&c, "PreferSameTrafficDistribution"));
        CHECK(!config_feature_enabled(&c, "InOrderInformers"));
        free(err);
        config_done(&c);
}

/* ---- refusals and warnings --------------------------------------------------- */

static void test_unknown_from_flag(void) {
        struct kproxy_config c;
        char *err;

        CHECK(setup(&c, &err, "--feature-gates", "PreferSameTrafficDistribution=true,NoSuchGate=true", NULL) ==
              -EINVAL);
        CHECK_STREQ(err, "kproxy: --feature-gates: unrecognized feature gate: NoSuchGate\n");
        free(err);
        config_done(&c);

        /* Every problem is named, in name order; wrong case is unknown. */
        CHECK(setup(&c, &err, "--feature-gates=nftablesProxyMode=true", "--feature-gates", "Zz=false,Aa=true", NULL) ==
              -EINVAL);
        CHECK_STREQ(err, "kproxy: --feature-gates: unrecognized feature gate: Aa\n"
                         "kproxy: --feature-gates: unrecognized feature gate: Zz\n"
                         "kproxy: --feature-gates: unrecognized feature gate: nftablesProxyMode\n");
        free(err);
        config_done(&c);

        /* Gates that no longer exist in 1.34 are unknown too. */
        CHECK(setup(&c, &err, "--feature-gates", "KubeProxyDrainingTerminatingNodes=true", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "unrecognized feature gate: KubeProxyDrainingTerminatingNodes");
        free(err);
        config_done(&c);
}

static void test_unknown_from_file(void) {
        struct kproxy_config c;
        char *path = write_config("unknown.yaml", "  PreferSameTrafficDistribution: false\n  NoSuchGate: true\n"),
             *err, *want;

        CHECK(setup(&c, &err, "--config", path, NULL) == -EINVAL);
        if (asprintf(&want, "kproxy: %s: featureGates: unrecognized feature gate: NoSuchGate\n", path) < 0)
                abort();
        CHECK_STREQ(err, want);
        free(want);
        free(err);
        config_done(&c);
        free(path);

        /* With --config, the file's gates count and the flag's are ignored,
         * unknown ones included, as upstream ignores the flag. */
        path = write_config("fine.yaml", "  AllBeta: false\n");
        CHECK(setup(&c, &err, "--feature-gates", "NoSuchGate=true,PreferSameTrafficDistribution=true", "--config",
                    path, NULL) == 0);
        CHECK_STREQ(err, "");
        CHECK(c.n_feature_gates == 1);
        CHECK(!config_feature_enabled(&c, "PreferSameTrafficDistribution"));
        free(err);
        config_done(&c);
        free(path);
}

static void test_locked(void) {
        struct kproxy_config c;
        char *path, *err, *want;

        CHECK(setup(&c, &err, "--feature-gates", "NFTablesProxyMode=false", NULL) == -EINVAL);
        CHECK_STREQ(err, "kproxy: --feature-gates: cannot set feature gate NFTablesProxyMode to false, feature is "
                         "locked to true\n");
        free(err);
        config_done(&c);

        /* locked to false */
        CHECK(setup(&c, &err, "--feature-gates", "AllowServiceLBStatusOnNonLB=true", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "cannot set feature gate AllowServiceLBStatusOnNonLB to true, feature is locked to false");
        free(err);
        config_done(&c);

        /* Set to its lock: accepted, with the GA warning. */
        CHECK(setup(&c, &err, "--feature-gates", "NFTablesProxyMode=true", NULL) == 0);
        CHECK_STREQ(err, "kproxy: Setting GA feature gate NFTablesProxyMode=true. It will be removed in a future "
                         "release.\n");
        CHECK(config_feature_enabled(&c, "NFTablesProxyMode"));
        free(err);
        config_done(&c);

        path = write_config("locked.yaml", "  TopologyAwareHints: false\n");
        CHECK(setup(&c, &err, "--config", path, NULL) == -EINVAL);
        if (asprintf(&want, "kproxy: %s: featureGates: cannot set feature gate TopologyAwareHints to false, "
                            "feature is locked to true\n", path) < 0)
                abort();
        CHECK_STREQ(err, want);
        free(want);
        free(err);
        config_done(&c);
        free(path);
}

static void test_warnings(void) {
        struct kproxy_config c;
        char *err;

        /* GA but not locked: either value, with the warning. */
        CHECK(setup(&c, &err, "--feature-gates", "DisableAllocatorDualWrite=false,KMSv1=true", NULL) == 0);
        CHECK_STREQ(err, "kproxy: Setting GA feature gate DisableAllocatorDualWrite=false. It will be removed in a "
                         "future release.\n"
                         "kproxy: Setting deprecated feature gate KMSv1=true. It will be removed in a future "
                         "release.\n");
        CHECK(!config_feature_enabled(&c, "DisableAllocatorDualWrite"));
        CHECK(config_feature_enabled(&c, "KMSv1"));
        free(err);
        config_done(&c);
}

/* The one gate kproxy's configuration itself consults: component-base's
 * json log format needs LoggingBetaOptions. */
static void test_logging_gate(void) {
        struct kproxy_config c;
        char *err;

        CHECK(setup(&c, &err, "--logging-format", "json", NULL) == 0);
        CHECK_STREQ(err, "");
        free(err);
        config_done(&c);

        CHECK(setup(&c, &err, "--logging-format", "json", "--feature-gates", "LoggingBetaOptions=false", NULL) ==
              -EINVAL);
        CHECK_STREQ(err, "kproxy: invalid value \"json\" for flag --logging-format: the json format is off with the "
                         "LoggingBetaOptions feature gate\n");
        free(err);
        config_done(&c);

        CHECK(setup(&c, &err, "--logging-format", "json", "--feature-gates", "AllBeta=false", NULL) == -EINVAL);
        CHECK_CONTAINS(err, "LoggingBetaOptions");
        free(err);
        config_done(&c);

        CHECK(setup(&c, &err, "--feature-gates", "LoggingBetaOptions=false", NULL) == 0);  /* text needs nothing */
        free(err);
        config_done(&c);
}

/* render shares the flags and config_finish(): its extra flags do not
 * change how gates are read. */
static int set_nothing(void *userdata, const char *value) {
        (void) userdata, (void) value;
        return 0;
}

static void test_with_extra_flags(void) {
        static const struct config_extra_flag extra[] = {
                { "host-addresses", false, "CIDR,...", "test", set_nothing },
        };
        char *argv[] = { "--host-addresses", "127.0.0.1/8", "--feature-gates", "Bogus=true", "state.json", NULL };
        struct kproxy_config c;
        char **args = NULL, *err;
        size_t n = 0;

        CHECK(config_init(&c) == 0);
        CHECK(config_parse_args(&c, 5, argv, extra, ELEMENTSOF(extra), NULL, &args, &n) == 0);
        CHECK(n == 1);
        capture_begin(2);
        CHECK(config_finish(&c) == -EINVAL);
        err = capture_end(2);
        CHECK_STREQ(err, "kproxy: --feature-gates: unrecognized feature gate: Bogus\n");
        free(err);
        free(args);
        config_done(&c);
}

/* ---- --help --------------------------------------------------------------- */

static void test_help(void) {
        const char *p, *q;
        char *out;
        int alpha = 0, beta = 0, listed = 0;

        capture_begin(1);
        config_print_help("Usage: test\n", NULL, 0);
        out = capture_end(1);

        p = strstr(out, "--feature-gates mapStringBool");
        CHECK(p != NULL);
        if (!p) {
                free(out);
                return;
        }
        p = strstr(p, "Options are:\n");
        CHECK(p != NULL);
        if (!p) {
                free(out);
                return;
        }
        p += strlen("Options are:\n");
        /* One gate a line, indented to the help column, up to the next flag. */
        for (; (q = strchr(p, '\n')); p = q + 1) {
                const char *line = p + strspn(p, " ");
                size_t len = (size_t) (q - line);

                if (line == p || *line == '-')
                        break;
                listed++;
                alpha += len > 25 && memmem(line, len, "(ALPHA - default=", 17) != NULL;
                beta += len > 25 && memmem(line, len, "(BETA - default=", 16) != NULL;
        }
        for (size_t i = 0; i < config_gates_count; i++) {
                alpha -= config_gates[i].stage == CONFIG_GATE_ALPHA;
                beta -= config_gates[i].stage == CONFIG_GATE_BETA;
        }
        CHECK(alpha == 0 && beta == 0);         /* every alpha and beta gate, nothing else */
        CHECK(listed > 100);
        CHECK_CONTAINS(out, "\n                                                     "
                            "PreferSameTrafficDistribution=true|false (BETA - default=true)\n");
        CHECK_CONTAINS(out, " AllAlpha=true|false (ALPHA - default=false)\n");
        CHECK_CONTAINS(out, " AllBeta=true|false (BETA - default=false)\n");
        CHECK_CONTAINS(out, " WatchListClient=true|false (BETA - default=false)\n");
        CHECK(strstr(out, "NFTablesProxyMode=") == NULL);       /* GA: not listed */
        CHECK(strstr(out, "KMSv1=") == NULL);                   /* deprecated: not listed */
        /* featuregate sorts the lines: "AllAlpha=" after "APIServingWithRoutine=" */
        CHECK(strstr(out, "APIServingWithRoutine=") && strstr(out, "AllAlpha=") &&
              strstr(out, "APIServingWithRoutine=") < strstr(out, "AllAlpha="));
        free(out);
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

        TEST_RUN(test_table_sorted_unique);
        TEST_RUN(test_table_values);
        TEST_RUN(test_defaults);
        TEST_RUN(test_all_alpha_beta);
        TEST_RUN(test_unknown_from_flag);
        TEST_RUN(test_unknown_from_file);
        TEST_RUN(test_locked);
        TEST_RUN(test_warnings);
        TEST_RUN(test_logging_gate);
        TEST_RUN(test_with_extra_flags);
        TEST_RUN(test_help);

        if (nftw(tmpdir, remove_entry, 8, FTW_DEPTH | FTW_PHYS) < 0)
                fprintf(stderr, "could not remove %s\n", tmpdir);
        TEST_DONE();
}
