/* SPDX-License-Identifier: Apache-2.0 */
#include "apply/exec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/buf.h"


static void close_pair(int p[2]) {
        for (int i = 0; i < 2; i++)
                if (p[i] >= 0) {
                        close(p[i]);
                        p[i] = -1;
                }
}

int exec_run(const char *const argv[], const char *input, size_t len, struct buf *out, struct buf *err) {
        int in[2] = {-1, -1}, o[2] = {-1, -1}, e[2] = {-1, -1};
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int r, status;

        if (pipe2(in, O_CLOEXEC) < 0 || pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0) {
                r = -errno;
                goto fail;
        }
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
        posix_spawn_file_actions_adddup2(&fa, o[1], STDOUT_FILENO);
        posix_spawn_file_actions_adddup2(&fa, e[1], STDERR_FILENO);
        r = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *) argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0) {
                r = -r;
                goto fail;
        }
        close(in[0]);
        close(o[1]);
        close(e[1]);
        in[0] = o[1] = e[1] = -1;
        fcntl(in[1], F_SETFL, O_NONBLOCK);
        if (!input || len == 0) {
                close(in[1]);
                in[1] = -1;
        }

        /* Feed stdin and drain both outputs together: a tool that writes a
         * lot of errors while we block writing its input would deadlock. */
        size_t off = 0;
        while (o[0] >= 0 || e[0] >= 0) {
                struct pollfd p[3] = {{o[0], POLLIN, 0}, {e[0], POLLIN, 0}, {in[1], POLLOUT, 0}};
                if (poll(p, 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (p[2].revents & (POLLOUT | POLLERR | POLLHUP)) {
                        ssize_t n = write(in[1], input + off, len - off);
                        if (n > 0)
                                off += (size_t) n;
                        if (n < 0 && errno != EAGAIN && errno != EINTR)
                                off = len;      /* EPIPE: the tool gave up reading */
                        if (off == len) {
                                close(in[1]);
                                in[1] = -1;
                        }
                }
                for (int i = 0; i < 2; i++) {
                        int *fd = i == 0 ? &o[0] : &e[0];
                        struct buf *dst = i == 0 ? out : err;
                        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                                continue;
                        char chunk[65536];
                        ssize_t n = read(*fd, chunk, sizeof chunk);
                        if (n > 0 && dst)
                                buf_put(dst, chunk, (size_t) n);
                        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
                                close(*fd);
                                *fd = -1;
                        }
                }
        }
        if (in[1] >= 0) {
                close(in[1]);
                in[1] = -1;
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        return -EINTR;
fail:
        close_pair(in);
        close_pair(o);
        close_pair(e);
        return r;
}

/* A regular file we may execute (access() alone passes directories). */
static bool executable(const char *file) {
        struct stat st;
        return stat(file, &st) == 0 && S_ISREG(st.st_mode) && access(file, X_OK) == 0;
}

bool exec_installed(const char *name) {
        /* glibc's posix_spawnp() default when PATH is unset */
        const char *path = getenv("PATH");
        char file[4096];

        if (!path)
                path = "/bin:/usr/bin";
        if (strchr(name, '/'))
                return executable(name);
        for (const char *p = path;; p++) {
                size_t len = strcspn(p, ":");
                /* An empty entry is the current directory, as for execvp(). */
                if ((size_t) snprintf(file, sizeof file, "%.*s%s%s", (int) len, p, len ? "/" : "", name) <
                            sizeof file &&
                    executable(file))
                        return true;
                p += len;
                if (!*p)
                        return false;
        }
}
