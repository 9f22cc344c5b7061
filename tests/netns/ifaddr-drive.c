/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Drives userspace/ifaddr.c for tests/netns/test-ifaddr.sh, one operation
 * per run, in the network namespace it is started in:
 *
 *   ifaddr-drive NAME ensure          prints the ifindex
 *   ifaddr-drive NAME add ADDR...
 *   ifaddr-drive NAME del ADDR...
 *   ifaddr-drive NAME list            one address a line
 *   ifaddr-drive NAME delete
 *
 * Exit 0 on success; otherwise the error on stderr and exit 1 (2: usage).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/ifaddr.h"
#include "util/inet.h"

static int run(struct ifaddr *ia, int argc, char **argv) {
        const char *op = argv[2];
        int r = 0;

        if (strcmp(op, "ensure") == 0) {
                r = ifaddr_link_ensure(ia);
                if (r > 0)
                        printf("%d\n", r);
        } else if (strcmp(op, "delete") == 0) {
                r = ifaddr_link_delete(ia);
        } else if (strcmp(op, "list") == 0) {
                struct inet_addr *addrs = NULL;
                size_t n = 0;
                char text[INET_ADDR_STRLEN];
                r = ifaddr_list(ia, &addrs, &n);
                for (size_t i = 0; r == 0 && i < n; i++)
                        printf("%s\n", inet_addr_format(&addrs[i], text));
                free(addrs);
        } else if (strcmp(op, "add") == 0 || strcmp(op, "del") == 0) {
                for (int i = 3; i < argc && r >= 0; i++) {
                        struct inet_addr a;
                        if (inet_addr_parse(argv[i], &a) < 0) {
                                fprintf(stderr, "ifaddr-drive: %s: not an address\n", argv[i]);
                                return 2;
                        }
                        r = op[0] == 'a' ? ifaddr_add(ia, &a) : ifaddr_del(ia, &a);
                }
        } else {
                fprintf(stderr, "ifaddr-drive: unknown operation %s\n", op);
                return 2;
        }
        if (r < 0) {
                fprintf(stderr, "ifaddr-drive: %s %s: %s\n", argv[1], op, strerror(-r));
                return 1;
        }
        return 0;
}

int main(int argc, char **argv) {
        struct ifaddr *ia = NULL;
        int r;

        if (argc < 3) {
                fprintf(stderr, "usage: ifaddr-drive NAME ensure|add|del|list|delete [ADDR...]\n");
                return 2;
        }
        r = ifaddr_open(argv[1], &ia);
        if (r < 0) {
                fprintf(stderr, "ifaddr-drive: open %s: %s\n", argv[1], strerror(-r));
                return 1;
        }
        r = run(ia, argc, argv);
        ifaddr_close(ia);
        return r;
}
