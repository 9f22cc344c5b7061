/* SPDX-License-Identifier: Apache-2.0 */
/* Full syncs that leave out what the kernel holds, against the kernel:
 * restores INPUT as a first full sync (reading the written chains back),
 * runs CMD if given (someone else's change), then restores INPUT again as
 * the next full sync. Prints "FIRST_WRITTEN SECOND_WRITTEN SECOND_LEFT_OUT".
 * Reads the kernel over nf_tables netlink (nl: the chains INPUT declares)
 * or with iptables-save (text).
 * Usage: restore-known 4|6 nl|text INPUT [CMD ARGS...]   (inside a test namespace) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apply/iptables-known.h"
#include "apply/iptables.h"
#include "apply/nftables.h"
#include "util/buf.h"

/* The plain tools, which the scripts read back with (iptables-nft on Debian). */
static const struct iptables_tools tools = {IPTABLES_BACKEND_NFT, .plain = true};

static int full_sync(struct nftables *nl, uint8_t family, struct iptables_known *k, const struct buf *in,
                     size_t *ret_left, size_t *ret_written) {
        struct buf out = BUF_INIT;
        int r = iptables_observe(&tools, nl, family, in->data, in->len, k);
        if (r < 0)
                return r;
        *ret_left = iptables_known_rewrite(k, in->data, in->len, &out);
        const struct buf *sent = *ret_left > 0 ? &out : in;    /* nothing left out: the input as it is */
        r = iptables_restore(&tools, family, sent->data, sent->len, true);
        if (r == 0) {
                iptables_known_commit(k);
                *ret_written = iptables_known_unlearned(k);
                r = iptables_observe(&tools, nl, family, sent->data, sent->len, k);
                if (r == 0)
                        iptables_known_learn(k);
        }
        buf_done(&out);
        return r;
}

int main(int argc, char **argv) {
        struct buf in = BUF_INIT;
        char chunk[65536];
        size_t n, left1, written1, left2, written2;
        FILE *f;

        if (argc < 4 || !(f = fopen(argv[3], "r"))) {
                fprintf(stderr, "usage: restore-known 4|6 nl|text INPUT [CMD ARGS...]\n");
                return 2;
        }
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
                buf_put(&in, chunk, n);
        fclose(f);
        uint8_t family = (uint8_t) atoi(argv[1]);
        struct nftables *nl = NULL;
        if (strcmp(argv[2], "nl") == 0 && nftables_open(&nl) < 0)
                return 1;
        struct iptables_known *k = iptables_known_new(nl != NULL);
        if (full_sync(nl, family, k, &in, &left1, &written1) < 0)
                return 1;
        if (argc > 4) {
                pid_t pid = fork();
                if (pid == 0) {
                        execvp(argv[4], argv + 4);
                        _exit(127);
                }
                int status;
                if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                        return 1;
        }
        if (full_sync(nl, family, k, &in, &left2, &written2) < 0)
                return 1;
        printf("%zu %zu %zu\n", written1, written2, left2);
        iptables_known_free(k);
        nftables_close(nl);
        buf_done(&in);
        return 0;
}
