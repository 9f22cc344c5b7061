/* SPDX-License-Identifier: Apache-2.0 */
/* Restores stdin the daemon's way, in pieces of at most MAX_LINES lines
 * (apply/iptables-split.h), and prints how many pieces it took.
 * Usage: restore-split 4|6 MAX_LINES < input   (inside a test namespace) */
#include <stdio.h>
#include <stdlib.h>

#include "apply/iptables.h"
#include "apply/iptables-split.h"
#include "util/buf.h"

/* The plain tools, which the scripts read back with (iptables-nft on Debian). */
static const struct iptables_tools tools = {IPTABLES_BACKEND_NFT, .plain = true};

static int count(const char *piece, size_t len, void *userdata) {
        (void) piece;
        (void) len;
        (*(size_t *) userdata)++;
        return 0;
}

int main(int argc, char **argv) {
        struct buf in = BUF_INIT;
        char chunk[65536];
        size_t n, pieces = 0;

        if (argc != 3) {
                fprintf(stderr, "usage: restore-split 4|6 MAX_LINES < input\n");
                return 2;
        }
        while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
                buf_put(&in, chunk, n);
        size_t max = strtoul(argv[2], NULL, 10);
        if (iptables_split(in.data, in.len, max, count, &pieces) < 0)
                return 1;
        int r = iptables_restore_split(&tools, (uint8_t) atoi(argv[1]), in.data, in.len, max);
        printf("%zu\n", pieces);
        buf_done(&in);
        return r < 0 ? 1 : 0;
}
