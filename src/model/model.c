/* SPDX-License-Identifier: Apache-2.0 */
#include "model/model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/intern.h"

struct model {
        struct hmap services;   /* key -> struct svc */
        struct hmap slices;     /* key -> struct slice */
        struct hmap by_service; /* service key -> its slices (several values a key: hmap_add()) */
        struct node *node;
};

static const char *const l4_proto_table[_L4_MAX] = {
        [L4_TCP] = "TCP",
        [L4_UDP] = "UDP",
        [L4_SCTP] = "SCTP",
};
static const char *const l4_proto_lower_table[_L4_MAX] = {
        [L4_TCP] = "tcp",
        [L4_UDP] = "udp",
        [L4_SCTP] = "sctp",
};
static const char *const svc_type_table[_SVC_TYPE_MAX] = {
        [SVC_TYPE_CLUSTER_IP] = "ClusterIP",
        [SVC_TYPE_NODE_PORT] = "NodePort",
        [SVC_TYPE_LOAD_BALANCER] = "LoadBalancer",
        [SVC_TYPE_EXTERNAL_NAME] = "ExternalName",
};
static const char *const traffic_policy_table[_TRAFFIC_POLICY_MAX] = {
        [TRAFFIC_POLICY_CLUSTER] = "Cluster",
        [TRAFFIC_POLICY_LOCAL] = "Local",
};

static int table_lookup(const char *const *table, size_t n, const char *s) {
        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (table[i] && strcmp(table[i], s) == 0)
                        return (int) i;
        return -EINVAL;
}

const char *l4_proto_to_string(enum l4_proto p) {
        return p >= 0 && p < _L4_MAX ? l4_proto_table[p] : NULL;
}
const char *l4_proto_to_lower(enum l4_proto p) {
        return p >= 0 && p < _L4_MAX ? l4_proto_lower_table[p] : NULL;
}
enum l4_proto l4_proto_from_string(const char *s) {
        return table_lookup(l4_proto_table, _L4_MAX, s);
}
const char *svc_type_to_string(enum svc_type t) {
        return t >= 0 && t < _SVC_TYPE_MAX ? svc_type_table[t] : NULL;
}
enum svc_type svc_type_from_string(const char *s) {
        return table_lookup(svc_type_table, _SVC_TYPE_MAX, s);
}
const char *traffic_policy_to_string(enum traffic_policy p) {
        return p >= 0 && p < _TRAFFIC_POLICY_MAX ? traffic_policy_table[p] : NULL;
}
enum traffic_policy traffic_policy_from_string(const char *s) {
        return table_lookup(traffic_policy_table, _TRAFFIC_POLICY_MAX, s);
}

_Static_assert(sizeof(struct slice_endpoint) == 8, "slice_endpoint grew");

static void strv_free(char **v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

void endpoint_hints_done(struct endpoint_hints *h) {
        strv_free(h->zones, h->n_zones);
        strv_free(h->nodes, h->n_nodes);
        *h = (struct endpoint_hints) {0};
}

struct svc *svc_free(struct svc *s) {
        if (!s)
                return NULL;
        if (!s->packed) {
                for (size_t i = 0; i < s->n_ports; i++)
                        free(s->ports[i].name);
                free(s->ports);
                free(s->external_ips);
                free(s->lb_ips);
                free(s->source_ranges);
                free(s->refused);
                free(s->key);
        }
        free(s);
        return NULL;
}

const struct inet_addr *svc_cluster_ip(const struct svc *s, uint8_t family) {
        for (size_t i = 0; i < s->n_cluster_ips; i++)
                if (s->cluster_ips[i].family == family)
                        return &s->cluster_ips[i];
        return NULL;
}

struct slice *slice_free(struct slice *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_endpoints; i++)
                intern_release(s->endpoints[i].node);
        for (size_t i = 0; i < s->n_hints; i++)
                endpoint_hints_done(&s->hints[i]);
        free(s->hints);
        for (size_t i = 0; i < s->n_zones; i++)
                intern_release(s->zones[i]);
        free(s->zones);
        if (!s->packed) {
                for (size_t i = 0; i < s->n_ports; i++)
                        free(s->ports[i].name);
                free(s->ports);
                free(s->endpoints);
                free(s->addrs);
                free(s->service_key);
                free(s->key);
        }
        free(s);
        return NULL;
}

/* Packing: pieces go one after the other into a block, each at an
 * alignment its type needs. */
struct packer {
        char *at;
};

static void *pack_put(struct packer *k, const void *src, size_t len, size_t align) {
        k->at = (char *) (((uintptr_t) k->at + align - 1) & ~(uintptr_t) (align - 1));
        void *p = k->at;
        if (len > 0)
                memcpy(p, src, len);
        k->at += len;
        return p;
}

