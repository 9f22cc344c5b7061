/* SPDX-License-Identifier: Apache-2.0 */
#include "apply/iptables-lines.h"

#include <string.h>

#include "util/cleanup.h"

bool iptables_line_next(const char **p, const char *end, struct iptables_line *l) {
        if (*p >= end)
                return false;
        const char *nl = memchr(*p, '\n', (size_t) (end - *p));
        l->p = *p;
        l->len = nl ? (size_t) (nl - *p) : (size_t) (end - *p);
        *p = nl ? nl + 1 : end;
        return true;
}

bool iptables_line_starts(const struct iptables_line *l, const char *s) {
        size_t n = strlen(s);
        return l->len >= n && memcmp(l->p, s, n) == 0;
}

bool iptables_line_is_commit(const struct iptables_line *l) {
        return l->len == 6 && memcmp(l->p, "COMMIT", 6) == 0;
}

size_t iptables_line_chain(const struct iptables_line *l, size_t skip, const char **ret) {
        const char *s = l->p + skip, *e = l->p + l->len, *q = s;
        while (q < e && *q != ' ')
                q++;
        *ret = s;
        return (size_t) (q - s);
}

bool iptables_chain_owned(const char *name, size_t n) {
        static const char *const prefixes[] = {"KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SEP-"};
        for (size_t i = 0; i < ELEMENTSOF(prefixes); i++) {
                size_t k = strlen(prefixes[i]);
                if (n >= k && memcmp(name, prefixes[i], k) == 0)
                        return true;
        }
        return false;
}
