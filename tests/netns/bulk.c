/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bulk TCP transfer for tests/netns/test-fwd.sh (no iperf needed):
 *
 *   bulk sink PORT                       reads each connection to EOF, answers
 *                                        the byte count (8 bytes), closes
 *   bulk send IP PORT STREAMS SECONDS    STREAMS connections writing for
 *                                        SECONDS, then FIN and the sink's count
 *
 * send prints one line: "streams=N bytes=B seconds=S gbps=G verified=0|1",
 * verified when every stream's count from the sink equals what it wrote,
 * and exits 1 when not. A thread per connection; this is a load tool,
 * not kproxy code.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (256 * 1024)

static double now(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double) t.tv_sec + (double) t.tv_nsec / 1e9;
}

static void *sink_conn(void *p) {
        int fd = (int) (intptr_t) p;
        static __thread char buf[CHUNK];
        uint64_t n = 0;
        ssize_t k;

        while ((k = read(fd, buf, sizeof buf)) > 0)
                n += (uint64_t) k;
        if (k == 0)
                if (write(fd, &n, sizeof n) != sizeof n)
                        n = 0;  /* the sender will report the mismatch */
        close(fd);
        return NULL;
}

static int sink(int port) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t) port)};
        int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);

        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(lfd, (struct sockaddr *) &a, sizeof a) < 0 || listen(lfd, 1024) < 0) {
                perror("bulk sink");
                return 1;
        }
        printf("ready\n");
        fflush(stdout);
        for (;;) {
                pthread_t t;
                int fd = accept(lfd, NULL, NULL);
                if (fd < 0)
                        continue;
                if (pthread_create(&t, NULL, sink_conn, (void *) (intptr_t) fd) == 0)
                        pthread_detach(t);
                else
                        close(fd);
        }
}

struct stream {
        struct sockaddr_in to;
        double end;
        uint64_t sent;
        int ok;
};

static void *send_stream(void *p) {
        struct stream *s = p;
        static __thread char buf[CHUNK];
        uint64_t count = 0;
        int fd = socket(AF_INET, SOCK_STREAM, 0);

        if (connect(fd, (struct sockaddr *) &s->to, sizeof s->to) < 0) {
                close(fd);
                return NULL;
        }
        while (now() < s->end) {
                ssize_t k = write(fd, buf, sizeof buf);
                if (k <= 0)
                        break;
                s->sent += (uint64_t) k;
        }
        shutdown(fd, SHUT_WR);
        s->ok = read(fd, &count, sizeof count) == sizeof count && count == s->sent;
        close(fd);
        return NULL;
}

static int send_bulk(const char *ip, int port, int streams, double seconds) {
        struct stream *s = calloc((size_t) streams, sizeof *s);
        pthread_t *t = calloc((size_t) streams, sizeof *t);
        double start = now(), took;
        uint64_t total = 0;
        int ok = 1;

        for (int i = 0; i < streams; i++) {
                s[i].to = (struct sockaddr_in) {.sin_family = AF_INET, .sin_port = htons((uint16_t) port)};
                inet_pton(AF_INET, ip, &s[i].to.sin_addr);
                s[i].end = start + seconds;
                pthread_create(&t[i], NULL, send_stream, &s[i]);
        }
        for (int i = 0; i < streams; i++) {
                pthread_join(t[i], NULL);
                total += s[i].sent;
                ok &= s[i].ok;
        }
        took = now() - start;
        printf("streams=%d bytes=%llu seconds=%.3f gbps=%.2f verified=%d\n", streams, (unsigned long long) total,
               took, (double) total * 8 / took / 1e9, ok);
        free(s);
        free(t);
        return ok ? 0 : 1;
}

int main(int argc, char **argv) {
        signal(SIGPIPE, SIG_IGN);
        if (argc == 3 && strcmp(argv[1], "sink") == 0)
                return sink(atoi(argv[2]));
        if (argc == 6 && strcmp(argv[1], "send") == 0)
                return send_bulk(argv[2], atoi(argv[3]), atoi(argv[4]), atof(argv[5]));
        fprintf(stderr, "usage: bulk sink PORT | bulk send IP PORT STREAMS SECONDS\n");
        return 2;
}