static char *pack_str(struct packer *k, const char *s) {
        return pack_put(k, s, strlen(s) + 1, 1);
}

/* A block of room bytes that starts with a copy of obj (size bytes); k
 * packs what follows. Aborts on OOM. */
static void *pack_begin(struct packer *k, const void *obj, size_t size, size_t room) {
        char *p = malloc(room);
        if (!p)
                abort();
        memcpy(p, obj, size);
        k->at = p + size;
        return p;
}

/* Bytes for len bytes at align, with the worst padding. */
static size_t pack_room(size_t len, size_t align) {
        return len + align - 1;
}

struct svc *svc_pack_copy(const struct svc *s) {
        size_t room = sizeof *s + pack_room(s->n_ports * sizeof *s->ports, _Alignof(struct svc_port)) +
                      s->n_external_ips * sizeof *s->external_ips + s->n_lb_ips * sizeof *s->lb_ips +
                      s->n_source_ranges * sizeof *s->source_ranges +
                      pack_room(s->n_refused * sizeof *s->refused, _Alignof(struct svc_refusal)) +
                      strlen(s->key) + 1;
        for (size_t i = 0; i < s->n_ports; i++)
                room += strlen(s->ports[i].name) + 1;
        struct packer k;
        struct svc *p = pack_begin(&k, s, sizeof *s, room);
        p->packed = true;
        p->ports = pack_put(&k, s->ports, s->n_ports * sizeof *s->ports, _Alignof(struct svc_port));
        p->external_ips = pack_put(&k, s->external_ips, s->n_external_ips * sizeof *s->external_ips, 1);
        p->lb_ips = pack_put(&k, s->lb_ips, s->n_lb_ips * sizeof *s->lb_ips, 1);
        p->source_ranges = pack_put(&k, s->source_ranges, s->n_source_ranges * sizeof *s->source_ranges, 1);
        p->refused = s->n_refused ? pack_put(&k, s->refused, s->n_refused * sizeof *s->refused,
                                             _Alignof(struct svc_refusal))
                                  : NULL;
        p->key = pack_str(&k, s->key);
        p->name = p->key + (s->name - s->key);
        for (size_t i = 0; i < s->n_ports; i++)
                p->ports[i].name = pack_str(&k, s->ports[i].name);
        return p;
}

struct svc *svc_pack(struct svc *s) {
        struct svc *p = svc_pack_copy(s);
        svc_free(s);
        return p;
}

struct slice *slice_pack(struct slice *s) {
        size_t room = sizeof *s + pack_room(s->n_ports * sizeof *s->ports, _Alignof(struct slice_port)) +
                      pack_room(s->n_endpoints * sizeof *s->endpoints, _Alignof(struct slice_endpoint)) +
                      s->n_endpoints * slice_addr_len(s) + strlen(s->key) + 1 + strlen(s->service_key) + 1;
        for (size_t i = 0; i < s->n_ports; i++)
                room += strlen(s->ports[i].name) + 1;
        struct packer k;
        struct slice *p = pack_begin(&k, s, sizeof *s, room);
        p->packed = true;
        p->ports = pack_put(&k, s->ports, s->n_ports * sizeof *s->ports, _Alignof(struct slice_port));
        p->endpoints = pack_put(&k, s->endpoints, s->n_endpoints * sizeof *s->endpoints,
                                _Alignof(struct slice_endpoint));
        p->addrs = pack_put(&k, s->addrs, s->n_endpoints * slice_addr_len(s), 1);
        p->key = pack_str(&k, s->key);
        p->service_key = pack_str(&k, s->service_key);
        for (size_t i = 0; i < s->n_ports; i++)
                p->ports[i].name = pack_str(&k, s->ports[i].name);
        /* The copy owns the node names' references, the hints and the
         * zones now. */
        s->n_endpoints = 0;
        s->hints = NULL;
        s->n_hints = 0;
        s->zones = NULL;
        s->n_zones = 0;
        slice_free(s);
        return p;
}

struct node *node_free(struct node *n) {
        if (!n)
                return NULL;
        free(n->name);
        free(n->zone);
        free(n->addrs);
        free(n->pod_cidrs);
        strv_free(n->labels, n->n_labels);
        free(n);
        return NULL;
}

struct model *model_new(void) {
        struct model *m = xcalloc(1, sizeof *m);
        /* Every object keeps its key: the maps keep only the object. */
        m->services = (struct hmap) HMAP_INIT_KEYED(struct svc, key);
        m->slices = (struct hmap) HMAP_INIT_KEYED(struct slice, key);
        m->by_service = (struct hmap) HMAP_INIT_KEYED(struct slice, service_key);
        return m;
}

struct model *model_free(struct model *m) {
        const char *k;
        void *v;

