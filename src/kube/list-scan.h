/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Where the parts of a list response are, without parsing it: the
 * "metadata" object and each element of the "items" array, as byte ranges
 * of the body. A list served from the API server's watch cache comes whole
 * (resourceVersion=0 ignores limit): 16 MB for 10k Services, whose
 * document tree in jansson took 150 MB. Parsed an item at a time, it takes
 * the body and one object. Pure; the ranges are checked by the parse of
 * each part, not here.
 */
#include <stdbool.h>
#include <stddef.h>

struct kube_list_range {
        size_t off, len;
};

struct kube_list_scan {
        struct kube_list_range metadata;        /* len 0: absent */
        struct kube_list_range *items;          /* malloc'd; NULL with none */
        size_t n_items;
        bool has_items;                         /* "items" is there, as an array */
};

/* Scans body: a JSON object whose members are read at the top level only.
 * Returns 0, -EINVAL when the text is not a JSON object as the scanner
 * reads it (strings, nesting, the end: then parse the whole body instead),
 * or -ENOMEM. ret's items are freed with kube_list_scan_done(). */
int kube_list_scan(const char *body, size_t len, struct kube_list_scan *ret);
void kube_list_scan_done(struct kube_list_scan *s);
