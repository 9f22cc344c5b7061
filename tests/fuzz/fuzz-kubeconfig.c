/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: any bytes as the --kubeconfig file (kube/kubeconfig.c
 * over kube/load.c's YAML reader), resolved with and without --master.
 * Either it fails with one line naming the file, or it gives a server URL
 * of the documented form, and no credentials for a plain-HTTP server.
 *
 * The files a kubeconfig names are read too, so the target only lets the
 * code open files in its own scratch directory (open() below takes the
 * place of libc's for the code linked in): a CA, a client certificate and
 * key, and a token, under the names the seeds use. Anything else reads as
 * missing, so no input makes it read /dev/stdin or a device.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kube/kubeconfig.h"
#include "scratch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
int open(const char *path, int flags, ...);

static char sandbox[PATH_MAX];
static size_t sandbox_len;
static char kubeconfig[PATH_MAX + 16];

int open(const char *path, int flags, ...) {
        char real[PATH_MAX];
        mode_t mode = 0;

        if (flags & O_CREAT) {
                va_list ap;
                va_start(ap, flags);
                mode = (mode_t) va_arg(ap, int);
                va_end(ap);
        }
        if (!sandbox_len || !realpath(path, real) || strncmp(real, sandbox, sandbox_len) != 0 ||
            real[sandbox_len] != '/') {
                errno = ENOENT;
                return -1;
        }
        return (int) syscall(SYS_openat, AT_FDCWD, real, flags, mode);
}

static void put_file(const char *name, const char *text) {
        char path[PATH_MAX + 64];
        FILE *f;

        snprintf(path, sizeof path, "%s/%s", sandbox, name);
        f = fopen(path, "we");
        if (!f || fputs(text, f) < 0 || fclose(f) != 0)
                abort();
}

static void remove_sandbox(void) {
        static const char *const names[] = {"kubeconfig", "ca.crt", "client.crt", "client.key", "token"};
        char path[PATH_MAX + 64];

        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
                snprintf(path, sizeof path, "%s/%s", sandbox, names[i]);
                unlink(path);
        }
        rmdir(sandbox);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        char dir[64];

        (void) argc, (void) argv;
        fuzz_scratch_dir("kubeconfig", dir, sizeof dir);
        if (!realpath(dir, sandbox))
                abort();
        sandbox_len = strlen(sandbox);
        snprintf(kubeconfig, sizeof kubeconfig, "%s/kubeconfig", sandbox);
        put_file("ca.crt", "-----BEGIN CERTIFICATE-----\nMIIBfakeCA\n-----END CERTIFICATE-----\n");
        put_file("client.crt", "-----BEGIN CERTIFICATE-----\nMIIBfakeClient\n-----END CERTIFICATE-----\n");
        put_file("client.key", "-----BEGIN EC PRIVATE KEY-----\nMHcfakeKey\n-----END EC PRIVATE KEY-----\n");
        put_file("token", "abc.def\n");
        atexit(remove_sandbox);
        return 0;
}

static void resolve(const char *master) {
        char err[KUBE_CONN_ERRLEN];
        struct kube_conn c = {0};
        int r = kube_conn_resolve(kubeconfig, master, &c, err);

        if (r < 0) {
                assert(err[0] && strlen(err) < KUBE_CONN_ERRLEN && !strchr(err, '\n'));
                assert(!c.server);
                return;
        }
        size_t n = strlen(c.server);
        assert(strncmp(c.server, "https://", 8) == 0 || strncmp(c.server, "http://", 7) == 0);
        assert(n > 0 && c.server[n - 1] != '/');
        if (strncmp(c.server, "http://", 7) == 0)
                assert(!c.token && !c.token_file && !c.cert_pem && !c.key_pem && !c.ca_pem);
        kube_conn_done(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        int fd = (int) syscall(SYS_openat, AT_FDCWD, kubeconfig, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        if (fd < 0 || write(fd, data, size) != (ssize_t) size || close(fd) < 0)
                abort();
        resolve(NULL);
        resolve("https://10.0.0.1:6443/");
        return 0;
}
