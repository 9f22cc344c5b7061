/* SPDX-License-Identifier: Apache-2.0 */
/* The interface's own pieces (proxy/backend.c, proxy/backend.h): the sync
 * kinds' names, and a mode's object found back from the core's handle. */
#include <stddef.h>

#include "proxy/backend.h"
#include "test.h"

static void test_sync_kinds(void) {
        CHECK_STREQ(backend_sync_kind_to_string(BACKEND_SYNC_PARTIAL), "partial");
        CHECK_STREQ(backend_sync_kind_to_string(BACKEND_SYNC_RESYNC), "resync");
        CHECK_STREQ(backend_sync_kind_to_string(BACKEND_SYNC_FULL), "full");
        CHECK(backend_sync_kind_to_string(_BACKEND_SYNC_KIND_MAX) == NULL);
        CHECK(backend_sync_kind_to_string((enum backend_sync_kind) - 1) == NULL);
}

struct a_mode {
        int before;
        struct backend base;
        int after;
};

static void test_mode_of_handle(void) {
        struct a_mode m = {.before = 1, .after = 2};
        struct backend *b = &m.base;
        struct a_mode *back = BACKEND_MODE(b, struct a_mode);
        CHECK(back == &m && back->before == 1 && back->after == 2);
}

int main(void) {
        TEST_RUN(test_sync_kinds);
        TEST_RUN(test_mode_of_handle);
        TEST_DONE();
}
