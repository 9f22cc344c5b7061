/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /debug/rules' answer (proxy/debug-rules.c), without a server: the mode's
 * render text for the model, per family, headed by whether changes are
 * pending, with socket load balancing's maps when it runs beside the mode;
 * a second request within its period is refused (429, Retry-After) and
 * renders nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "config/config.h"
#include "host/host.h"
#include "http/mhd.h"
#include "model/model.h"
#include "proxy/backend.h"
#include "proxy/backends.h"
#include "proxy/debug-rules.h"
#include "proxy/socklb/backend.h"
#include "test.h"
#include "util/buf.h"
#include "util/inet.h"

struct fixture {
        struct kproxy_config cfg;
        struct host_facts host;
        struct inet_cidr hostaddr;
        struct model *m;
        struct debug_rules_node n;
        uint8_t families[1];
};

static void fixture_init(struct fixture *f, int mode) {
        memset(f, 0, sizeof *f);
        config_init(&f->cfg);
        f->cfg.mode = mode;
        f->cfg.cluster_cidr = strdup("10.244.0.0/16");
        inet_cidr_parse("192.168.0.2/24", &f->hostaddr);
        f->host.addrs = &f->hostaddr;
        f->host.n_addrs = 1;
        f->m = model_new();
        cluster_small(f->m, false);
        f->families[0] = 4;
        f->n = (struct debug_rules_node) {.m = f->m, .cfg = &f->cfg, .node_name = "node-1", .host = &f->host,
                                          .ops = backend_for_mode(mode), .families = f->families, .n_families = 1};
}

static void fixture_done(struct fixture *f) {
        model_free(f->m);
        config_done(&f->cfg);
}

static const char *answer(const struct debug_rules_node *n, struct mhd_reply *r) {
        *r = (struct mhd_reply) {.status = 200, .body = BUF_INIT, .headers = BUF_INIT};
        debug_rules(n, r);
        buf_putc(&r->body, '\0');
        return r->body.data;
}

static void reply_done(struct mhd_reply *r) {
        buf_done(&r->body);
        buf_done(&r->headers);
}

static void test_iptables(void) {
        struct fixture f;
        struct mhd_reply r;
        fixture_init(&f, PROXY_MODE_IPTABLES);
        const char *t = answer(&f.n, &r);
        CHECK(r.status == 200 && r.nosniff && strstr(r.content_type, "text/plain"));
        CHECK(strstr(t, "# kproxy: what iptables mode writes") == t);
        CHECK(strstr(t, "# nothing pending") != NULL);
        CHECK(strstr(t, "# IPv4, iptables\n") != NULL);
        CHECK(strstr(t, "-A KUBE-SERVICES") != NULL && strstr(t, "ns/svc-a") != NULL);
        CHECK(strstr(t, "socket load balancing") == NULL);
        reply_done(&r);

        f.n.pending = 2;
        t = answer(&f.n, &r);
        CHECK(strstr(t, "# 2 services changed since the last sync") != NULL);
        reply_done(&r);

        f.n.too_soon = true;
        t = answer(&f.n, &r);
        CHECK(r.status == 429 && strstr(r.headers.data ? r.headers.data : "", "Retry-After") != NULL);
        CHECK(strstr(t, "KUBE-SERVICES") == NULL);
        reply_done(&r);
        fixture_done(&f);
}

static void test_nftables_with_socket_lb(void) {
        struct fixture f;
        struct mhd_reply r;
        fixture_init(&f, PROXY_MODE_NFTABLES);
        f.n.companion = &backend_socklb;
        const char *t = answer(&f.n, &r);
        CHECK(strstr(t, "# IPv4, nftables\n") != NULL && strstr(t, "table ip kube-proxy") != NULL);
        CHECK(strstr(t, "# IPv4, socket load balancing\n") != NULL);
        CHECK(strstr(t, "# IPv4, nftables\n") < strstr(t, "# IPv4, socket load balancing\n"));
        reply_done(&r);
        fixture_done(&f);
}

int main(void) {
        TEST_RUN(test_iptables);
        TEST_RUN(test_nftables_with_socket_lb);
        TEST_DONE();
}
