/* SPDX-License-Identifier: Apache-2.0 */
#include "kube/load.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "kube/list-scan.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/hmap.h"
#include "util/yamlcap.h"

/* --- YAML scalars, resolved as sigs.k8s.io/yaml (YAML 1.1 core) does --- */

static bool is_one_of(const char *s, const char *const *words) {
        for (; *words; words++)
                if (strcmp(s, *words) == 0)
                        return true;
        return false;
}

static json_t *resolve_plain(const char *s, size_t len) {
        static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
        static const char *const trues[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", NULL};
        static const char *const falses[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", NULL};

        if (strlen(s) != len)
                return json_stringn(s, len);    /* embedded NUL: keep as text */
        if (is_one_of(s, nulls))
                return json_null();
        if (is_one_of(s, trues))
                return json_true();
        if (is_one_of(s, falses))
                return json_false();

        const char *p = s;
        if (*p == '+' || *p == '-')
                p++;
        if (*p && (p[0] != '0' || p[1] == '\0' || p[1] == 'x' || p[1] == 'o')) {
                int base = 10;
                const char *digits = p;
                if (p[0] == '0' && p[1] == 'x')
                        base = 16, digits = p + 2;
                else if (p[0] == '0' && p[1] == 'o')
                        base = 8, digits = p + 2;
                if (*digits) {
                        char *end;
                        errno = 0;
                        long long v = strtoll(digits, &end, base);
                        if (*end == '\0' && errno == 0 && isalnum((unsigned char) *digits))
                                return json_integer(s[0] == '-' ? -v : v);
                }
        }
        /* Floats: digits with a dot or exponent, and the special values. */
        if (strcmp(s, ".inf") == 0 || strcmp(s, "+.inf") == 0 || strcmp(s, ".Inf") == 0)
                return json_string(s);  /* JSON has no infinities; leave as text */
        bool digit = false, dot = false, exp = false;
        p = s;
        if (*p == '+' || *p == '-')
                p++;
        for (; *p; p++) {
                if (isdigit((unsigned char) *p))
                        digit = true;
                else if (*p == '.' && !dot && !exp)
                        dot = true;
                else if ((*p == 'e' || *p == 'E') && digit && !exp) {
                        exp = true;
                        if (p[1] == '+' || p[1] == '-')
                                p++;
                } else
                        return json_stringn(s, len);
        }
        if (digit && (dot || exp))
                return json_real(strtod(s, NULL));
        return json_stringn(s, len);
}

/* --- YAML events to jansson trees --- */

struct frame {
        json_t *node;
        char *key;              /* pending mapping key, owned */
};

struct anchor {
        json_t *value;
        char name[];
};

/* Depth and alias expansion are capped (util/yamlcap.h) before an event
 * gets here, so the stack never overflows and an alias is copied only
 * when the copy is within the cap. */
struct yaml_builder {
        struct frame stack[YAMLCAP_MAX_DEPTH];
        size_t depth;
        json_t *root;
        struct hmap anchors;    /* name -> struct anchor, the latest of that name */
};

static void anchor_free(struct anchor *a) {
        if (a) {
                json_decref(a->value);
                free(a);
        }
}

static void builder_reset(struct yaml_builder *b) {
        const char *k;
        void *v;

        for (size_t i = 0; i < b->depth; i++) {
                json_decref(b->stack[i].node);
                free(b->stack[i].key);
        }
        b->depth = 0;
        json_decref(b->root);
        b->root = NULL;
        for (size_t i = 0; hmap_next(&b->anchors, &i, &k, &v);)
                anchor_free(v);
        hmap_done(&b->anchors);
}

/* By name, in a map: a document may hold many anchors and aliases, and a
 * scan of every anchor per alias would be quadratic. */
static int remember_anchor(struct yaml_builder *b, const char *name, json_t *v) {
        size_t len = strlen(name);
        struct anchor *a = malloc(sizeof *a + len + 1);

        if (!a)
                return -ENOMEM;
        memcpy(a->name, name, len + 1);
        a->value = json_incref(v);
        anchor_free(hmap_put(&b->anchors, a->name, a));
        return 0;
}

/* Adds a finished value to the container on top of the stack (or makes it
 * the root). Steals the reference. */
static int builder_add(struct yaml_builder *b, json_t *v, const char **problem) {
        if (!v)
                return -ENOMEM;
        if (b->depth == 0) {
                b->root = v;
                return 0;
        }
        struct frame *f = &b->stack[b->depth - 1];
        if (json_is_array(f->node))
                return json_array_append_new(f->node, v) < 0 ? -ENOMEM : 0;
        if (!f->key) {
                if (!json_is_string(v)) {
                        /* Kubernetes objects only have string keys; a number or
                         * bool key is kept as its text, like sigs.k8s.io/yaml. */
                        char tmp[64];
                        if (json_is_integer(v))
                                snprintf(tmp, sizeof tmp, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                        else if (json_is_true(v) || json_is_false(v))
                                snprintf(tmp, sizeof tmp, "%s", json_is_true(v) ? "true" : "false");
                        else if (json_is_null(v))
                                snprintf(tmp, sizeof tmp, "null");
                        else {
                                json_decref(v);
                                *problem = "mapping key must be a scalar";
                                return -EINVAL;
                        }
                        json_decref(v);
                        f->key = strdup(tmp);
                } else {
                        f->key = strdup(json_string_value(v));
                        json_decref(v);
                }
                return f->key ? 0 : -ENOMEM;
        }
        if (json_object_get(f->node, f->key)) {
                json_decref(v);
                *problem = "duplicate mapping key";
                return -EINVAL;
        }
        int r = json_object_set_new(f->node, f->key, v) < 0 ? -ENOMEM : 0;
        free(f->key);
        f->key = NULL;
        return r;
}

static int builder_push(struct yaml_builder *b, json_t *container, const char *anchor, const char **problem) {
        if (!container)
                return -ENOMEM;
        if (b->depth == YAMLCAP_MAX_DEPTH) {   /* yamlcap stopped it already */
                json_decref(container);
                *problem = "nesting too deep";
                return -EINVAL;
        }
        if (anchor && remember_anchor(b, anchor, container) < 0) {
                json_decref(container);
                return -ENOMEM;
        }
        b->stack[b->depth++] = (struct frame) {container, NULL};
        return 0;
}

static int builder_pop(struct yaml_builder *b, const char **problem) {
        struct frame f = b->stack[--b->depth];
        if (f.key) {
                free(f.key);
                json_decref(f.node);
                *problem = "mapping key without a value";
                return -EINVAL;
        }
        return builder_add(b, f.node, problem);
}

static int handle_event(struct yaml_builder *b, const yaml_event_t *ev, const char **problem) {
        switch (ev->type) {
        case YAML_MAPPING_START_EVENT:
                return builder_push(b, json_object(), (const char *) ev->data.mapping_start.anchor, problem);
        case YAML_SEQUENCE_START_EVENT:
                return builder_push(b, json_array(), (const char *) ev->data.sequence_start.anchor, problem);
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
                return builder_pop(b, problem);
        case YAML_SCALAR_EVENT: {
                const char *v = (const char *) ev->data.scalar.value;
                size_t len = ev->data.scalar.length;
                const char *tag = (const char *) ev->data.scalar.tag;
                json_t *j;
                if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
                    (tag && strcmp(tag, YAML_STR_TAG) == 0))
                        j = json_stringn(v, len);
                else
                        j = resolve_plain(v, len);
                if (j && ev->data.scalar.anchor &&
                    remember_anchor(b, (const char *) ev->data.scalar.anchor, j) < 0) {
                        json_decref(j);
                        return -ENOMEM;
                }
                return builder_add(b, j, problem);
        }
        case YAML_ALIAS_EVENT: {
                const struct anchor *a = hmap_get(&b->anchors, (const char *) ev->data.alias.anchor);
                if (a)
                        return builder_add(b, json_deep_copy(a->value), problem);
                *problem = "unknown alias";
                return -EINVAL;
        }
        default:
                return 0;
        }
}

int kube_yaml_parse(const char *name, const char *data, size_t len, kube_object_fn fn, void *userdata,
                    char err[KUBE_LOAD_ERRLEN]) {
        _cleanup_(yamlcap_freep) struct yamlcap *cap = yamlcap_new();
        yaml_parser_t parser;
        struct yaml_builder b = {.anchors = HMAP_INIT_KEY_ARRAY(struct anchor, name)};
        int r = 0;

        if (!cap)
                return -ENOMEM;
        if (!yaml_parser_initialize(&parser))
                return -ENOMEM;
        yaml_parser_set_input_string(&parser, (const unsigned char *) data, len);
        for (;;) {
                yaml_event_t ev;
                const char *problem = NULL;

                if (!yaml_parser_parse(&parser, &ev)) {
                        snprintf(err, KUBE_LOAD_ERRLEN, "%s:%zu:%zu: %s", name, parser.problem_mark.line + 1,
                                 parser.problem_mark.column + 1, parser.problem ? parser.problem : "YAML error");
                        r = -EINVAL;
                        break;
                }
                size_t line = ev.start_mark.line + 1, col = ev.start_mark.column + 1;
                yaml_event_type_t type = ev.type;
                r = yamlcap_event(cap, &ev);
                if (r < 0) {
                        snprintf(err, KUBE_LOAD_ERRLEN, "%s:%zu:%zu: %s", name, line, col, yamlcap_problem(cap));
                        r = r == -ENOMEM ? r : -EINVAL;
                } else if (type == YAML_DOCUMENT_START_EVENT) {
                        builder_reset(&b);
                } else if (type == YAML_DOCUMENT_END_EVENT) {
                        if (b.root)
                                r = fn(userdata, b.root);
                        builder_reset(&b);
                } else {
                        r = handle_event(&b, &ev, &problem);
                        if (r == -EINVAL)
                                snprintf(err, KUBE_LOAD_ERRLEN, "%s:%zu:%zu: %s", name, line, col, problem);
                }
                yaml_event_delete(&ev);
                if (r < 0 || type == YAML_STREAM_END_EVENT)
                        break;
        }
        builder_reset(&b);
        yaml_parser_delete(&parser);
        return r;
}

/* --- Lists and dispatch --- */

struct dispatch {
        kube_object_fn fn;
        void *userdata;
        const char *name;
        char *err;
};

static int dispatch_root(void *userdata, const json_t *root) {
        struct dispatch *d = userdata;
        const char *kind;
        const json_t *items;

        if (json_is_null(root))
                return 0;       /* an empty document between two "---" */
        if (!json_is_object(root)) {
                snprintf(d->err, KUBE_LOAD_ERRLEN, "%s: a document is not an object (a mapping)", d->name);
                return -EINVAL;
        }
        kind = json_string_value(json_object_get(root, "kind"));
        items = json_object_get(root, "items");
        if (kind && strlen(kind) >= 4 && strcmp(kind + strlen(kind) - 4, "List") == 0) {
                if (items && !json_is_null(items) && !json_is_array(items)) {
                        snprintf(d->err, KUBE_LOAD_ERRLEN, "%s: %s.items is not a list", d->name, kind);
                        return -EINVAL;
                }
                size_t i;
                const json_t *item;
                json_array_foreach((json_t *) items, i, item) {
                        int r = dispatch_root(d, item);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        return d->fn(d->userdata, root);
}

/* Neither JSON nor YAML text holds a NUL byte: a file that does is not
 * one (a binary, /dev/zero), and saying so at once spares parsing it. */
static int check_text(const char *name, const char *data, size_t len, size_t offset, char err[KUBE_LOAD_ERRLEN]) {
        const char *nul = memchr(data, '\0', len);

        if (!nul)
                return 0;
        snprintf(err, KUBE_LOAD_ERRLEN, "%s: a NUL byte at offset %zu: not JSON or YAML text", name,
                 offset + (size_t) (nul - data));
        return -EINVAL;
}

/* A parse error at offset off of data (where jansson's line and column
 * count from), as "name:line:column: text" of the whole buffer. */
static void json_error_at(struct dispatch *d, const char *data, size_t off, const json_error_t *je) {
        int line = je->line, column = je->column;
        int before = 0;
        for (size_t i = 0; i < off; i++)
                before += data[i] == '\n';
        if (line == 1) {
                const char *nl = off ? memrchr(data, '\n', off) : NULL;
                column += (int) (off - (nl ? (size_t) (nl - data) + 1 : 0));
        }
        snprintf(d->err, KUBE_LOAD_ERRLEN, "%s:%d:%d: %s", d->name, line + before, column, je->text);
}

/* A JSON List an item at a time (kube/list-scan.h): the document tree of
 * a 10k-service dump took 150 MB, one item takes a few kilobytes. The
 * top level is parsed with its items left out, so its kind decides as in
 * dispatch_root(). Returns 1 when the text is not such a list (the caller
 * parses it whole), else 0 or a negative errno. */
static int load_json_list(struct dispatch *d, const char *data, size_t len) {
        struct kube_list_scan scan;
        struct buf top = BUF_INIT;
        json_error_t je;
        int r = 1;

        if (kube_list_scan(data, len, &scan) < 0)
                return 1;
        if (!scan.has_items || scan.n_items == 0)
                goto out;
        /* The array's brackets: around the first and last items. */
        size_t open = scan.items[0].off, close = scan.items[scan.n_items - 1].off + scan.items[scan.n_items - 1].len;
        while (open > 0 && data[open - 1] != '[')
                open--;
        while (close < len && data[close] != ']')
                close++;
        if (open == 0 || close >= len)
                goto out;
        buf_put(&top, data, open);
        buf_put(&top, data + close, len - close);
        json_t *root = json_loadb(top.data, top.len, JSON_REJECT_DUPLICATES, &je);
        const char *kind = json_string_value(json_object_get(root, "kind"));
        bool list = kind && strlen(kind) >= 4 && strcmp(kind + strlen(kind) - 4, "List") == 0 &&
                    json_is_array(json_object_get(root, "items"));
        json_decref(root);
        if (!list)
                goto out;       /* not a list, or a top level jansson refuses: the whole parse says why */
        r = 0;
        for (size_t i = 0; i < scan.n_items && r == 0; i++) {
                json_t *item = json_loadb(data + scan.items[i].off, scan.items[i].len, JSON_REJECT_DUPLICATES, &je);
                if (!item) {
                        json_error_at(d, data, scan.items[i].off, &je);
                        r = -EINVAL;
                        break;
                }
                r = dispatch_root(d, item);
                json_decref(item);
        }
out:
        buf_done(&top);
        kube_list_scan_done(&scan);
        return r;
}

int kube_load_buffer(const char *name, const char *data, size_t len, kube_object_fn fn, void *userdata,
                     char err[KUBE_LOAD_ERRLEN]) {
        struct dispatch d = {fn, userdata, name, err};
        size_t i = 0;

        err[0] = '\0';
        if (check_text(name, data, len, 0, err) < 0)
                return -EINVAL;
        while (i < len && isspace((unsigned char) data[i]))
                i++;
        if (i < len && (data[i] == '{' || data[i] == '[')) {
                json_error_t je;
                int r = data[i] == '{' ? load_json_list(&d, data, len) : 1;
                if (r <= 0)
                        return r;
                json_t *root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
                if (!root) {
                        snprintf(err, KUBE_LOAD_ERRLEN, "%s:%d:%d: %s", name, je.line, je.column, je.text);
                        return -EINVAL;
                }
                r = dispatch_root(&d, root);
                json_decref(root);
                return r;
        }
        return kube_yaml_parse(name, data, len, dispatch_root, &d, err);
}

int kube_load_file(const char *path, kube_object_fn fn, void *userdata, char err[KUBE_LOAD_ERRLEN]) {
        struct buf b = BUF_INIT;
        FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
        const char *name = strcmp(path, "-") == 0 ? "<stdin>" : path;
        int r;

        if (!f) {
                r = -errno;
                snprintf(err, KUBE_LOAD_ERRLEN, "%s: %s", path, strerror(errno));
                return r;
        }
        /* Checked as it is read: an endless or binary input fails at
         * once, not after filling memory. */
        for (r = 0; r == 0;) {
                buf_reserve(&b, 65536);
                size_t n = fread(b.data + b.len, 1, b.cap - b.len - 1, f);
                r = check_text(name, b.data + b.len, n, b.len, err);
                b.len += n;
                b.data[b.len] = '\0';
                if (n == 0)
                        break;
                if (r == 0 && b.len > KUBE_LOAD_MAX_BYTES) {
                        snprintf(err, KUBE_LOAD_ERRLEN, "%s: larger than %u MiB (the state file size cap)", name,
                                 KUBE_LOAD_MAX_BYTES >> 20);
                        r = -EFBIG;
                }
        }
        if (r == 0 && ferror(f)) {
                r = -EIO;
                snprintf(err, KUBE_LOAD_ERRLEN, "%s: read error", name);
        } else if (r == 0) {
                r = kube_load_buffer(name, b.data, b.len, fn, userdata, err);
        }
        if (f != stdin)
                fclose(f);
        buf_done(&b);
        return r;
}
