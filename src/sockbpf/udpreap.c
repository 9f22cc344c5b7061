/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle: kproxy's own thread never leaves the node's network namespace.
 * A thread of the reaper's enters each namespace (setns), lists and
 * destroys there, and ends; its namespace ends with it. The namespaces are
 * found from the cgroup's processes (/proc/PID/ns/net), each visited once
 * (by device and inode), so a pod of many processes costs one visit.
 */
#include "sockbpf/udpreap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sockbpf/sockbpf.h"
#include "util/cleanup.h"
#include "util/sockdiag.h"

#define MAX_DEPTH 32            /* cgroup directories below the one given */
#define MAX_NETNS 65536

struct nsset {
        size_t hidden;                  /* processes listed as 0: in no PID namespace we see */
        int *fds;
        dev_t *devs;
        ino_t *inos;
        size_t n, cap;
};

static void nsset_done(struct nsset *ns) {
        for (size_t i = 0; i < ns->n; i++)
                close(ns->fds[i]);
        free(ns->fds);
        free(ns->devs);
        free(ns->inos);
}

/* The network namespace of process pid (decimal text), if not seen yet. */
static int nsset_add_pid(struct nsset *ns, const char *pid) {
        char path[64];
        struct stat st;
        int fd;

        if (!*pid || strspn(pid, "0123456789") != strlen(pid) || strlen(pid) > 10)
                return 0;
        if (strcmp(pid, "0") == 0) {
                ns->hidden++;
                return 0;
        }
        snprintf(path, sizeof path, "/proc/%s/ns/net", pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT || errno == ESRCH ? 0 : -errno;   /* exited meanwhile */
        if (fstat(fd, &st) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        for (size_t i = 0; i < ns->n; i++)
                if (ns->devs[i] == st.st_dev && ns->inos[i] == st.st_ino) {
                        close(fd);
                        return 0;
                }
        if (ns->n == ns->cap) {
                size_t cap = ns->cap ? ns->cap * 2 : 16;
                int *fds = reallocarray(ns->fds, cap, sizeof *fds);
                if (fds)
                        ns->fds = fds;
                dev_t *devs = fds ? reallocarray(ns->devs, cap, sizeof *devs) : NULL;
                if (devs)
                        ns->devs = devs;
                ino_t *inos = devs ? reallocarray(ns->inos, cap, sizeof *inos) : NULL;
                if (!inos || ns->n >= MAX_NETNS) {
                        close(fd);
                        return inos ? -E2BIG : -ENOMEM;
                }
                ns->inos = inos;
                ns->cap = cap;
        }
        ns->fds[ns->n] = fd;
        ns->devs[ns->n] = st.st_dev;
        ns->inos[ns->n] = st.st_ino;
        ns->n++;
        return 0;
}

/* The processes of the cgroup directory dirfd, then of those below it. */
static int nsset_walk(struct nsset *ns, int dirfd, int depth) {
        char line[32];
        int r = 0;

        int pfd = openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
        if (pfd >= 0) {
                FILE *f = fdopen(pfd, "re");
                if (!f) {
                        close(pfd);
                        return -errno;
                }
                while (r >= 0 && fgets(line, sizeof line, f)) {
                        line[strcspn(line, "\n")] = '\0';
                        r = nsset_add_pid(ns, line);
                }
                fclose(f);
        } else if (errno != ENOENT) {
                return -errno;
        }
        if (r < 0 || depth >= MAX_DEPTH)
                return r;
        int dfd = dup(dirfd);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!d) {
                if (dfd >= 0)
                        close(dfd);
                return -errno;
        }
        for (struct dirent *de; r >= 0 && (de = readdir(d));) {
                if (de->d_type != DT_DIR || strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (sub < 0)
                        continue;       /* removed meanwhile */
                r = nsset_walk(ns, sub, depth + 1);
                close(sub);
        }
        closedir(d);
        return r;
}

/* ---- in one namespace, on the reaper's thread ---- */

struct victim {
        uint8_t family;
        struct inet_diag_sockid id;
};

struct reap {
        udpreap_stale_fn stale;
        void *ctx;
        struct udpreap_stats st;
        struct victim *v;
        size_t n_v, cap_v;
        int err;                        /* the first failure */
};

static int each(const struct inet_diag_msg *m, void *ctx) {
        struct reap *rp = ctx;
        struct sockbpf_addr peer = {0};
        uint64_t cookie;

        if (m->idiag_state != TCP_ESTABLISHED || (m->idiag_family != AF_INET && m->idiag_family != AF_INET6))
                return 0;
        rp->st.sockets++;
        peer.ip.family = m->idiag_family == AF_INET ? 4 : 6;
        memcpy(peer.ip.bytes, m->id.idiag_dst, peer.ip.family == 4 ? 4 : 16);
        peer.port = ntohs(m->id.idiag_dport);
        cookie = (uint64_t) m->id.idiag_cookie[0] | (uint64_t) m->id.idiag_cookie[1] << 32;
        int r = rp->stale(rp->ctx, cookie, &peer);
        if (r < 0 && !rp->err)
                rp->err = r;
        if (r <= 0)
                return 0;
        if (rp->n_v == rp->cap_v) {
                size_t cap = rp->cap_v ? rp->cap_v * 2 : 16;
                struct victim *v = reallocarray(rp->v, cap, sizeof *v);
                if (!v)
                        return -ENOMEM;
                rp->v = v;
                rp->cap_v = cap;
        }
        rp->v[rp->n_v++] = (struct victim) {.family = m->idiag_family, .id = m->id};
        return 0;
}

static void sockdiag_closep(struct sockdiag **d) {
        sockdiag_close(*d);
}

/* The current namespace's connected UDP sockets: listed, then the stale
 * ones destroyed (after the dump, which the same socket reads). */
static int reap_here(struct reap *rp) {
        _cleanup_(sockdiag_closep) struct sockdiag *d = NULL;
        int r = sockdiag_open(&d);

        rp->n_v = 0;
        if (r >= 0)
                r = sockdiag_dump(d, AF_INET, IPPROTO_UDP, 1u << TCP_ESTABLISHED, each, rp);
        if (r >= 0)
                r = sockdiag_dump(d, AF_INET6, IPPROTO_UDP, 1u << TCP_ESTABLISHED, each, rp);
        for (size_t i = 0; i < rp->n_v; i++) {
                int q = sockdiag_destroy(d, rp->v[i].family, IPPROTO_UDP, &rp->v[i].id);
                if (q == 0)
                        rp->st.destroyed++;
                else if (q != -ENOENT && r >= 0)        /* -ENOENT: closed meanwhile */
                        r = q;
        }
        return r;
}

struct job {
        const struct nsset *ns;
        struct reap rp;
};

static void *reap_thread(void *p) {
        struct job *j = p;

        for (size_t i = 0; i < j->ns->n; i++) {
                if (setns(j->ns->fds[i], CLONE_NEWNET) < 0) {
                        if (!j->rp.err)
                                j->rp.err = -errno;
                        if (errno == EPERM)
                                break;          /* the same for every one */
                        continue;
                }
                j->rp.st.netns++;
                int r = reap_here(&j->rp);
                if (r < 0 && !j->rp.err)
                        j->rp.err = r;
        }
        return NULL;
}

int udpreap_run(const char *cgroup_dir, udpreap_stale_fn stale, void *ctx, struct udpreap_stats *ret) {
        struct nsset ns = {0};
        struct job j = {.ns = &ns, .rp = {.stale = stale, .ctx = ctx}};
        pthread_t t;
        int r;

        *ret = (struct udpreap_stats) {0};
        int dfd = open(cgroup_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        r = nsset_walk(&ns, dfd, 0);
        close(dfd);
        if (r >= 0 && ns.n > 0) {
                r = -pthread_create(&t, NULL, reap_thread, &j);
                if (r == 0) {
                        pthread_join(t, NULL);
                        r = j.rp.err;
                }
        }
        *ret = j.rp.st;
        ret->hidden = ns.hidden;
        free(j.rp.v);
        nsset_done(&ns);
        return r;
}
