/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process_* families, as the Prometheus Go client's process collector
 * reports them for kube-proxy (component-base registers it unannotated, so
 * no "[ALPHA]"). Its procfs backend reads /proc/self/stat (CPU ticks at
 * USER_HZ, virtual size, resident pages, start time in ticks after boot),
 * /proc/stat's btime, counts /proc/self/fd, and takes the soft limits of
 * open files and address space, where "unlimited" is 2^64-1.
 *
 * Read at scrape time, straight from procfs: small files that the kernel
 * answers without blocking.
 */
#include "http/metrics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/cleanup.h"

struct process_stat {
        uint64_t utime, stime;          /* ticks */
        uint64_t starttime;             /* ticks after boot */
        uint64_t vsize;                 /* bytes */
        uint64_t rss;                   /* pages */
};

/* Reads a small procfs file whole. Returns the length or -errno. */
static ssize_t process_read(const char *path, char *out, size_t outlen) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t n = 0;

        if (fd < 0)
                return -errno;
        while (n < outlen - 1) {
                ssize_t k = read(fd, out + n, outlen - 1 - n);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        out[n] = '\0';
        return (ssize_t) n;
}

/* /proc/self/stat: "pid (comm) state ppid ...". comm may hold spaces and
 * parentheses, so fields are counted from the last ')'. */
static int process_read_stat(struct process_stat *ret) {
        char text[1024];
        const char *p;
        uint64_t field[25] = {0};
        ssize_t n = process_read("/proc/self/stat", text, sizeof text);

        if (n < 0)
                return (int) n;
        p = strrchr(text, ')');
        if (!p)
                return -EBADMSG;
        p++;
        /* Field 3 (state) is a letter; 4 onwards are numbers. */
        while (*p == ' ')
                p++;
        if (!*p)
                return -EBADMSG;
        p++;
        for (int i = 4; i <= 24; i++) {
                char *end;

                errno = 0;
                field[i] = strtoull(p, &end, 10);
                /* Some fields are signed (priority, nice): only the unsigned
                 * ones are used, but all must parse. */
                if (end == p || errno != 0)
                        return -EBADMSG;
                p = end;
        }
        *ret = (struct process_stat) {
                .utime = field[14],
                .stime = field[15],
                .starttime = field[22],
                .vsize = field[23],
                .rss = field[24],
        };
        return 0;
}

/* The boot time in Unix seconds, from /proc/stat's "btime" line. */
static int process_read_btime(uint64_t *ret) {
        char text[16384];
        const char *p;
        ssize_t n = process_read("/proc/stat", text, sizeof text);

        if (n < 0)
                return (int) n;
        for (p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
                if (strncmp(p, "btime ", 6) == 0) {
                        *ret = strtoull(p + 6, NULL, 10);
                        return 0;
                }
        return -ENOENT;
}

/* Entries of /proc/self/fd, the directory's own fd included, as procfs'
 * FileDescriptorsLen counts them. */
static int process_count_fds(uint64_t *ret) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *e;
        uint64_t n = 0;

        if (!d)
                return -errno;
        while ((e = readdir(d)))
                if (e->d_name[0] != '.')
                        n++;
        closedir(d);
        *ret = n;
        return 0;
}

/* RLIM_INFINITY is all ones, which is what procfs makes of "unlimited". */
static int process_limit(int resource, double *ret) {
        struct rlimit rl;

        if (getrlimit(resource, &rl) < 0)
                return -errno;
        *ret = (double) rl.rlim_cur;
        return 0;
}

void metrics_process_write(struct buf *b) {
        struct process_stat st;
        long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
        bool have_stat = process_read_stat(&st) >= 0 && hz > 0 && page > 0;
        uint64_t btime = 0, fds = 0;
        double limit = 0;

        if (have_stat) {
                metrics_put_family(b, "process_cpu_seconds_total", "counter",
                                   "CPU time the process has used, user and system, in seconds.");
                metrics_put_sample(b, "process_cpu_seconds_total", NULL,
                                   (double) (st.utime + st.stime) / (double) hz);
        }
        if (process_limit(RLIMIT_NOFILE, &limit) >= 0) {
                metrics_put_family(b, "process_max_fds", "gauge", "Soft limit on open file descriptors.");
                metrics_put_sample(b, "process_max_fds", NULL, limit);
        }
        if (process_count_fds(&fds) >= 0) {
                metrics_put_family(b, "process_open_fds", "gauge", "File descriptors the process has open.");
                metrics_put_sample(b, "process_open_fds", NULL, (double) fds);
        }
        if (have_stat) {
                metrics_put_family(b, "process_resident_memory_bytes", "gauge",
                                   "Memory the process has resident, in bytes.");
                metrics_put_sample(b, "process_resident_memory_bytes", NULL, (double) st.rss * (double) page);
        }
        if (have_stat && process_read_btime(&btime) >= 0) {
                metrics_put_family(b, "process_start_time_seconds", "gauge",
                                   "Unix time the process started, in seconds.");
                metrics_put_sample(b, "process_start_time_seconds", NULL,
                                   (double) btime + (double) st.starttime / (double) hz);
        }
        if (have_stat) {
                metrics_put_family(b, "process_virtual_memory_bytes", "gauge",
                                   "Virtual address space of the process, in bytes.");
                metrics_put_sample(b, "process_virtual_memory_bytes", NULL, (double) st.vsize);
        }
        if (process_limit(RLIMIT_AS, &limit) >= 0) {
                metrics_put_family(b, "process_virtual_memory_max_bytes", "gauge",
                                   "Soft limit on the virtual address space, in bytes.");
                metrics_put_sample(b, "process_virtual_memory_max_bytes", NULL, limit);
        }
}
