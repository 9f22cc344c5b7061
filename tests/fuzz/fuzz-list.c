/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: any bytes as a list response through the scanner that
 * cuts it into its metadata and items (kube/list-scan.c), as the API
 * client reads lists. Every range lies inside the input; when jansson
 * takes the whole text as an object, each item parsed alone is the
 * whole's item of the same index, and the metadata the whole's metadata
 * (the scanner may accept text jansson refuses between its parts, never
 * read a part differently).
 */
#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "kube/list-scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *text = (const char *) data;
        struct kube_list_scan s;

        if (kube_list_scan(text, size, &s) < 0)
                return 0;
        assert(s.metadata.off + s.metadata.len <= size);
        for (size_t i = 0; i < s.n_items; i++)
                assert(s.items[i].off + s.items[i].len <= size && s.items[i].len > 0);
        json_t *whole = json_loadb(text, size, 0, NULL);
        if (whole && json_is_object(whole)) {
                const json_t *items = json_object_get(whole, "items");
                if (s.has_items && json_is_array(items)) {
                        assert(json_array_size(items) == s.n_items);
                        for (size_t i = 0; i < s.n_items; i++) {
                                json_t *item = json_loadb(text + s.items[i].off, s.items[i].len, JSON_DECODE_ANY,
                                                          NULL);
                                assert(item && json_equal(item, json_array_get(items, i)));
                                json_decref(item);
                        }
                }
                if (s.metadata.len) {
                        json_t *md = json_loadb(text + s.metadata.off, s.metadata.len, JSON_DECODE_ANY, NULL);
                        assert(md && json_equal(md, json_object_get(whole, "metadata")));
                        json_decref(md);
                }
        }
        json_decref(whole);
        kube_list_scan_done(&s);
        return 0;
}
