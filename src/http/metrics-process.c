/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process_* families, as the Prometheus Go client's process collector
 * reports them for kube-proxy (component-base registers it unannotated, so
 * no "[ALPHA]"). Its procfs backend reads /proc/self/stat (CPU ticks at
 * USER_HZ, virtual size, resident pages, start time in ticks after boot),
 * /proc/stat's btime, counts /proc/self/fd, takes the soft limits of open
 * files and address space, where "unlimited" is 2^64-1, and (client_golang
 * 1.20 on, so kube-proxy 1.34) the IpExt InOctets and OutOctets of
 * /proc/self/net/netstat: the network namespace's IP traffic, whoever sent
 * it, under a per-process name.
 *
 * Read at scrape time, straight from procfs: small files that the kernel
 * answers without blocking.
 */
#include "http/metrics-internal.h"

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

/* /proc/self/net/netstat: pairs of lines, a header "IpExt: Name ..." and
 * its values "IpExt: 1 ...". A missing column reads as 0, as procfs leaves
 * it unset and the collector prints 0. */
static int process_read_octets(uint64_t *ret_in, uint64_t *ret_out) {
        char text[32768];
        char *names = NULL, *values = NULL, *save_n, *save_v;
        uint64_t in = 0, out = 0;
        ssize_t n = process_read("/proc/self/net/netstat", text, sizeof text);

        if (n < 0)
                return (int) n;
        for (char *line = text; line && *line;) {
                char *nl = strchr(line, '\n');

                if (nl)
                        *nl = '\0';
                if (strncmp(line, "IpExt: ", 7) == 0) {
                        if (!names)
                                names = line + 7;
                        else if (!values)
                                values = line + 7;
                }
                line = nl ? nl + 1 : NULL;
        }
        if (!names || !values)
                return -ENOENT;
        for (char *k = strtok_r(names, " ", &save_n), *v = strtok_r(values, " ", &save_v); k && v;
             k = strtok_r(NULL, " ", &save_n), v = strtok_r(NULL, " ", &save_v)) {
                if (strcmp(k, "InOctets") == 0)
                        in = strtoull(v, NULL, 10);
                else if (strcmp(k, "OutOctets") == 0)
                        out = strtoull(v, NULL, 10);
        }
        *ret_in = in;
        *ret_out = out;
        return 0;
}

static void process_put(struct buf *b, const struct metrics_desc *d, double v) {
        metrics_put_header(b, d);
        metrics_put_sample(b, d->name, NULL, v);
}

/* One family, read now; a value that cannot be read leaves it out, as the
 * collector reports an error instead of the sample. */
void metrics_write_process(const struct metrics *m, const struct metrics_desc *d, struct buf *b) {
        enum metrics_family_id id = (enum metrics_family_id) d->arg;
        struct process_stat st;
        long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
        uint64_t btime = 0, fds = 0, in = 0, out = 0;
        double limit = 0;

        (void) m;
        switch (id) {
        case MF_PROCESS_CPU:
                if (process_read_stat(&st) >= 0 && hz > 0)
                        process_put(b, d, (double) (st.utime + st.stime) / (double) hz);
                break;
        case MF_PROCESS_MAX_FDS:
                if (process_limit(RLIMIT_NOFILE, &limit) >= 0)
                        process_put(b, d, limit);
                break;
        case MF_PROCESS_NETWORK_RECEIVE:
        case MF_PROCESS_NETWORK_TRANSMIT:
                if (process_read_octets(&in, &out) >= 0)
                        process_put(b, d, (double) (id == MF_PROCESS_NETWORK_RECEIVE ? in : out));
                break;
        case MF_PROCESS_OPEN_FDS:
                if (process_count_fds(&fds) >= 0)
                        process_put(b, d, (double) fds);
                break;
        case MF_PROCESS_RESIDENT:
                if (process_read_stat(&st) >= 0 && page > 0)
                        process_put(b, d, (double) st.rss * (double) page);
                break;
        case MF_PROCESS_START_TIME:
                if (process_read_stat(&st) >= 0 && hz > 0 && process_read_btime(&btime) >= 0)
                        process_put(b, d, (double) btime + (double) st.starttime / (double) hz);
                break;
        case MF_PROCESS_VIRTUAL:
                if (process_read_stat(&st) >= 0)
                        process_put(b, d, (double) st.vsize);
                break;
        case MF_PROCESS_VIRTUAL_MAX:
                if (process_limit(RLIMIT_AS, &limit) >= 0)
                        process_put(b, d, limit);
                break;
        default:
                break;
        }
}
