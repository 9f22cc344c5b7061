/* SPDX-License-Identifier: Apache-2.0 */
/* A list response cut into its metadata and items without parsing it:
 * each part, parsed alone, is what the whole document's parse holds; what
 * the scanner cannot read is refused (the caller then parses it whole). */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "kube/list-scan.h"
#include "test.h"

/* Scans text and checks every part against jansson's parse of the whole. */
static bool parts_match(const char *text) {
        struct kube_list_scan s;
        json_t *whole = json_loads(text, 0, NULL);
        bool ok = whole && kube_list_scan(text, strlen(text), &s) == 0;

        if (!ok) {
                json_decref(whole);
                return false;
        }
        const json_t *items = json_object_get(whole, "items");
        ok = s.has_items == json_is_array(items) && s.n_items == json_array_size(items);
        for (size_t i = 0; ok && i < s.n_items; i++) {
                json_t *item = json_loadb(text + s.items[i].off, s.items[i].len, JSON_DECODE_ANY, NULL);
                ok = item && json_equal(item, json_array_get(items, i));
                json_decref(item);
        }
        if (ok && s.metadata.len) {
                json_t *md = json_loadb(text + s.metadata.off, s.metadata.len, 0, NULL);
                ok = md && json_equal(md, json_object_get(whole, "metadata"));
                json_decref(md);
        } else if (ok) {
                ok = !json_object_get(whole, "metadata");
        }
        kube_list_scan_done(&s);
        json_decref(whole);
        return ok;
}

static int scan_rc(const char *text) {
        struct kube_list_scan s;
        int r = kube_list_scan(text, strlen(text), &s);
        kube_list_scan_done(&s);
        return r;
}

static void test_parts(void) {
        CHECK(parts_match("{\"kind\":\"ServiceList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"42\","
                          "\"continue\":\"a\\\"}b\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},"
                          "{\"metadata\":{\"name\":\"b]}\",\"labels\":{\"x\":\"[{\\\\\"}},\"spec\":{\"ports\":[1,2,[]]}},"
                          " {\"v\": -1.5e3, \"t\": true, \"n\": null} ]}"));
        CHECK(parts_match(" { \"items\" : [ ] , \"metadata\" : { } } \n"));
        CHECK(parts_match("{\"metadata\":{\"resourceVersion\":\"1\"}}"));             /* no items */
        CHECK(parts_match("{\"items\":[\"x\", 3, {\"a\":[{\"b\":{}}]}],\"metadata\":{\"resourceVersion\":\"7\"}}"));
        CHECK(parts_match("{}"));
}

static void test_refused(void) {
        CHECK(scan_rc("") == -EINVAL);
        CHECK(scan_rc("[]") == -EINVAL);
        CHECK(scan_rc("{\"items\":[{\"a\":\"unterminated}]}") == -EINVAL);
        CHECK(scan_rc("{\"items\":[{\"a\":[1}]}") == -EINVAL);         /* brackets crossed */
        CHECK(scan_rc("{\"items\":[{}]} trailing") == -EINVAL);
        CHECK(scan_rc("{\"items\":[{}],\"items\":[]}") == -EINVAL);    /* jansson would keep the last */
        CHECK(scan_rc("{\"items\":[{},]}") == -EINVAL);
        CHECK(scan_rc("{\"items\" [{}]}") == -EINVAL);
        /* A key written with escapes is not the items: parsed whole instead. */
        struct kube_list_scan s;
        { const char *t = "{\"\\u0069tems\":[{}]}"; CHECK(kube_list_scan(t, strlen(t), &s) == 0 && !s.has_items); }
        kube_list_scan_done(&s);
        /* Nesting past the scanner's depth is left to jansson. */
        char deep[600] = "{\"items\":[";
        for (int i = 0; i < 200; i++)
                strcat(deep, "[");
        for (int i = 0; i < 200; i++)
                strcat(deep, "]");
        strcat(deep, "]}");
        CHECK(scan_rc(deep) == -EINVAL);
}

int main(void) {
        TEST_RUN(test_parts);
        TEST_RUN(test_refused);
        TEST_DONE();
}
