/* SPDX-License-Identifier: Apache-2.0 */
/*
 * This node's Node object: its labels (the zone among them), addresses,
 * pod CIDRs, and whether it is on its way out of the cluster.
 */
#include "kube/decode.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/decode-field.h"
#include "model/model.h"
#include "util/cleanup.h"
#include "util/inet.h"
#include "util/alloc.h"

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int kube_decode_node(const json_t *obj, struct node **ret, char err[KUBE_ERRLEN]) {
        _cleanup_(node_freep) struct node *n = xcalloc(1, sizeof *n);
        const json_t *labels, *status, *addrs, *spec, *cidrs;
        const char *k, *zone;
        const json_t *v;
        int r;

        err[0] = '\0';
        if ((r = kube_field_meta(obj, false, &n->name, &labels, err)) < 0)
                return r;

        n->labels = xcalloc(json_object_size(labels), sizeof *n->labels);
        json_object_foreach((json_t *) labels, k, v) {
                const char *val = json_string_value(v);
                if (!val)
                        return kube_field_fail(err, "metadata.labels.%.64s: must be a string", k);
                size_t len = strlen(k) + strlen(val) + 2;
                n->labels[n->n_labels] = xcalloc(len, 1);
                snprintf(n->labels[n->n_labels++], len, "%s=%s", k, val);
        }
        qsort(n->labels, n->n_labels, sizeof *n->labels, cmp_str);
        zone = kube_field_label(labels, KUBE_LABEL_ZONE);
        if (zone) {
                if (kube_valid_label_value(zone) < 0)
                        return kube_field_fail(err, "metadata.labels." KUBE_LABEL_ZONE ": \"%.64s\" is not valid",
                                               zone);
                n->zone = xstrdup(zone);
        }

        if ((r = kube_field_object(obj, "status", &status, err, "")) < 0 ||
            (r = kube_field_array(status, "addresses", &addrs, err, "status.")) < 0)
                return r;
        n->addrs = xcalloc(json_array_size(addrs), sizeof *n->addrs);
        for (size_t i = 0; i < json_array_size(addrs); i++) {
                const json_t *a = json_array_get(addrs, i);
                const char *type = json_string_value(json_object_get(a, "type"));
                const char *addr = json_string_value(json_object_get(a, "address"));
                int t = type && strcmp(type, "InternalIP") == 0   ? NODE_ADDR_INTERNAL
                        : type && strcmp(type, "ExternalIP") == 0 ? NODE_ADDR_EXTERNAL
                                                                  : 0;
                if (t == 0)
                        continue;       /* Hostname, InternalDNS, ... */
                if (!addr || inet_addr_parse(addr, &n->addrs[n->n_addrs].addr) < 0)
                        return kube_field_fail(err, "status.addresses[%zu].address: \"%.64s\" is not an IP address", i,
                                    addr ? addr : "");
                n->addrs[n->n_addrs++].type = t;
        }

        if ((r = kube_field_object(obj, "spec", &spec, err, "")) < 0 ||
            (r = kube_field_array(spec, "podCIDRs", &cidrs, err, "spec.")) < 0)
                return r;

        /* Upstream's node eligibility: a node on its way out (deleted, or
         * marked by the cluster autoscaler) fails /healthz so load
         * balancers drain it first. */
        const json_t *taints = json_object_get(spec, "taints");
        size_t ti;
        const json_t *taint;
        if (json_string_value(json_object_get(json_object_get(obj, "metadata"), "deletionTimestamp")))
                n->leaving = true;
        json_array_foreach((json_t *) taints, ti, taint) {
                const char *key = json_string_value(json_object_get(taint, "key"));
                if (key && strcmp(key, "ToBeDeletedByClusterAutoscaler") == 0)
                        n->leaving = true;
        }
        const char *one = NULL;
        if (!cidrs && (r = kube_field_str(spec, "podCIDR", &one, err, "spec.")) < 0)
                return r;
        size_t nc = cidrs ? json_array_size(cidrs) : one ? 1 : 0;
        n->pod_cidrs = xcalloc(nc, sizeof *n->pod_cidrs);
        for (size_t i = 0; i < nc; i++) {
                const char *c = cidrs ? json_string_value(json_array_get(cidrs, i)) : one;
                if (!c || inet_cidr_parse(c, &n->pod_cidrs[i]) < 0)
                        return kube_field_fail(err, "spec.podCIDRs[%zu]: \"%.64s\" is not a CIDR", i, c ? c : "");
        }
        n->n_pod_cidrs = nc;
        *ret = TAKE_PTR(n);
        return 0;
}
