/* SPDX-License-Identifier: Apache-2.0 */
/* Partial syncs (as upstream's TestSyncProxyRulesRepeated): only changed
 * services' chains are written, unchanged ones stay active, and chains no
 * longer used are flushed and deleted. */
#include <jansson.h>

#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "kube/decode.h"
#include "model/model.h"
#include "model/owned-chains.h"
#include "render/render.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/hmap.h"
#include "test.h"

static void add_service(struct model *m, const char *name, const char *ip) {
        char text[512], err[KUBE_ERRLEN];
        struct svc *s;
        snprintf(text, sizeof text,
                 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\"},\"spec\":{\"clusterIP\":\"%s\","
                 "\"ports\":[{\"name\":\"p\",\"port\":80}]}}",
                 name, ip);
        json_t *j = json_loads(text, 0, NULL);
        CHECK(kube_decode_service(j, &s, err) == 0);
        model_service_upsert(m, s);
        json_decref(j);
}

static void add_slice(struct model *m, const char *svc, const char *ip) {
        char text[512], err[KUBE_ERRLEN];
        struct slice *s;
        snprintf(text, sizeof text,
                 "{\"metadata\":{\"name\":\"%s-1\",\"namespace\":\"ns\",\"labels\":{\"kubernetes.io/service-name\":"
                 "\"%s\"}},\"addressType\":\"IPv4\",\"ports\":[{\"name\":\"p\",\"port\":8080}],"
                 "\"endpoints\":[{\"addresses\":[\"%s\"]}]}",
                 svc, svc, ip);
        json_t *j = json_loads(text, 0, NULL);
        CHECK(kube_decode_slice(j, &s, err) == 0);
        model_slice_upsert(m, s);
        json_decref(j);
}

/* One slice of service svc with the endpoints 10.0.1.FIRST to 10.0.1.LAST. */
static void add_slice_range(struct model *m, const char *svc, int first, int last) {
        char text[8192], err[KUBE_ERRLEN];
        struct slice *s;
        struct buf eps = BUF_INIT;
        for (int i = first; i <= last; i++)
                buf_printf(&eps, "%s{\"addresses\":[\"10.0.1.%d\"]}", i > first ? "," : "", i);
        snprintf(text, sizeof text,
                 "{\"metadata\":{\"name\":\"%s-1\",\"namespace\":\"ns\",\"labels\":{\"kubernetes.io/service-name\":"
                 "\"%s\"}},\"addressType\":\"IPv4\",\"ports\":[{\"name\":\"p\",\"port\":8080}],"
                 "\"endpoints\":[%s]}",
                 svc, svc, eps.data);
        json_t *j = json_loads(text, 0, NULL);
        CHECK(j && kube_decode_slice(j, &s, err) == 0);
        model_slice_upsert(m, s);
        json_decref(j);
        buf_done(&eps);
}

/* As the iptables backend syncs: render, then fold what was written into
 * the state kept between syncs. The render itself leaves the state as it
 * was. */
static int render_and_keep(const struct model *m, const struct render_params *p, struct render_ipt_sync *s,
                           struct owned_chains *owned, struct buf *out) {
        size_t chains = owned_chains_n_chains(owned), rules = owned_chains_n_rules(owned);
        s->owned = owned;
        int r = render_iptables(m, p, s, out);
        CHECK(owned_chains_n_chains(owned) == chains && owned_chains_n_rules(owned) == rules);
        if (r == 0) {
                CHECK(s->fresh != NULL);
                owned_chains_merge(owned, TAKE_PTR(s->fresh), s->changed);
        }
        return r;
}

