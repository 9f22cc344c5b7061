/* SPDX-License-Identifier: Apache-2.0 */
#include "kube/list-scan.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct cursor {
        const char *p, *end;
};

static void skip_ws(struct cursor *c) {
        while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
                c->p++;
}

/* Past a string starting at its quote; false if it does not end. */
static bool skip_string(struct cursor *c) {
        for (c->p++; c->p < c->end; c->p++) {
                if (*c->p == '\\') {
                        c->p++;
                        continue;
                }
                if (*c->p == '"') {
                        c->p++;
                        return true;
                }
        }
        return false;
}

/* Past one value: a string, an object or array (brackets counted outside
 * strings; each kind closed by its own), or a scalar up to a delimiter.
 * False on a value that does not end. */
static bool skip_value(struct cursor *c) {
        char stack[128];
        size_t depth = 0;

        skip_ws(c);
        if (c->p >= c->end)
                return false;
        if (*c->p == '"')
                return skip_string(c);
        if (*c->p != '{' && *c->p != '[') {
                const char *start = c->p;
                while (c->p < c->end && !strchr(",}] \t\r\n", *c->p))
                        c->p++;
                return c->p > start;
        }
        while (c->p < c->end) {
                char ch = *c->p;
                if (ch == '"') {
                        if (!skip_string(c))
                                return false;
                        continue;
                }
                if (ch == '{' || ch == '[') {
                        if (depth == sizeof stack)
                                return false;   /* deeper than any object of ours: let jansson judge */
                        stack[depth++] = ch == '{' ? '}' : ']';
                } else if (ch == '}' || ch == ']') {
                        if (depth == 0 || stack[depth - 1] != ch)
                                return false;
                        if (--depth == 0) {
                                c->p++;
                                return true;
                        }
                }
                c->p++;
        }
        return false;
}

static int add_item(struct kube_list_scan *s, size_t *cap, size_t off, size_t len) {
        if (s->n_items == *cap) {
                size_t n = *cap ? *cap * 2 : 64;
                struct kube_list_range *v = realloc(s->items, n * sizeof *v);
                if (!v)
                        return -ENOMEM;
                s->items = v;
                *cap = n;
        }
        s->items[s->n_items++] = (struct kube_list_range) {off, len};
        return 0;
}

/* The elements of the array at c (its '['). */
static int scan_items(struct cursor *c, const char *body, struct kube_list_scan *s) {
        size_t cap = 0;

        c->p++;
        skip_ws(c);
        if (c->p < c->end && *c->p == ']') {
                c->p++;
                return 0;
        }
        for (;;) {
                skip_ws(c);
                const char *start = c->p;
                if (!skip_value(c))
                        return -EINVAL;
                int r = add_item(s, &cap, (size_t) (start - body), (size_t) (c->p - start));
                if (r < 0)
                        return r;
                skip_ws(c);
                if (c->p < c->end && *c->p == ',') {
                        c->p++;
                        continue;
                }
                if (c->p < c->end && *c->p == ']') {
                        c->p++;
                        return 0;
                }
                return -EINVAL;
        }
}

static bool key_is(const char *k, size_t n, const char *want) {
        return n == strlen(want) && memcmp(k, want, n) == 0;
}

static int scan(const char *body, size_t len, struct kube_list_scan *s) {
        struct cursor c = {body, body + len};

        skip_ws(&c);
        if (c.p >= c.end || *c.p != '{')
                return -EINVAL;
        c.p++;
        skip_ws(&c);
        if (c.p < c.end && *c.p == '}') {
                c.p++;
        } else {
                for (;;) {
                        skip_ws(&c);
                        if (c.p >= c.end || *c.p != '"')
                                return -EINVAL;
                        const char *key = c.p + 1;
                        if (!skip_string(&c))
                                return -EINVAL;
                        size_t key_len = (size_t) (c.p - 1 - key);
                        skip_ws(&c);
                        if (c.p >= c.end || *c.p != ':')
                                return -EINVAL;
                        c.p++;
                        skip_ws(&c);
                        const char *v = c.p;
                        /* A key written with escapes is not matched: the
                         * caller then parses the whole body. */
                        if (key_is(key, key_len, "items") && v < c.end && *v == '[') {
                                if (s->has_items)
                                        return -EINVAL;         /* twice: jansson keeps the last */
                                s->has_items = true;
                                int r = scan_items(&c, body, s);
                                if (r < 0)
                                        return r;
                        } else {
                                if (!skip_value(&c))
                                        return -EINVAL;
                                if (key_is(key, key_len, "metadata")) {
                                        if (s->metadata.len)
                                                return -EINVAL;
                                        s->metadata = (struct kube_list_range) {(size_t) (v - body),
                                                                                (size_t) (c.p - v)};
                                }
                        }
                        skip_ws(&c);
                        if (c.p < c.end && *c.p == ',') {
                                c.p++;
                                continue;
                        }
                        if (c.p < c.end && *c.p == '}') {
                                c.p++;
                                break;
                        }
                        return -EINVAL;
                }
        }
        skip_ws(&c);
        return c.p == c.end ? 0 : -EINVAL;
}

int kube_list_scan(const char *body, size_t len, struct kube_list_scan *ret) {
        *ret = (struct kube_list_scan) {{0, 0}, NULL, 0, false};
        int r = body ? scan(body, len, ret) : -EINVAL;
        if (r < 0)
                kube_list_scan_done(ret);
        return r;
}

void kube_list_scan_done(struct kube_list_scan *s) {
        free(s->items);
        *s = (struct kube_list_scan) {{0, 0}, NULL, 0, false};
}
