/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: any bytes as the --config file (a
 * KubeProxyConfiguration: config/config-file.c, config-decode.c, the
 * defaulting and validation of config_finish()). A file that loads must
 * round-trip: what --write-config-to writes for it loads again, and writes
 * the same bytes (a fixed point), so nothing a file can say is lost or
 * changed by kproxy's own writer.
 */
#include <assert.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "scratch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char dir[64];
static char in_path[80], out1[80], out2[80];

static void remove_dir(void) {
        unlink(in_path);
        unlink(out1);
        unlink(out2);
        rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        (void) argc, (void) argv;
        fuzz_scratch_dir("config", dir, sizeof dir);
        snprintf(in_path, sizeof in_path, "%s/in.yaml", dir);
        snprintf(out1, sizeof out1, "%s/out1.yaml", dir);
        snprintf(out2, sizeof out2, "%s/out2.yaml", dir);
        atexit(remove_dir);
        return 0;
}

/* Loads path as --config would: 0 and *c set, or an error (c done). */
static int load(const char *path, struct kproxy_config *c) {
        char *argv[] = {(char *) "--config", (char *) path, NULL};
        int r;

        if (config_init(c) < 0)
                abort();
        r = config_parse_args(c, 2, argv, NULL, 0, NULL, NULL, NULL);
        if (r >= 0)
                r = config_finish(c);
        if (r < 0)
                config_done(c);
        return r;
}

static char *slurp(const char *path, size_t *ret_len) {
        FILE *f = fopen(path, "re");
        char *text = NULL;
        size_t cap = 0;

        assert(f);
        assert(getdelim(&text, &cap, '\0', f) >= 0 || feof(f));
        *ret_len = text ? strlen(text) : 0;
        fclose(f);
        return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct kproxy_config c, again;
        int fd = open(in_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        if (fd < 0 || write(fd, data, size) != (ssize_t) size || close(fd) < 0)
                abort();
        if (load(in_path, &c) < 0)
                return 0;
        assert(config_write(&c, out1) == 0);
        config_done(&c);
        assert(load(out1, &again) == 0);
        assert(config_write(&again, out2) == 0);
        config_done(&again);

        size_t n1, n2;
        char *a = slurp(out1, &n1), *b = slurp(out2, &n2);
        assert(n1 == n2 && memcmp(a, b, n1) == 0);
        free(a);
        free(b);
        return 0;
}
