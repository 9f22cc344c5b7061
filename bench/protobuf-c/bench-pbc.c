/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The same EndpointSlice list read two ways, to the same JSON trees the
 * decoders take: with protobuf-c (its generated unpacker from slice.proto,
 * each item unpacked alone, then its structs walked into the tree) and with
 * kproxy's reader (kube/proto.c: the wire walked once into the tree). CPU
 * of the one thread, best of REPEAT; the trees are compared once, so both
 * paths do the same work. See README.md.
 *
 * usage: bench-pbc SLICES_LIST_FILE REPEAT
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/pb-wire.h"
#include "kube/proto.h"
#include "slice.pb-c.h"

static double cpu_now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void str(json_t *o, const char *k, const char *v, int keep_zero) {
        if (v && (keep_zero || *v))
                json_object_set_new(o, k, json_string(v));
}

static json_t *map(Entry **e, size_t n) {
        json_t *m = json_object();
        for (size_t i = 0; i < n; i++)
                json_object_set_new(m, e[i]->key ? e[i]->key : "", json_string(e[i]->value ? e[i]->value : ""));
        return m;
}

/* pb-json.c's rules for the same fields, by hand, from protobuf-c's structs. */
static json_t *slice_tree(const EndpointSlice *s) {
        json_t *o = json_object();
        if (s->metadata) {
                json_t *md = json_object();
                str(md, "name", s->metadata->name, 0);
                str(md, "namespace", s->metadata->namespace_, 0);
                str(md, "uid", s->metadata->uid, 0);
                str(md, "resourceVersion", s->metadata->resourceversion, 0);
                if (s->metadata->n_labels)
                        json_object_set_new(md, "labels", map(s->metadata->labels, s->metadata->n_labels));
                if (s->metadata->n_annotations)
                        json_object_set_new(md, "annotations",
                                            map(s->metadata->annotations, s->metadata->n_annotations));
                json_object_set_new(o, "metadata", md);
        }
        if (s->n_endpoints) {
                json_t *eps = json_array();
                for (size_t i = 0; i < s->n_endpoints; i++) {
                        const Endpoint *e = s->endpoints[i];
                        json_t *ep = json_object(), *a = json_array();
                        for (size_t j = 0; j < e->n_addresses; j++)
                                json_array_append_new(a, json_string(e->addresses[j]));
                        json_object_set_new(ep, "addresses", a);
                        if (e->conditions) {
                                json_t *c = json_object();
                                if (e->conditions->has_ready)
                                        json_object_set_new(c, "ready", json_boolean(e->conditions->ready));
                                if (e->conditions->has_serving)
                                        json_object_set_new(c, "serving", json_boolean(e->conditions->serving));
                                if (e->conditions->has_terminating)
                                        json_object_set_new(c, "terminating", json_boolean(e->conditions->terminating));
                                json_object_set_new(ep, "conditions", c);
                        }
                        str(ep, "hostname", e->hostname, 1);
                        str(ep, "nodeName", e->nodename, 1);
                        str(ep, "zone", e->zone, 1);
                        json_array_append_new(eps, ep);
                }
                json_object_set_new(o, "endpoints", eps);
        }
        if (s->n_ports) {
                json_t *ps = json_array();
                for (size_t i = 0; i < s->n_ports; i++) {
                        json_t *p = json_object();
                        str(p, "name", s->ports[i]->name, 1);
                        str(p, "protocol", s->ports[i]->protocol, 1);
                        if (s->ports[i]->has_port)
                                json_object_set_new(p, "port", json_integer(s->ports[i]->port));
                        json_array_append_new(ps, p);
                }
                json_object_set_new(o, "ports", ps);
        }
        str(o, "addressType", s->addresstype, 1);
        return o;
}

struct acc {
        size_t n;
        json_t *first;
};

static void on_item(void *u, const json_t *item) {
        struct acc *a = u;
        if (!a->n++)
                a->first = json_deep_copy(item);
}

/* protobuf-c: the envelope and the list's items by kproxy's wire reader
 * (as a one-item-at-a-time reader must), each item unpacked by protobuf-c. */
static size_t with_pbc(const uint8_t *body, size_t len, int tree, json_t **first) {
        Unknown *u = unknown__unpack(NULL, len - 4, body + 4);
        struct pb_reader r = pb_reader_of(u->raw.data, u->raw.len);
        struct pb_field f;
        const char *why;
        size_t n = 0;

        while (pb_next(&r, &f, &why) > 0) {
                if (f.number != 2)
                        continue;
                EndpointSlice *s = endpoint_slice__unpack(NULL, f.len, f.data);
                if (!s)
                        exit(1);
                if (tree) {
                        json_t *o = slice_tree(s);
                        if (first && !n)
                                *first = json_incref(o);
                        json_decref(o);
                }
                endpoint_slice__free_unpacked(s, NULL);
                n++;
        }
        unknown__free_unpacked(u, NULL);
        return n;
}

int main(int argc, char **argv) {
        if (argc != 3)
                return 2;
        FILE *fp = fopen(argv[1], "rb");
        fseek(fp, 0, SEEK_END);
        size_t len = (size_t) ftell(fp);
        fseek(fp, 0, SEEK_SET);
        uint8_t *body = malloc(len);
        if (fread(body, 1, len, fp) != len)
                return 1;
        fclose(fp);
        int repeat = atoi(argv[2]);
        double best[3] = {1e9, 1e9, 1e9};
        size_t n = 0;
        char why[160];

        /* The same trees, or the comparison means nothing. */
        json_t *a = NULL, *md = NULL;
        struct acc acc = {0};
        with_pbc(body, len, 1, &a);
        kube_proto_list(body, len, &md, on_item, &acc, why, sizeof why);
        json_decref(md);
        if (!json_equal(a, acc.first)) {
                fprintf(stderr, "the two trees differ:\n%s\n%s\n", json_dumps(a, JSON_SORT_KEYS),
                        json_dumps(acc.first, JSON_SORT_KEYS));
                return 1;
        }
        json_decref(a);
        json_decref(acc.first);

        for (int i = 0; i < repeat; i++) {
                double c0 = cpu_now();
                n = with_pbc(body, len, 0, NULL);
                double c1 = cpu_now();
                with_pbc(body, len, 1, NULL);
                double c2 = cpu_now();
                struct acc x = {0};
                kube_proto_list(body, len, &md, on_item, &x, why, sizeof why);
                json_decref(md);
                json_decref(x.first);
                double c3 = cpu_now();
                best[0] = c1 - c0 < best[0] ? c1 - c0 : best[0];
                best[1] = c2 - c1 < best[1] ? c2 - c1 : best[1];
                best[2] = c3 - c2 < best[2] ? c3 - c2 : best[2];
        }
        printf("items=%zu protobuf_c_unpack_us=%.2f protobuf_c_to_tree_us=%.2f kproxy_to_tree_us=%.2f\n", n,
               best[0] * 1e6 / (double) n, best[1] * 1e6 / (double) n, best[2] * 1e6 / (double) n);
        free(body);
        return 0;
}
