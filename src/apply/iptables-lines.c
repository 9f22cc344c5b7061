/* SPDX-License-Identifier: Apache-2.0 */
#include "apply/iptables-lines.h"

#include <string.h>

#include "util/buf.h"
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

void iptables_lines_declarations(const char *input, size_t len, struct buf *out) {
        const char *end = input + len;
        struct iptables_line l;

        for (const char *p = input; iptables_line_next(&p, end, &l);)
                if (l.len > 0 && (l.p[0] == '*' || l.p[0] == ':' || iptables_line_is_commit(&l))) {
                        buf_put(out, l.p, l.len);
                        buf_putc(out, '\n');
                }
}

/* The chains outside the owned ones that owned chains jump to (upstream's:
 * KUBE-MARK-MASQ, and KUBE-MARK-DROP in older layouts), at most max. */
static size_t owned_targets(const char *input, const char *end, struct iptables_line *v, size_t max) {
        struct iptables_line l;
        const char *name;
        size_t n = 0;

        for (const char *p = input; iptables_line_next(&p, end, &l);) {
                if (!iptables_line_starts(&l, "-A ") || !iptables_chain_owned(name, iptables_line_chain(&l, 3, &name)))
                        continue;
                const char *j = memmem(l.p, l.len, " -j ", 4);
                if (!j)
                        continue;
                struct iptables_line t = {j + 4, 0};
                while (t.p + t.len < l.p + l.len && t.p[t.len] != ' ')
                        t.len++;
                if (t.len < 5 || memcmp(t.p, "KUBE-", 5) != 0 || iptables_chain_owned(t.p, t.len))
                        continue;
                size_t i = 0;
                while (i < n && !(v[i].len == t.len && memcmp(v[i].p, t.p, t.len) == 0))
                        i++;
                if (i == n && n < max)
                        v[n++] = t;
        }
        return n;
}

static bool kept(const struct iptables_line *targets, size_t n, const char *name, size_t len) {
        if (iptables_chain_owned(name, len))
                return true;
        for (size_t i = 0; i < n; i++)
                if (targets[i].len == len && memcmp(targets[i].p, name, len) == 0)
                        return true;
        return false;
}

void iptables_lines_owned(const char *input, size_t len, struct buf *out) {
        const char *end = input + len, *name;
        struct iptables_line l, table = {0}, targets[8];
        size_t n_targets = owned_targets(input, end, targets, 8);
        bool open = false;

        for (const char *p = input; iptables_line_next(&p, end, &l);) {
                if (l.len > 0 && l.p[0] == '*') {
                        table = l;
                        open = false;
                        continue;
                }
                if (iptables_line_is_commit(&l)) {
                        if (open)
                                buf_puts(out, "COMMIT\n");
                        open = false;
                        continue;
                }
                size_t skip = l.len > 0 && l.p[0] == ':' ? 1 : iptables_line_starts(&l, "-A ") ? 3 : 0;
                if (skip == 0 || !table.p || !kept(targets, n_targets, name, iptables_line_chain(&l, skip, &name)))
                        continue;
                if (!open) {
                        buf_put(out, table.p, table.len);
                        buf_putc(out, '\n');
                        open = true;
                }
                buf_put(out, l.p, l.len);
                buf_putc(out, '\n');
        }
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
