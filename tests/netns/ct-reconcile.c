/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test driver for tests/netns/test-conntrack.sh: runs one
 * conntrack_reconcile_udp() in the current network namespace with the
 * frontends given on the command line and prints the number deleted.
 *
 *   ct-reconcile [-v N] FAMILY FRONTEND=BACKEND,BACKEND... ...
 *
 * FRONTEND is IP:PORT ([IPv6]:PORT) or nodeport:PORT; BACKEND is IP:PORT
 * ([IPv6]:PORT). An empty backend list ("10.96.0.10:53=") is a frontend
 * without endpoints. Exit status 0 on success, 1 on a usage error, 2 if the
 * reconciler failed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply/conntrack.h"
#include "util/log.h"

/* Splits "IP:PORT" or "[IPv6]:PORT" (modified in place). */
static int parse_endpoint(char *s, struct inet_addr *ret_ip, uint16_t *ret_port) {
        char *host = s, *colon;
        unsigned long port;
        char *end;

        if (*s == '[') {
                host = s + 1;
                colon = strstr(host, "]:");
                if (!colon)
                        return -EINVAL;
                *colon++ = '\0';
        } else {
                colon = strrchr(s, ':');
                if (!colon)
                        return -EINVAL;
                *colon = '\0';
        }
        errno = 0;
        port = strtoul(colon + 1, &end, 10);
        if (errno || *end || end == colon + 1 || port == 0 || port > 65535)
                return -EINVAL;
        if (inet_addr_parse(host, ret_ip) < 0)
                return -EINVAL;
        *ret_port = (uint16_t) port;
        return 0;
}

static int parse_frontend(char *arg, struct ct_frontend *f) {
        char *eq = strchr(arg, '='), *be, *save = NULL;
        struct ct_backend *v;
        size_t cap = 1;

        if (!eq)
                return -EINVAL;
        *eq = '\0';
        if (strncmp(arg, "nodeport:", 9) == 0) {
                char *end;
                unsigned long port = strtoul(arg + 9, &end, 10);
                if (*end || end == arg + 9 || port == 0 || port > 65535)
                        return -EINVAL;
                f->node_port = 1;
                f->port = (uint16_t) port;
        } else if (parse_endpoint(arg, &f->ip, &f->port) < 0) {
                return -EINVAL;
        }
        for (const char *p = eq + 1; *p; p++)
                cap += *p == ',';
        v = calloc(cap, sizeof *v);
        if (!v)
                return -ENOMEM;
        f->backends = v;
        for (be = strtok_r(eq + 1, ",", &save); be; be = strtok_r(NULL, ",", &save)) {
                if (parse_endpoint(be, &v[f->n_backends].ip, &v[f->n_backends].port) < 0)
                        return -EINVAL;
                f->n_backends++;
        }
        return 0;
}

int main(int argc, char **argv) {
        struct ct_frontend *fe;
        int first = 1, family, n, r;

        if (argc > 2 && strcmp(argv[1], "-v") == 0) {
                log_set_verbosity(atoi(argv[2]));
                first = 3;
        }
        if (argc - first < 1) {
                fprintf(stderr, "usage: %s [-v N] FAMILY FRONTEND=BACKEND,... ...\n", argv[0]);
                return 1;
        }
        family = atoi(argv[first]);
        n = argc - first - 1;
        fe = calloc((size_t) n + 1, sizeof *fe);
        if (!fe)
                return 1;
        for (int i = 0; i < n; i++) {
                if (parse_frontend(argv[first + 1 + i], &fe[i]) < 0) {
                        fprintf(stderr, "bad frontend: %s\n", argv[first + 1 + i]);
                        return 1;
                }
        }
        r = conntrack_reconcile_udp((uint8_t) family, fe, (size_t) n);
        for (int i = 0; i < n; i++)
                free((void *) fe[i].backends);
        free(fe);
        if (r < 0) {
                fprintf(stderr, "conntrack_reconcile_udp: %s\n", strerror(-r));
                return 2;
        }
        printf("%d\n", r);
        return 0;
}
