/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The encoder's shared writers that are not inline (nftmsg-put.h).
 */
#include "render/nftmsg-put.h"

/* The name of table idx as an attribute: every message carries one, so
 * the names and their lengths are made once. */
void nftmsg_put_table(struct nlmsghdr *nlh, uint16_t type, unsigned idx) {
        static char names[NFTIR_TABLES_MAX + 1][NFTIR_TABLE_NAME_MAX];
        static uint8_t lens[NFTIR_TABLES_MAX + 1];
        if (idx > NFTIR_TABLES_MAX) {
                char b[NFTIR_TABLE_NAME_MAX];
                nftmsg_attr_strz(nlh, type, nftir_table_name(idx, b));
                return;
        }
        if (!lens[idx]) {
                char b[NFTIR_TABLE_NAME_MAX];
                const char *n = nftir_table_name(idx, b);
                lens[idx] = (uint8_t) (strlen(n) + 1);
                memcpy(names[idx], n, lens[idx]);
        }
        nftmsg_attr(nlh, type, lens[idx], names[idx]);
}