        if (!m)
                return NULL;
        for (size_t i = 0; hmap_next(&m->services, &i, &k, &v);)
                svc_free(v);
        for (size_t i = 0; hmap_next(&m->slices, &i, &k, &v);)
                slice_free(v);
        hmap_done(&m->services);
        hmap_done(&m->slices);
        hmap_done(&m->by_service);
        node_free(m->node);
        free(m);
        return NULL;
}

void model_service_upsert(struct model *m, struct svc *svc) {
        svc_free(hmap_put(&m->services, svc->key, svc));
}

int model_service_delete(struct model *m, const char *key) {
        struct svc *s = hmap_remove(&m->services, key);
        if (!s)
                return -ENOENT;
        svc_free(s);
        return 0;
}

void model_slice_upsert(struct model *m, struct slice *slice) {
        struct slice *old = hmap_get(&m->slices, slice->key);
        if (old)
                hmap_remove_value(&m->by_service, old->service_key, old);
        hmap_put(&m->slices, slice->key, slice);
        slice_free(old);
        hmap_add(&m->by_service, slice->service_key, slice);
}

int model_slice_delete(struct model *m, const char *key) {
        struct slice *s = hmap_remove(&m->slices, key);
        if (!s)
                return -ENOENT;
        hmap_remove_value(&m->by_service, s->service_key, s);
        slice_free(s);
        return 0;
}

void model_node_set(struct model *m, struct node *node) {
        node_free(m->node);
        m->node = node;
}

const struct svc *model_service_get(const struct model *m, const char *key) {
        return hmap_get(&m->services, key);
}

const struct slice *model_slice_get(const struct model *m, const char *key) {
        return hmap_get(&m->slices, key);
}

const struct node *model_node(const struct model *m) {
        return m->node;
}

size_t model_n_services(const struct model *m) {
        return m->services.len;
}

size_t model_n_slices(const struct model *m) {
        return m->slices.len;
}

static void each_key(const struct hmap *h, void (*each)(const char *key, void *ctx), void *ctx) {
        const char *k;
        for (size_t i = 0; hmap_next(h, &i, &k, NULL);)
                each(k, ctx);
}

void model_service_keys(const struct model *m, void (*each)(const char *key, void *ctx), void *ctx) {
        each_key(&m->services, each, ctx);
}

void model_slice_keys(const struct model *m, void (*each)(const char *key, void *ctx), void *ctx) {
        each_key(&m->slices, each, ctx);
}

static int cmp_slice(const void *a, const void *b) {
        return strcmp((*(const struct slice *const *) a)->key, (*(const struct slice *const *) b)->key);
}

/* A service and its key's first 8 bytes as a big-endian number: most
 * comparisons of a sort are decided by those without reading the key
 * (two pointers away, a cache miss each at 10k services). */
struct svc_ref {
        uint64_t prefix;
        const struct svc *svc;
};

static int cmp_svc_ref(const void *a, const void *b) {
        const struct svc_ref *x = a, *y = b;
        if (x->prefix != y->prefix)
                return x->prefix < y->prefix ? -1 : 1;
        return strcmp(x->svc->key, y->svc->key);
}

const struct svc **model_services_sorted(const struct model *m, size_t *ret_n) {
        size_t n = 0;
        void *v;

        *ret_n = 0;
        if (m->services.len == 0)
                return NULL;
        const struct svc **arr = malloc(m->services.len * sizeof *arr);
        struct svc_ref *refs = malloc(m->services.len * sizeof *refs);
        if (!arr || !refs) {
                free(arr);
                free(refs);
                return NULL;
        }
        for (size_t i = 0; hmap_next(&m->services, &i, NULL, &v);) {
                const struct svc *s = v;
                uint64_t prefix = 0;
                for (size_t k = 0, end = 0; k < 8; k++) {
                        end = end || !s->key[k];
                        prefix = prefix << 8 | (end ? 0 : (unsigned char) s->key[k]);
                }
                refs[n++] = (struct svc_ref) {prefix, s};
        }
        qsort(refs, n, sizeof *refs, cmp_svc_ref);
        for (size_t i = 0; i < n; i++)
                arr[i] = refs[i].svc;
        free(refs);
        *ret_n = n;
        return arr;
}

const struct slice **model_service_slices(const struct model *m, const char *service_key,
                                          size_t *ret_n) {
        const struct slice *s, **arr = NULL;
        size_t n = 0, cap = 0;

        *ret_n = 0;
        for (size_t i = 0; (s = hmap_next_of(&m->by_service, service_key, &i));) {
                if (n == cap) {
                        cap = cap ? cap * 2 : 4;
                        const struct slice **a = realloc(arr, cap * sizeof *arr);
                        if (!a) {
                                free(arr);
                                return NULL;
                        }
                        arr = a;
                }
                arr[n++] = s;
        }
        if (n > 1)
                qsort(arr, n, sizeof *arr, cmp_slice);
        *ret_n = n;
        return arr;
}
