/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An element is known by an id, a string: its set, as a byte for the
 * renderer's sets or else "<name>/", then its key's bytes six bits a
 * character. 100k of them at 50k services, in the records and their
 * owners' maps: "service-ips" and a 12-byte key in 17 characters, not 36
 * in hex.
 */
#include "proxy/nftables/nftsync-elemid.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "render/nftmsg.h"
#include "util/strb.h"

static const char *const elem_sets[] = {"cluster-ips", "service-ips", "service-nodeports", "no-endpoint-services",
                                        "no-endpoint-nodeports", "firewall-ips", "nodeport-ips"};
#define ELEM_SETS (sizeof elem_sets / sizeof *elem_sets)
_Static_assert(ELEM_SETS < '\n', "a set's code is never a newline (released ids are kept one a line)");
static const char id_digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+_";

/* The id of key (n bytes) in set, in out[NFTSYNC_ELEMID_MAX]. */
void nftsync_elemid(const char *set, const uint8_t *key, size_t n, char *out) {
        size_t o = 0;
        for (size_t k = 0; k < ELEM_SETS && !o; k++)
                if (strcmp(set, elem_sets[k]) == 0)
                        out[o++] = (char) (1 + k);
        if (!o) {
                size_t len = strnlen(set, 63);
                memcpy(out, set, len);
                out[len] = '/';
                o = len + 1;
        }
        for (size_t bit = 0; bit < 8 * n; bit += 6) {
                unsigned v = 0;
                for (size_t b = bit; b < bit + 6; b++)
                        v = v << 1 | (b < 8 * n ? (key[b / 8] >> (7 - b % 8)) & 1u : 0);
                out[o++] = id_digits[v];
        }
        out[o] = '\0';
}

/* Decodes an element id back into its set and key. */
int nftsync_elemid_parse(const char *id, char *set, size_t set_len, uint8_t *key, size_t *ret_len) {
        const char *digits;
        unsigned c = (unsigned char) id[0];
        if (c >= 1 && c <= ELEM_SETS) {
                snprintf(set, set_len, "%s", elem_sets[c - 1]);
                digits = id + 1;
        } else {
                const char *slash = strrchr(id, '/');     /* the digits hold none */
                if (!slash || (size_t) (slash - id) >= set_len)
                        return -EINVAL;
                memcpy(set, id, (size_t) (slash - id));
                set[slash - id] = '\0';
                digits = slash + 1;
        }
        size_t chars = strlen(digits), n = chars * 6 / 8;
        if (n > NFTMSG_KEY_MAX)
                return -EINVAL;
        memset(key, 0, n);
        for (size_t i = 0; i < chars; i++) {
                const char *d = strchr(id_digits, digits[i]);
                if (!d || !*d)
                        return -EINVAL;
                unsigned v = (unsigned) (d - id_digits);
                for (size_t b = 0; b < 6; b++) {
                        size_t bit = i * 6 + b;
                        if (bit < 8 * n && (v >> (5 - b)) & 1u)
                                key[bit / 8] |= (uint8_t) (0x80u >> bit % 8);
                }
        }
        *ret_len = n;
        return 0;
}

/* The id for a log: "<set> <key in hex>", in out (size bytes). */
const char *nftsync_elemid_show(const char *id, char *out, size_t size) {
        char set[64];
        uint8_t key[NFTMSG_KEY_MAX];
        size_t n;
        struct strb b = strb_init(out, size);
        if (nftsync_elemid_parse(id, set, sizeof set, key, &n) < 0) {
                strb_puts(&b, "(bad id)");
                return out;
        }
        strb_puts(&b, set);
        strb_putn(&b, " ", 1);
        strb_puthex(&b, key, n);
        return out;
}

void nftsync_elemid_del(struct nftmsg *m, const char *id) {
        char set[64];
        uint8_t key[NFTMSG_KEY_MAX];
        size_t n;
        if (nftsync_elemid_parse(id, set, sizeof set, key, &n) == 0)
                nftmsg_elem_del(m, set, key, n);
}
