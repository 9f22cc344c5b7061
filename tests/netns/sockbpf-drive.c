/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Drives src/sockbpf against the kernel for tests/netns/test-sockbpf.sh,
 * one step per run, as kproxy's runs would (nothing stays running: what
 * translates is what is pinned):
 *
 *   sockbpf-drive PIN_DIR attach CGROUP_DIR
 *   sockbpf-drive PIN_DIR set tcp|udp IP:PORT [affinity=SECONDS] [BACKEND_IP:PORT...]
 *   sockbpf-drive PIN_DIR bulk N SLOTS   N services 10.98.x.y:80 of SLOTS slots each
 *                                        (10.77.0.1:8080 and .2 by turns), in one batch
 *   sockbpf-drive PIN_DIR stats          "services=S slots=L" as the maps hold them
 *   sockbpf-drive PIN_DIR unpin
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sockbpf/sockbpf.h"
#include "util/inet.h"

static int parse(const char *s, struct sockbpf_addr *ret) {
        char buf[INET_ADDR_STRLEN + 8];
        char *colon, *end;
        unsigned long port;

        if (strlen(s) >= sizeof buf)
                return -EINVAL;
        strcpy(buf, s);
        colon = strrchr(buf, ':');
        if (!colon)
                return -EINVAL;
        *colon = 0;
        port = strtoul(colon + 1, &end, 10);
        if (*end || port == 0 || port > 65535 || inet_addr_parse(buf, &ret->ip) < 0)
                return -EINVAL;
        ret->port = (uint16_t) port;
        return 0;
}

int main(int argc, char **argv) {
        struct sockbpf *s;
        int r;

        if (argc < 3) {
                fprintf(stderr, "usage: %s PIN_DIR attach CGROUP | set tcp|udp IP:PORT [affinity=S] [IP:PORT...] | "
                        "bulk N SLOTS | stats | unpin\n", argv[0]);
                return 2;
        }
        if (strcmp(argv[2], "unpin") == 0)
                return sockbpf_unpin(argv[1]) < 0;
        r = sockbpf_open(argv[1], &s);
        if (r < 0) {
                fprintf(stderr, "sockbpf_open: %s\n", strerror(-r));
                return 1;
        }
        if (strcmp(argv[2], "attach") == 0 && argc == 4) {
                r = sockbpf_attach(s, argv[3]);
        } else if (strcmp(argv[2], "set") == 0 && argc >= 5) {
                struct sockbpf_addr svc, be[64];
                int first = 5;
                unsigned long affinity = 0;
                int proto = strcmp(argv[3], "udp") == 0 ? IPPROTO_UDP : IPPROTO_TCP;

                if (argc > 5 && strncmp(argv[5], "affinity=", 9) == 0) {
                        affinity = strtoul(argv[5] + 9, NULL, 10);
                        first = 6;
                }
                size_t n = (size_t) (argc - first);
                r = n > 64 ? -E2BIG : parse(argv[4], &svc);
                for (size_t i = 0; i < n && r == 0; i++)
                        r = parse(argv[first + i], &be[i]);
                if (r == 0)
                        r = sockbpf_set_service(s, proto, &svc, be, n, (uint32_t) affinity);
        } else if (strcmp(argv[2], "bulk") == 0 && argc == 5) {
                unsigned long n = strtoul(argv[3], NULL, 10), slots = strtoul(argv[4], NULL, 10);
                struct sockbpf_addr svc = {.port = 80}, be[64];

                r = n > 65536 || slots > 64 ? -E2BIG : 0;
                for (unsigned long i = 0; i < slots && r == 0; i++)
                        r = parse(i % 2 ? "10.77.0.2:8080" : "10.77.0.1:8080", &be[i]);
                sockbpf_batch_begin(s);
                for (unsigned long i = 0; i < n && r == 0; i++) {
                        char ip[32];
                        snprintf(ip, sizeof ip, "10.98.%lu.%lu", i / 256, i % 256);
                        r = inet_addr_parse(ip, &svc.ip);
                        if (r == 0)
                                r = sockbpf_set_service(s, IPPROTO_TCP, &svc, be, slots, 0);
                }
                int e = sockbpf_batch_end(s);
                if (r == 0)
                        r = e;
        } else if (strcmp(argv[2], "stats") == 0 && argc == 3) {
                struct sockbpf_stats st;
                r = sockbpf_stats(s, &st);
                if (r == 0)
                        printf("services=%zu slots=%zu\n", st.services, st.slots);
        } else {
                r = -EINVAL;
        }
        if (r < 0)
                fprintf(stderr, "%s: %s\n", argv[2], strerror(-r));
        sockbpf_close(s);
        return r < 0;
}
