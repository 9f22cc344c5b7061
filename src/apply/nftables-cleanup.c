/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Removing kproxy's tables: a dump of the family's table names, then one
 * transaction per table of kproxy's found there.
 */
#include "apply/nftables-cleanup.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdbool.h>

#include "apply/nftables-internal.h"
#include "apply/nftables-commit.h"
#include "apply/nftables-handle.h"
#include "render/nftir.h"
#include "render/nftmsg.h"
#include "util/log.h"

static int table_name_cb(const struct nlmsghdr *nlh, void *data) {
        bool *present = data;
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
                if (mnl_attr_get_type(a) == NFTA_TABLE_NAME && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0) {
                        int i = nftir_table_index(mnl_attr_get_str(a));
                        if (i >= 0)
                                present[i] = true;
                }
        return MNL_CB_OK;
}

int nftables_drop_tables(struct nftables *n, uint8_t family, unsigned from) {
        char buf[MNL_SOCKET_BUFFER_SIZE], err[512];
        bool present[NFTIR_TABLES_MAX + 1] = {false};
        int r, ret = 0;

        r = nftables_talk(n, nftables_request(n, buf, NFT_MSG_GETTABLE, NLM_F_DUMP, family), table_name_cb, present);
        if (r < 0)
                return log_error_errno(r, "Failed to list the IPv%u nftables tables", family);
        for (unsigned i = from; i <= NFTIR_TABLES_MAX; i++) {
                char tbuf[NFTIR_TABLE_NAME_MAX];
                struct nftmsg m;
                if (!present[i])
                        continue;
                nftmsg_init(&m, family, n->seq);
                m.table = (uint16_t) i;
                nftmsg_batch_begin(&m);
                nftmsg_table_del(&m);
                nftmsg_batch_end(&m);
                r = nftables_commit(n, &m, err, sizeof err);
                n->seq = m.seq;
                nftmsg_done(&m);
                const char *name = nftir_table_name(i, tbuf);
                if (r == 0)
                        log_info("Deleted nftables table %s %s", family == 6 ? "ip6" : "ip", name);
                else if (r != -ENOENT)
                        ret = log_error_errno(r, "Failed to delete nftables table %s %s: %s",
                                              family == 6 ? "ip6" : "ip", name, err);
        }
        return ret;
}

int nftables_cleanup(void) {
        struct nftables *n = NULL;
        int r = nftables_open(&n), ret = 0;

        if (r < 0)
                return log_error_errno(r, "Failed to open nf_tables netlink");
        for (uint8_t family = 4; family <= 6; family += 2)
                if ((r = nftables_drop_tables(n, family, 0)) < 0)
                        ret = r;
        nftables_close(n);
        return ret;
}
