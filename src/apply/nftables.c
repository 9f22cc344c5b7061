/* SPDX-License-Identifier: Apache-2.0 */
#include "apply/nftables.h"

#include <errno.h>
#include <string.h>

#include "apply/exec.h"
#include "util/buf.h"
#include "util/log.h"

int nftables_cleanup(void) {
        static const char *const families[] = {"ip", "ip6"};
        int r = 0;


        for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
                const char *list[] = {"nft", "list", "table", families[i], "kube-proxy", NULL};
                const char *del[] = {"nft", "delete", "table", families[i], "kube-proxy", NULL};
                struct buf err = BUF_INIT;

                /* No table (or no nft at all): nothing of nftables mode here. */
                if (exec_run(list, NULL, 0, NULL, NULL) != 0)
                        continue;
                int q = exec_run(del, NULL, 0, NULL, &err);
                if (q != 0) {
                        log_error("Failed to delete nftables table %s kube-proxy: %s", families[i],
                                  err.data ? err.data : "");
                        r = -EIO;
                } else {
                        log_info("Deleted nftables table %s kube-proxy", families[i]);
                }
                buf_done(&err);
        }
        return r;
}

static const char *family_name(uint8_t family) {
        return family == 6 ? "ip6" : "ip";
}

int nftables_apply(uint8_t family, const char *script, size_t len) {
        const char *argv[] = {"nft", "-f", "-", NULL};
        struct buf in = BUF_INIT, err = BUF_INIT;
        int r;

        /* "add" first so that "delete" never fails on a missing table. */
        buf_printf(&in, "add table %s kube-proxy\ndelete table %s kube-proxy\n", family_name(family),
                   family_name(family));
        buf_put(&in, script, len);
        r = exec_run(argv, in.data, in.len, NULL, &err);
        if (r != 0) {
                log_error("nft -f failed (%d): %s", r, err.data ? err.data : "(no message)");
                r = r < 0 ? r : -EIO;
        }
        buf_done(&in);
        buf_done(&err);
        return r;
}

bool nftables_table_present(uint8_t family) {
        const char *argv[] = {"nft", "list", "table", family_name(family), "kube-proxy", NULL};
        return exec_run(argv, NULL, 0, NULL, NULL) == 0;
}
