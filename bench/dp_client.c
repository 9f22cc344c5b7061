/* SPDX-License-Identifier: Apache-2.0 */
/* Closed-loop new-connection client for the packet-path benchmark
 * (bench/programming.py; first written for the performance survey, part (c)).
 * usage: dp_client IP PORT SECONDS
 * Loop: socket, connect, send a small request, read the fixed 40-byte reply, close
 * (client closes first; see dp_server.c).
 * Prints one line: conns, conns/s, connect() and whole-connection latency percentiles (us). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REPLY_LEN 40 /* strlen("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok") */

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static int cmp(const void *a, const void *b) { float x = *(const float *)a, y = *(const float *)b; return (x > y) - (x < y); }
static float pct(float *v, long n, double p) { long i = (long)(p * (n - 1) + 0.5); return v[i]; }

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: dp_client IP PORT SECONDS\n"); return 2; }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &a.sin_addr);
    double dur = atof(argv[3]);
    long cap = 4000000, n = 0, fails = 0;
    float *tot = malloc(cap * sizeof(float)), *con = malloc(cap * sizeof(float));
    static const char req[] = "GET / HTTP/1.0\r\n\r\n";
    char buf[512];
    double t0 = now(), end = t0 + dur;
    while (n < cap) {
        double s = now();
        if (s >= end) break;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof a)) { fails++; close(fd); continue; }
        double c = now();
        if (write(fd, req, sizeof req - 1) < 0) { fails++; close(fd); continue; }
        long got = 0, r;
        while (got < REPLY_LEN && (r = read(fd, buf, sizeof buf)) > 0) got += r;
        close(fd);
        if (got < REPLY_LEN) { fails++; continue; }
        double e = now();
        con[n] = (c - s) * 1e6; tot[n] = (e - s) * 1e6; n++;
    }
    double el = now() - t0;
    if (!n) { printf("conns=0 fails=%ld\n", fails); return 1; }
    qsort(tot, n, sizeof(float), cmp); qsort(con, n, sizeof(float), cmp);
    printf("conns=%ld fails=%ld secs=%.3f cps=%.0f connect_us p50=%.1f p99=%.1f total_us min=%.1f p50=%.1f p90=%.1f p99=%.1f max=%.1f\n",
           n, fails, el, n / el, pct(con, n, .5), pct(con, n, .99),
           tot[0], pct(tot, n, .5), pct(tot, n, .9), pct(tot, n, .99), tot[n - 1]);
    return 0;
}
