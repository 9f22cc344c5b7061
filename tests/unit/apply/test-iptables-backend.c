/* SPDX-License-Identifier: Apache-2.0 */
/* Which tools run a backend, found in PATH: the backend's own names, the
 * plain ones when they say they are that backend, neither; and the host
 * probe's choice and --random-fully with an explicit backend. PATH points
 * at a scratch directory of stand-in tools (shell scripts that print a
 * version), so nothing here runs iptables or touches netfilter; the choice
 * by what the tables hold is tested in network namespaces
 * (tests/netns/test-iptables-backend.py). */
#include <errno.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apply/exec.h"
#include "apply/iptables-backend.h"
#include "host/host.h"
#include "test.h"

static char dir[] = "/tmp/kproxy-test-backend-XXXXXX";

/* Empties the scratch directory and points PATH at it alone. */
static void path_reset(void) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "/bin/rm -rf %s/* %s/.[!.]*", dir, dir);
        CHECK(system(cmd) == 0);
        CHECK(setenv("PATH", dir, 1) == 0);
}

/* A stand-in tool that prints version (if not NULL) for --version. */
static void tool(const char *name, const char *version) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        if (!f)
                return;
        fprintf(f, "#!/bin/sh\n");
        if (version)
                fprintf(f, "[ \"$1\" = --version ] && echo '%s'\nexit 0\n", version);
        else
                fprintf(f, "exit 1\n");
        fclose(f);
        CHECK(chmod(path, 0755) == 0);
}

static void tools3(const char *base, const char *version) {
        char name[64];
        tool(base, version);
        snprintf(name, sizeof name, "%s-save", base);
        tool(name, version);
        snprintf(name, sizeof name, "%s-restore", base);
        tool(name, version);
}

static void test_strings(void) {
        for (int i = 0; i < _IPTABLES_BACKEND_MAX; i++)
                CHECK(iptables_backend_from_string(iptables_backend_to_string((enum iptables_backend) i)) == i);
        CHECK_STREQ(iptables_backend_to_string(IPTABLES_BACKEND_LEGACY), "legacy");
        CHECK(iptables_backend_from_string("nf_tables") == _IPTABLES_BACKEND_INVALID);
        CHECK(iptables_backend_from_string("") == _IPTABLES_BACKEND_INVALID);
        CHECK(iptables_backend_from_string(NULL) == _IPTABLES_BACKEND_INVALID);
        CHECK(iptables_backend_to_string(_IPTABLES_BACKEND_MAX) == NULL);
}

static void test_names(void) {
        struct iptables_tools nft = {IPTABLES_BACKEND_NFT, false}, legacy = {IPTABLES_BACKEND_LEGACY, false},
                              plain = {IPTABLES_BACKEND_LEGACY, true};
        CHECK_STREQ(iptables_tool_name(&nft, 4, IPTABLES_TOOL_RESTORE), "iptables-nft-restore");
        CHECK_STREQ(iptables_tool_name(&nft, 6, IPTABLES_TOOL_CMD), "ip6tables-nft");
        CHECK_STREQ(iptables_tool_name(&legacy, 4, IPTABLES_TOOL_SAVE), "iptables-legacy-save");
        CHECK_STREQ(iptables_tool_name(&legacy, 6, IPTABLES_TOOL_RESTORE), "ip6tables-legacy-restore");
        CHECK_STREQ(iptables_tool_name(&plain, 4, IPTABLES_TOOL_CMD), "iptables");
        CHECK_STREQ(iptables_tool_name(&plain, 6, IPTABLES_TOOL_SAVE), "ip6tables-save");
}

static void test_installed(void) {
        char path[256];
        path_reset();
        tool("iptables", "iptables v1.8.9 (legacy)");
        CHECK(exec_installed("iptables"));
        CHECK(!exec_installed("iptables-save"));
        /* A directory, or a file nobody may run, is no tool. */
        snprintf(path, sizeof path, "%s/iptables-save", dir);
        CHECK(mkdir(path, 0755) == 0);
        CHECK(!exec_installed("iptables-save"));
        snprintf(path, sizeof path, "%s/iptables-restore", dir);
        tool("iptables-restore", NULL);
        CHECK(chmod(path, 0644) == 0);
        CHECK(!exec_installed("iptables-restore"));
        /* An empty PATH entry is the current directory, as for execvp(). */
        CHECK(setenv("PATH", ":/nonexistent", 1) == 0);
        CHECK(chdir(dir) == 0);
        CHECK(exec_installed("iptables"));
        CHECK(chdir("/") == 0);
        CHECK(!exec_installed("iptables"));
}

