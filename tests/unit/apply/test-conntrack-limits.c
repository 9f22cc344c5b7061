/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The conntrack set-up (apply/conntrack-limits.c) against scratch trees of
 * /proc/sys and /sys: upstream's arithmetic, what is written and what is
 * left alone, and a read-only mount. The machine's own settings are never
 * touched here; tests/netns/test-setup.sh runs the same code for real inside
 * a network namespace.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apply/conntrack-limits.h"
#include "apply/sysctl.h"
#include "config/config.h"
#include "test.h"

#define NF "/proc/sys/net/netfilter/"
#define HASH "/sys/module/nf_conntrack/parameters/hashsize"

static char root[] = "/tmp/kproxy-ctlimits-XXXXXX";

static void put_file(const char *path, const char *text) {
        char p[4096], *slash;
        snprintf(p, sizeof p, "%s%s", root, path);
        for (slash = strchr(p + strlen(root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
                *slash = '\0';
                mkdir(p, 0755);
                *slash = '/';
        }
        FILE *f = fopen(p, "w");
        if (!f || fputs(text, f) < 0 || fclose(f) != 0)
                abort();
}

static uint64_t get(const char *path) {
        uint64_t v = UINT64_MAX;
        CHECK(sysctl_read_u64(root, path, &v) == 0);
        return v;
}

/* A fresh tree as a node's kernel shows it by default. */
static void fresh_tree(void) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf %s/proc %s/sys", root, root);
        if (system(cmd) != 0)
                abort();
        put_file(NF "nf_conntrack_max", "262144\n");
        put_file(HASH, "65536\n");
        put_file(NF "nf_conntrack_tcp_timeout_established", "432000\n");
        put_file(NF "nf_conntrack_tcp_timeout_close_wait", "60\n");
        put_file(NF "nf_conntrack_tcp_be_liberal", "0\n");
        put_file(NF "nf_conntrack_udp_timeout", "30\n");
        put_file(NF "nf_conntrack_udp_timeout_stream", "120\n");
        put_file("/sys/devices/system/cpu/online", "0-1\n");
}

static struct config_conntrack defaults(void) {
        return (struct config_conntrack) {
                .max_per_core = 32768,
                .min = 131072,
                .tcp_established_timeout_ms = 24 * 3600 * 1000,
                .tcp_close_wait_timeout_ms = 3600 * 1000,
        };
}

static void test_cpus(void) {
        fresh_tree();
        CHECK(conntrack_limits_cpus(root) == 2);
        put_file("/sys/devices/system/cpu/online", "0-3,8,10-11\n");
        CHECK(conntrack_limits_cpus(root) == 7);
        put_file("/sys/devices/system/cpu/online", "garbage\n");
        CHECK(conntrack_limits_cpus(root) == 1);
        CHECK(conntrack_limits_cpus(NULL) >= 1);
}

static void test_arithmetic(void) {
        struct config_conntrack c = defaults();
        struct conntrack_limits l;

        conntrack_limits_from_config(&c, 2, &l);
        CHECK(l.max == 131072);         /* 2 x 32768 is below the minimum */
        conntrack_limits_from_config(&c, 16, &l);
        CHECK(l.max == 16 * 32768);
        CHECK(l.tcp_established_s == 86400);
        CHECK(l.tcp_close_wait_s == 3600);
        CHECK(!l.tcp_be_liberal && l.udp_s == 0 && l.udp_stream_s == 0);
        c.max_per_core = 0;             /* leave the table alone, whatever min says */
        conntrack_limits_from_config(&c, 16, &l);
        CHECK(l.max == 0);
        c = (struct config_conntrack) {.max_per_core = 1000, .udp_timeout_ms = 1500, .udp_stream_timeout_ms = 200000};
        conntrack_limits_from_config(&c, 4, &l);
        CHECK(l.max == 4000);
        CHECK(l.udp_s == 1 && l.udp_stream_s == 200);
}

static void test_defaults_written(void) {
        struct config_conntrack c = defaults();
        struct conntrack_limits l;

        fresh_tree();
        conntrack_limits_from_config(&c, conntrack_limits_cpus(root), &l);
        CHECK(conntrack_limits_apply(root, &l) == 0);
        CHECK(get(NF "nf_conntrack_max") == 262144);    /* more than the 131072 asked: never lowered */
        CHECK(get(HASH) == 65536);                      /* 65536 >= 131072 / 4: left alone */
        CHECK(get(NF "nf_conntrack_tcp_timeout_established") == 86400);
        CHECK(get(NF "nf_conntrack_tcp_timeout_close_wait") == 3600);
        CHECK(get(NF "nf_conntrack_tcp_be_liberal") == 0);
        CHECK(get(NF "nf_conntrack_udp_timeout") == 30);
        CHECK(get(NF "nf_conntrack_udp_timeout_stream") == 120);
}

static void test_raised(void) {
        struct config_conntrack c = defaults();
        struct conntrack_limits l;

        fresh_tree();
        put_file("/sys/devices/system/cpu/online", "0-31\n");
        c.tcp_be_liberal = true;
        c.udp_timeout_ms = 10000;
        c.udp_stream_timeout_ms = 60000;
        conntrack_limits_from_config(&c, conntrack_limits_cpus(root), &l);
        CHECK(l.max == 32 * 32768);
        CHECK(conntrack_limits_apply(root, &l) == 0);
        CHECK(get(NF "nf_conntrack_max") == 1048576);
        CHECK(get(HASH) == 262144);
        CHECK(get(NF "nf_conntrack_tcp_be_liberal") == 1);
        CHECK(get(NF "nf_conntrack_udp_timeout") == 10);
        CHECK(get(NF "nf_conntrack_udp_timeout_stream") == 60);

        /* A node whose table an operator made larger, with a small hash:
         * the table stays, the hash still follows what was asked for. */
        fresh_tree();
        put_file(NF "nf_conntrack_max", "2000000\n");
        put_file(HASH, "1024\n");
        l = (struct conntrack_limits) {.max = 524288};
        CHECK(conntrack_limits_apply(root, &l) == 0);
        CHECK(get(NF "nf_conntrack_max") == 2000000);
        CHECK(get(HASH) == 131072);
}

/* A setting that is missing (no nf_conntrack module) is a real failure;
 * the others are still written. */
static void test_missing_setting(void) {
        char p[4096];
        struct conntrack_limits l = {.tcp_established_s = 100, .tcp_close_wait_s = 200};

        fresh_tree();
        snprintf(p, sizeof p, "%s" NF "nf_conntrack_tcp_timeout_established", root);
        CHECK(unlink(p) == 0);
        CHECK(conntrack_limits_apply(root, &l) == -ENOENT);
        CHECK(get(NF "nf_conntrack_tcp_timeout_close_wait") == 200);
}

/* A read-only /proc/sys and /sys, as in a container or LXC: every setting
 * is a warning, nothing fails. Needs a private mount namespace (root); the
 * check runs in a child so the mount never outlives it. */
static void test_read_only(void) {
        fresh_tree();
        pid_t pid = fork();
        if (pid == 0) {
                char p[4096];
                if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                        _exit(77);
                snprintf(p, sizeof p, "%s/proc", root);
                if (mount(p, p, NULL, MS_BIND | MS_REC, NULL) < 0 ||
                    mount(NULL, p, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0)
                        _exit(77);
                snprintf(p, sizeof p, "%s/sys", root);
                if (mount(p, p, NULL, MS_BIND | MS_REC, NULL) < 0 ||
                    mount(NULL, p, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0)
                        _exit(77);
                struct conntrack_limits l = {.max = 4000000, .tcp_established_s = 100, .tcp_be_liberal = true};
                int r = conntrack_limits_apply(root, &l);
                uint64_t v = 0;
                _exit(r == 0 && sysctl_read_u64(root, NF "nf_conntrack_max", &v) == 0 && v == 262144 ? 0 : 1);
        }
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status));
        if (WEXITSTATUS(status) == 77) {
                fprintf(stderr, "test_read_only: no private mount namespace here (not root?), skipped\n");
                return;
        }
        CHECK(WEXITSTATUS(status) == 0);
        CHECK(get(NF "nf_conntrack_tcp_timeout_established") == 432000);
}

int main(void) {
        if (!mkdtemp(root))
                return 1;
        TEST_RUN(test_cpus);
        TEST_RUN(test_arithmetic);
        TEST_RUN(test_defaults_written);
        TEST_RUN(test_raised);
        TEST_RUN(test_missing_setting);
        TEST_RUN(test_read_only);
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf %s", root);
        if (system(cmd) != 0)
                return 1;
        TEST_DONE();
}
