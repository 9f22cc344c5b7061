/* SPDX-License-Identifier: Apache-2.0 */
#include "userspace/fwd-pipes.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

struct fwd_pipes {
        size_t max, n;
        int size;               /* asked of F_SETPIPE_SZ; 0: default */
        size_t capacity;
        int (*fds)[2];
};

static int pipe_new(const struct fwd_pipes *p, int ret[2]) {
        if (pipe2(ret, O_NONBLOCK | O_CLOEXEC) < 0)
                return -errno;
        if (p->size > 0)
                (void) fcntl(ret[1], F_SETPIPE_SZ, p->size);
        return 0;
}

int fwd_pipes_new(size_t max, int size, struct fwd_pipes **ret) {
        struct fwd_pipes *p;
        int probe[2], r;

        if (max == 0 || size < 0)
                return -EINVAL;
        p = calloc(1, sizeof *p);
        if (!p || !(p->fds = calloc(max, sizeof *p->fds))) {
                free(p);
                return -ENOMEM;
        }
        p->max = max;
        p->size = size;
        /* What the kernel grants (a power of two of pages, at most
         * /proc/sys/fs/pipe-max-size without CAP_SYS_RESOURCE); the probe
         * becomes the first spare. */
        r = pipe_new(p, probe);
        if (r < 0) {
                fwd_pipes_free(p);
                return r;
        }
        r = fcntl(probe[1], F_GETPIPE_SZ);
        p->capacity = r > 0 ? (size_t) r : 65536;
        fwd_pipes_put(p, probe, 1);
        *ret = p;
        return 0;
}

struct fwd_pipes *fwd_pipes_free(struct fwd_pipes *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n; i++) {
                close(p->fds[i][0]);
                close(p->fds[i][1]);
        }
        free(p->fds);
        free(p);
        return NULL;
}

size_t fwd_pipes_capacity(const struct fwd_pipes *p) {
        return p->capacity;
}

int fwd_pipes_get(struct fwd_pipes *p, int ret[2]) {
        if (p->n > 0) {
                p->n--;
                ret[0] = p->fds[p->n][0];
                ret[1] = p->fds[p->n][1];
                return 0;
        }
        return pipe_new(p, ret);
}

void fwd_pipes_put(struct fwd_pipes *p, int pipe[2], int empty) {
        if (pipe[0] >= 0 && pipe[1] >= 0 && empty && p->n < p->max) {
                p->fds[p->n][0] = pipe[0];
                p->fds[p->n][1] = pipe[1];
                p->n++;
        } else {
                if (pipe[0] >= 0)
                        close(pipe[0]);
                if (pipe[1] >= 0)
                        close(pipe[1]);
        }
        pipe[0] = pipe[1] = -1;
}

size_t fwd_pipes_spare(const struct fwd_pipes *p) {
        return p->n;
}