static void test_find(void) {
        struct iptables_tools t = {IPTABLES_BACKEND_NFT, true};
        char version[128];

        /* Debian: both backends by their own names, plain ones elsewhere. */
        path_reset();
        tools3("iptables-legacy", "iptables v1.8.9 (legacy)");
        tools3("iptables-nft", "iptables v1.8.9 (nf_tables)");
        CHECK(iptables_tools_find(IPTABLES_BACKEND_LEGACY, &t) == 0);
        CHECK(t.backend == IPTABLES_BACKEND_LEGACY && !t.plain);
        CHECK(iptables_tools_find(IPTABLES_BACKEND_NFT, &t) == 0);
        CHECK(t.backend == IPTABLES_BACKEND_NFT && !t.plain);
        CHECK(iptables_tools_version(&t, version, sizeof version) == 0);
        CHECK_STREQ(version, "iptables v1.8.9 (nf_tables)");

        /* Only the legacy tools, one of them missing: not by that name. */
        path_reset();
        tool("iptables-legacy", "iptables v1.8.9 (legacy)");
        tool("iptables-legacy-save", "iptables v1.8.9 (legacy)");
        t = (struct iptables_tools) {IPTABLES_BACKEND_NFT, false};
        CHECK(iptables_tools_find(IPTABLES_BACKEND_LEGACY, &t) == -ENOENT);
        CHECK(t.backend == IPTABLES_BACKEND_NFT);       /* written only on success */

        /* Plain names only: they count for the backend they say they are. */
        path_reset();
        tools3("iptables", "iptables v1.8.7 (nf_tables)");
        CHECK(iptables_tools_find(IPTABLES_BACKEND_NFT, &t) == 0);
        CHECK(t.backend == IPTABLES_BACKEND_NFT && t.plain);
        CHECK(iptables_tools_find(IPTABLES_BACKEND_LEGACY, &t) == -ENOENT);
        path_reset();
        tools3("iptables", "iptables v1.8.7 (legacy)");
        CHECK(iptables_tools_find(IPTABLES_BACKEND_LEGACY, &t) == 0);
        CHECK(t.backend == IPTABLES_BACKEND_LEGACY && t.plain);
        CHECK(iptables_tools_find(IPTABLES_BACKEND_NFT, &t) == -ENOENT);
        /* Before 1.8 there was no nf_tables backend. */
        path_reset();
        tools3("iptables", "iptables v1.6.1");
        CHECK(iptables_tools_find(IPTABLES_BACKEND_LEGACY, &t) == 0);
        CHECK(t.plain);
        CHECK(iptables_tools_find(IPTABLES_BACKEND_NFT, &t) == -ENOENT);
        /* A plain iptables that fails tells nothing. */
        path_reset();
        tools3("iptables", NULL);
        CHECK(iptables_tools_find(IPTABLES_BACKEND_LEGACY, &t) == -ENOENT);
        CHECK(iptables_tools_find(IPTABLES_BACKEND_NFT, &t) == -ENOENT);
        CHECK(iptables_tools_version(&(struct iptables_tools) {IPTABLES_BACKEND_NFT, true}, version,
                                     sizeof version) == -EIO);
        path_reset();
        CHECK(iptables_tools_version(&(struct iptables_tools) {IPTABLES_BACKEND_NFT, true}, version,
                                     sizeof version) == -ENOENT);
}

/* With an explicit backend the probe detects nothing: it only finds the
 * tools and asks them for --random-fully. */
static void test_probe(void) {
        struct host_facts h = {0};

        path_reset();
        tools3("iptables-legacy", "iptables v1.8.9 (legacy)");
        tools3("iptables-nft", "iptables v1.8.9 (nf_tables)");
        host_probe_iptables(&h, IPTABLES_BACKEND_LEGACY);
        CHECK(!h.iptables_missing && !h.iptables_nft && h.random_fully);
        CHECK(h.iptables.backend == IPTABLES_BACKEND_LEGACY && !h.iptables.plain);
        CHECK_STREQ(h.iptables_why, "--iptables-backend=legacy");
        host_probe_iptables(&h, IPTABLES_BACKEND_NFT);
        CHECK(!h.iptables_missing && h.iptables_nft && h.random_fully);

        /* Asked for a backend that is not installed: missing, and said why. */
        path_reset();
        tools3("iptables-nft", "iptables v1.8.9 (nf_tables)");
        host_probe_iptables(&h, IPTABLES_BACKEND_LEGACY);
        CHECK(h.iptables_missing && !h.random_fully && !h.iptables_nft);
        CHECK(h.iptables.backend == IPTABLES_BACKEND_LEGACY);
        CHECK_STREQ(h.iptables_why, "--iptables-backend=legacy; but iptables-legacy is not installed");

        /* --random-fully from the version of the tools that run: 1.6.2 on. */
        path_reset();
        tools3("iptables", "iptables v1.6.1");
        host_probe_iptables(&h, IPTABLES_BACKEND_LEGACY);
        CHECK(!h.iptables_missing && h.iptables.plain && !h.random_fully);
        path_reset();
        tools3("iptables", "iptables v1.6.2");
        host_probe_iptables(&h, IPTABLES_BACKEND_LEGACY);
        CHECK(!h.iptables_missing && h.random_fully);
}

int main(void) {
        char *old_path = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
        if (!mkdtemp(dir)) {
                perror("mkdtemp");
                return 1;
        }
        TEST_RUN(test_strings);
        TEST_RUN(test_names);
        TEST_RUN(test_installed);
        TEST_RUN(test_find);
        TEST_RUN(test_probe);
        if (old_path)
                setenv("PATH", old_path, 1);
        free(old_path);
        char cmd[256];
        snprintf(cmd, sizeof cmd, "/bin/rm -rf %s", dir);
        if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", dir);
        TEST_DONE();
}
