/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the caps: a reader that expands aliases pays for every
 * copy, so the cost of an alias is known before the copy is made. Each
 * open collection adds up the nodes and scalar bytes under it (an alias
 * inside counting as the whole value it stands for); when an anchored
 * collection ends, its anchor keeps that total. An alias then costs its
 * anchor's total, checked against the stream's allowance first: a billion
 * laughs fails on the alias that would pass the cap, after a few thousand
 * nodes of work. Nesting is capped on the way in, so a deep document stops
 * at the cap's depth, whatever follows; libyaml's scanner also slows down
 * with the depth of flow collections (it looks at every open level for
 * each token), which the cap bounds too.
 *
 * go-yaml, which upstream reads YAML with, bounds aliases differently: by
 * the share of its decoded nodes that came through aliases (99% for small
 * documents, down to 10% for large ones), and depth at 10000. Its copies
 * share their strings; here each copy is a copy, so bytes are capped too.
 */
#include "util/yamlcap.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "util/alloc.h"
#include "util/hmap.h"

struct anchor {
        uint64_t nodes, bytes;  /* what an alias to it adds */
        bool open;              /* its collection has not ended */
        char name[];
};

struct frame {
        uint64_t nodes, bytes;  /* the collection and everything under it so far */
        struct anchor *anchor;  /* NULL: not anchored */
};

struct yamlcap {
        struct frame stack[YAMLCAP_MAX_DEPTH];
        size_t depth;
        struct hmap by_name;    /* name -> the latest anchor of that name */
        struct anchor **anchors; /* every anchor of the document, owned */
        size_t n_anchors, cap_anchors;
        uint64_t alias_nodes, alias_bytes;
        char problem[160];
};

struct yamlcap *yamlcap_new(void) {
        struct yamlcap *c = xcalloc(1, sizeof *c);

        c->by_name = (struct hmap) HMAP_INIT_KEY_ARRAY(struct anchor, name);
        return c;
}

/* Anchors belong to one document: the next may define the same names. */
static void forget_anchors(struct yamlcap *c) {
        for (size_t i = 0; i < c->n_anchors; i++)
                free(c->anchors[i]);
        free(c->anchors);
        c->anchors = NULL;
        c->n_anchors = c->cap_anchors = 0;
        hmap_done(&c->by_name);
        c->depth = 0;
}

struct yamlcap *yamlcap_free(struct yamlcap *c) {
        if (!c)
                return NULL;
        forget_anchors(c);
        free(c);
        return NULL;
}

const char *yamlcap_problem(const struct yamlcap *c) {
        return c->problem;
}

static int fail(struct yamlcap *c, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct yamlcap *c, int r, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(c->problem, sizeof c->problem, fmt, ap);
        va_end(ap);
        return r;
}

/* A new anchor (name, sizes); a later one of the same name hides it. */
static int define(struct yamlcap *c, const unsigned char *name, uint64_t nodes, uint64_t bytes, bool open,
                  struct anchor **ret) {
        size_t len = strlen((const char *) name);
        struct anchor *a;

        if (c->n_anchors == c->cap_anchors) {
                size_t cap = c->cap_anchors ? 2 * c->cap_anchors : 16;
                struct anchor **v = realloc(c->anchors, cap * sizeof *v);
                if (!v)
                        return fail(c, -ENOMEM, "out of memory");
                c->anchors = v;
                c->cap_anchors = cap;
        }
        a = malloc(sizeof *a + len + 1);
        if (!a)
                return fail(c, -ENOMEM, "out of memory");
        *a = (struct anchor) {nodes, bytes, open};
        memcpy(a->name, name, len + 1);
        c->anchors[c->n_anchors++] = a;
        hmap_put(&c->by_name, a->name, a);
        if (ret)
                *ret = a;
        return 0;
}

/* A finished value of that size goes into the open collection. */
static void add(struct yamlcap *c, uint64_t nodes, uint64_t bytes) {
        if (c->depth == 0)
                return;
        c->stack[c->depth - 1].nodes += nodes;
        c->stack[c->depth - 1].bytes += bytes;
}

static int alias(struct yamlcap *c, const unsigned char *name) {
        const struct anchor *a = hmap_get(&c->by_name, (const char *) name);

        if (!a)
                return fail(c, -EINVAL, "alias *%.64s names no anchor before it", (const char *) name);
        if (a->open)
                return fail(c, -ELOOP, "alias *%.64s is inside the value of its own anchor", (const char *) name);
        /* Checked before adding: the totals cannot overflow, as an alias
         * that would pass the cap is never counted. */
        if (a->nodes > YAMLCAP_MAX_ALIAS_NODES - c->alias_nodes)
                return fail(c, -E2BIG, "aliases expand to more than %u nodes (the YAML alias expansion cap)",
                            (unsigned) YAMLCAP_MAX_ALIAS_NODES);
        if (a->bytes > YAMLCAP_MAX_ALIAS_BYTES - c->alias_bytes)
                return fail(c, -E2BIG, "aliases expand to more than %u MiB of text (the YAML alias expansion cap)",
                            (unsigned) (YAMLCAP_MAX_ALIAS_BYTES >> 20));
        c->alias_nodes += a->nodes;
        c->alias_bytes += a->bytes;
        add(c, a->nodes, a->bytes);
        return 0;
}

static int push(struct yamlcap *c, const unsigned char *anchor) {
        struct anchor *a = NULL;
        int r;

        if (c->depth == YAMLCAP_MAX_DEPTH)
                return fail(c, -E2BIG, "collections nest deeper than %d levels (the YAML depth cap)",
                            YAMLCAP_MAX_DEPTH);
        if (anchor) {
                r = define(c, anchor, 0, 0, true, &a);
                if (r < 0)
                        return r;
        }
        c->stack[c->depth++] = (struct frame) {1, 0, a};
        return 0;
}

static void pop(struct yamlcap *c) {
        struct frame f;

        if (c->depth == 0)
                return;         /* libyaml never ends more than it started */
        f = c->stack[--c->depth];
        if (f.anchor) {
                f.anchor->nodes = f.nodes;
                f.anchor->bytes = f.bytes;
                f.anchor->open = false;
        }
        add(c, f.nodes, f.bytes);
}

int yamlcap_event(struct yamlcap *c, const struct yaml_event_s *ev) {
        switch (ev->type) {
        case YAML_DOCUMENT_START_EVENT:
        case YAML_DOCUMENT_END_EVENT:
                forget_anchors(c);
                return 0;
        case YAML_MAPPING_START_EVENT:
                return push(c, ev->data.mapping_start.anchor);
        case YAML_SEQUENCE_START_EVENT:
                return push(c, ev->data.sequence_start.anchor);
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
                pop(c);
                return 0;
        case YAML_SCALAR_EVENT:
                add(c, 1, ev->data.scalar.length);
                return ev->data.scalar.anchor ?
                               define(c, ev->data.scalar.anchor, 1, ev->data.scalar.length, false, NULL) :
                               0;
        case YAML_ALIAS_EVENT:
                return alias(c, ev->data.alias.anchor);
        default:
                return 0;
        }
}
