/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Userspace mode's set-up (proxy/userspace/us-switch.c) against a scratch
 * sysctl tree, never the machine's: net.ipv4.tcp_tw_reuse becomes 1 where
 * it was not, is left alone where it was, and a tree without the file is
 * an error the caller sees; the running mode reports no leftovers of its
 * own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proxy/userspace/us-switch.h"
#include "test.h"

#define TW "/proc/sys/net/ipv4/tcp_tw_reuse"

static void put(const char *root, const char *value) {
        char p[512];
        snprintf(p, sizeof p, "%s" TW, root);
        FILE *f = fopen(p, "w");
        CHECK(f != NULL);
        if (f) {
                fputs(value, f);
                fclose(f);
        }
}

static int get(const char *root) {
        char p[512], text[16] = "";
        snprintf(p, sizeof p, "%s" TW, root);
        FILE *f = fopen(p, "r");
        if (!f)
                return -1;
        if (!fgets(text, sizeof text, f))
                text[0] = '\0';
        fclose(f);
        return atoi(text);
}

static void test_setup(void) {
        char root[] = "/tmp/kproxy-test-us-switch-XXXXXX", dir[512];
        CHECK(mkdtemp(root) != NULL);
        /* No such file: the error comes back. */
        CHECK(us_switch_setup(NULL, NULL, "node-1", root) < 0);
        const char *parts[] = {"/proc", "/proc/sys", "/proc/sys/net", "/proc/sys/net/ipv4"};
        for (size_t i = 0; i < 4; i++) {
                snprintf(dir, sizeof dir, "%s%s", root, parts[i]);
                CHECK(mkdir(dir, 0700) == 0);
        }
        put(root, "2\n");
        CHECK(us_switch_setup(NULL, NULL, "node-1", root) == 0 && get(root) == 1);
        put(root, "1\n");
        CHECK(us_switch_setup(NULL, NULL, "node-1", root) == 0 && get(root) == 1);

        snprintf(dir, sizeof dir, "%s" TW, root);
        unlink(dir);
        for (size_t i = 4; i-- > 0;) {
                snprintf(dir, sizeof dir, "%s%s", root, parts[i]);
                rmdir(dir);
        }
        rmdir(root);
}

static void test_running_mode_has_no_leftovers(void) {
        CHECK(!us_switch_leftovers(NULL, true));
        CHECK(us_switch_remove_leftovers(NULL, true) == 0);
}

int main(void) {
        TEST_RUN(test_setup);
        TEST_RUN(test_running_mode_has_no_leftovers);
        TEST_DONE();
}
