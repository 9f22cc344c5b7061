/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ServiceCIDRs (networking.k8s.io/v1): the ranges cluster IPs are
 * allocated from, one or two of different families.
 */
#include "kube/decode.h"

#include <jansson.h>
#include <stdlib.h>

#include "kube/decode-field.h"
#include "util/cleanup.h"
#include "util/inet.h"
#include "util/alloc.h"

int kube_decode_service_cidr(const json_t *obj, char **ret_name, struct inet_cidr **ret_cidrs, size_t *ret_n,
                             char err[KUBE_ERRLEN]) {
        _cleanup_free_ char *name = NULL;
        _cleanup_free_ struct inet_cidr *cidrs = NULL;
        const json_t *labels, *spec, *list;
        int r;

        err[0] = '\0';
        if ((r = kube_field_meta(obj, false, &name, &labels, err)) < 0 ||
            (r = kube_field_object(obj, "spec", &spec, err, "")) < 0 ||
            (r = kube_field_array(spec, "cidrs", &list, err, "spec.")) < 0)
                return r;
        size_t n = json_array_size(list);
        if (n == 0)
                return kube_field_fail(err, "spec.cidrs: missing");
        if (n > 2)
                return kube_field_fail(err, "spec.cidrs: %zu CIDRs, at most one per IP family", n);
        cidrs = xcalloc(n, sizeof *cidrs);
        for (size_t i = 0; i < n; i++) {
                const char *c = json_string_value(json_array_get(list, i));
                if (!c || inet_cidr_parse(c, &cidrs[i]) < 0)
                        return kube_field_fail(err, "spec.cidrs[%zu]: \"%.64s\" is not a CIDR", i, c ? c : "");
        }
        if (n == 2 && cidrs[0].addr.family == cidrs[1].addr.family)
                return kube_field_fail(err, "spec.cidrs: two CIDRs of one IP family");
        *ret_name = TAKE_PTR(name);
        *ret_cidrs = TAKE_PTR(cidrs);
        *ret_n = n;
        return 0;
}
