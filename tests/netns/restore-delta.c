/* SPDX-License-Identifier: Apache-2.0 */
/* A partial sync by rule against the kernel: remembers OLD (what the
 * kernel got last), rewrites NEW through apply/iptables-delta.h, restores
 * the result and prints "CHAINS DELETED INSERTED": the top-level chains
 * left alone or changed by rule, and the -D and -I lines sent.
 * Usage: restore-delta 4|6 OLD NEW   (inside a test namespace) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply/iptables-delta.h"
#include "apply/iptables.h"
#include "util/buf.h"

/* The plain tools, which the scripts read back with (iptables-nft on Debian). */
static const struct iptables_tools tools = {IPTABLES_BACKEND_NFT, .plain = true};

static int slurp(const char *path, struct buf *b) {
        char chunk[65536];
        size_t n;
        FILE *f = fopen(path, "r");
        if (!f)
                return -1;
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
                buf_put(b, chunk, n);
        fclose(f);
        return 0;
}

static size_t count(const char *text, const char *what) {
        size_t n = 0;
        for (const char *p = text; p && (p = strstr(p, what)); p++)
                n++;
        return n;
}

int main(int argc, char **argv) {
        struct buf old = BUF_INIT, new = BUF_INIT, out = BUF_INIT;
        if (argc != 4 || slurp(argv[2], &old) < 0 || slurp(argv[3], &new) < 0) {
                fprintf(stderr, "usage: restore-delta 4|6 OLD NEW\n");
                return 2;
        }
        struct iptables_delta *d = iptables_delta_new();
        iptables_delta_commit(d, old.data, old.len);
        size_t n = iptables_delta_rewrite(d, new.data, new.len, &out);
        int r = iptables_restore(&tools, (uint8_t) atoi(argv[1]), out.data, out.len, false);
        printf("%zu %zu %zu\n", n, count(out.data, "\n-D "), count(out.data, "\n-I "));
        iptables_delta_free(d);
        buf_done(&old);
        buf_done(&new);
        buf_done(&out);
        return r < 0 ? 1 : 0;
}