static int count(const char *hay, const char *needle) {
        int n = 0;
        for (const char *p = hay; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

static void test_partial_and_stale(void) {
        struct kproxy_config cfg;
        struct host_facts host = {0};
        struct render_params p;
        struct model *m = model_new();
        struct buf out = BUF_INIT;
        struct hmap existing = HMAP_INIT, changed = HMAP_INIT;
        struct owned_chains *owned = owned_chains_new();

        config_init(&cfg);
        add_service(m, "a", "10.96.0.1");
        add_slice(m, "a", "10.0.0.1");
        add_service(m, "b", "10.96.0.2");
        add_slice(m, "b", "10.0.0.2");
        CHECK(owned && render_params_init(&p, 4, &cfg, "n", NULL, &host, NULL) == 0);

        /* Full, over a kernel holding a chain no service uses: both
         * services' chains written (2 SVC + 2 SEP owned), the other deleted. */
        hmap_put(&existing, "KUBE-SEP-GONEGONEGONEGONE", (void *) "x");
        struct render_ipt_sync s = {.existing = &existing};
        CHECK(render_and_keep(m, &p, &s, owned, &out) == 0);
        CHECK(count(out.data, ":KUBE-SVC-") == 2 && count(out.data, ":KUBE-SEP-") == 3);
        CHECK(count(out.data, "\n-X KUBE-SEP-GONEGONEGONEGONE\n") == 1 && count(out.data, "\n-X ") == 1);
        CHECK(owned_chains_n_chains(owned) == 4);
        /* KUBE-FIREWALL + three KUBE-FORWARD rules. */
        CHECK(s.n_nat_rules > 0 && s.n_filter_rules == 4);
        CHECK(s.n_nat_rules_total == s.n_nat_rules);
        size_t full_rules = s.n_nat_rules;

        /* b's endpoint moves; a is unchanged: only b's chains are written, the
         * old SEP of b is deleted, a's chains are neither written nor deleted. */
        add_slice(m, "b", "10.0.0.3");
        hmap_put(&changed, "ns/b", (void *) "ns/b");
        buf_clear(&out);
        s = (struct render_ipt_sync) {.changed = &changed, .existing = &existing};
        CHECK(render_and_keep(m, &p, &s, owned, &out) == 0);
        CHECK(count(out.data, "ns/a:p -> ") == 0);
        CHECK(count(out.data, ":KUBE-SVC-") == 1);
        CHECK(count(out.data, "ns/b:p -> 10.0.0.3:8080") == 1);
        CHECK(count(out.data, "\n-X KUBE-SEP-") == 1);
        CHECK(count(out.data, "\n-X ") == 1);     /* not the one a full sync read from the kernel */
        /* a's cluster-IP rule in KUBE-SERVICES is always rewritten. */
        CHECK(count(out.data, "\"ns/a:p cluster IP\" -m tcp -p tcp -d 10.96.0.1 --dport 80 -j KUBE-SVC-") == 1);
        CHECK(owned_chains_n_chains(owned) == 4);
        /* The nat total counts the unchanged chains too: it equals a full render's. */
        {
                struct buf full = BUF_INIT;
                struct render_ipt_sync fs = {0};
                CHECK(render_iptables(m, &p, &fs, &full) == 0);
                CHECK(s.n_nat_rules < fs.n_nat_rules);
                CHECK(s.n_nat_rules_total == fs.n_nat_rules && fs.n_nat_rules == full_rules);
                /* Every service's chains, as the state holds them. */
                CHECK(owned_chains_n_chains(fs.fresh) == owned_chains_n_chains(owned));
                CHECK(owned_chains_n_rules(fs.fresh) == owned_chains_n_rules(owned));
                owned_chains_free(fs.fresh);
                buf_done(&full);
        }

        /* a is deleted: its chains go, b's are left alone. */
        CHECK(model_service_delete(m, "ns/a") == 0);
        buf_clear(&out);
        hmap_done(&changed);
        hmap_put(&changed, "ns/a", (void *) "ns/a");
        CHECK(render_and_keep(m, &p, &s, owned, &out) == 0);
        CHECK(count(out.data, "\n-X KUBE-SVC-") == 1);
        CHECK(count(out.data, "\n-X KUBE-SEP-") == 1);
        CHECK(count(out.data, ":KUBE-SEP-") == 1);        /* the flush before -X */
        CHECK(owned_chains_n_chains(owned) == 2);
        CHECK(s.n_nat_rules_total == owned_chains_n_rules(owned) + s.n_nat_rules);

        /* Many endpoints (the names are compared through a map): one
         * changes, one chain goes. */
        hmap_done(&changed);
        hmap_put(&changed, "ns/b", (void *) "ns/b");
        add_slice_range(m, "b", 10, 39);
        buf_clear(&out);
        CHECK(render_and_keep(m, &p, &s, owned, &out) == 0);
        CHECK(count(out.data, "\n-X KUBE-SEP-") == 1);  /* 10.0.0.3's */
        CHECK(owned_chains_n_chains(owned) == 1 + 30);
        add_slice_range(m, "b", 10, 38);
        buf_clear(&out);
        CHECK(render_and_keep(m, &p, &s, owned, &out) == 0);
        CHECK(count(out.data, "\n-X KUBE-SEP-") == 1 && count(out.data, "\n-X ") == 1);
        CHECK(count(out.data, "ns/b:p -> 10.0.1.39:8080") == 0 && count(out.data, "ns/b:p -> 10.0.1.38:8080") == 1);
        CHECK(owned_chains_n_chains(owned) == 1 + 29);

        hmap_done(&existing);
        hmap_done(&changed);
        buf_done(&out);
        owned_chains_free(owned);
        render_params_done(&p);
        model_free(m);
        config_done(&cfg);
}

int main(void) {
        TEST_RUN(test_partial_and_stale);
        TEST_DONE();
}
