/* SPDX-License-Identifier: Apache-2.0 */
/* The table of modes (proxy/backends.c): each configured mode has its
 * backend under its own name, IPVS none; every backend has the operations
 * the core calls without asking. */
#include <stddef.h>

#include "config/config.h"
#include "proxy/backend.h"
#include "proxy/backends.h"
#include "test.h"

static void test_table(void) {
        static const struct {
                int mode;
                const char *name;
        } want[] = {
                {PROXY_MODE_IPTABLES, "iptables"},
                {PROXY_MODE_NFTABLES, "nftables"},
                {PROXY_MODE_USERSPACE, "userspace"},
        };
        for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
                const struct backend_ops *o = backend_for_mode(want[i].mode);
                CHECK(o != NULL);
                if (o)
                        CHECK_STREQ(o->name, want[i].name);
        }
        CHECK(backend_for_mode(PROXY_MODE_IPVS) == NULL);
        CHECK(backend_for_mode(-1) == NULL);
        CHECK(backend_for_mode(_PROXY_MODE_MAX) == NULL);

        size_t n = 0;
        for (; backend_all[n]; n++)
                CHECK(backend_for_mode(want[n].mode) == backend_all[n]);
        CHECK(n == 3);
        CHECK(backend_companions[0] != NULL && backend_companions[1] == NULL);
        if (backend_companions[0])
                CHECK_STREQ(backend_companions[0]->name, "socket-lb");
}

/* What the core calls on every backend without asking. */
static void test_operations(void) {
        for (size_t i = 0; backend_all[i]; i++) {
                const struct backend_ops *o = backend_all[i];
                CHECK(o->create && o->destroy && o->sync && o->check && o->ipv6_usable);
                CHECK(o->leftovers && o->remove_leftovers && o->cleanup && o->render);
                CHECK(o->stopped && *o->stopped);
                CHECK(o->caps != 0);
                /* Only userspace mode carries connections, and hands its sockets over. */
                CHECK(!!o->busy == !!o->quiesce && !!o->busy == o->hands_over);
                CHECK(o->conntrack == !o->hands_over);
                CHECK(o->destroy(NULL) == NULL);
        }
        const struct backend_ops *c = backend_companions[0];
        CHECK(c->create && c->destroy && c->sync && c->cleanup && c->expose && c->render);
        CHECK(c->destroy(NULL) == NULL);
}

int main(void) {
        TEST_RUN(test_table);
        TEST_RUN(test_operations);
        TEST_DONE();
}
