/* SPDX-License-Identifier: Apache-2.0 */
/* Partial syncs (as upstream's TestSyncProxyRulesRepeated): only changed
 * services' chains are written, unchanged ones stay active, and chains no
 * longer used are flushed and deleted. */
#include <jansson.h>

#include "config/config.h"
#include "host/host.h"
#include "kube/decode.h"
#include "model/model.h"
#include "render/render.h"
#include "util/buf.h"
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
        struct buf out = BUF_INIT, active = BUF_INIT;
        struct hmap existing = HMAP_INIT, changed = HMAP_INIT;

        config_init(&cfg);
        add_service(m, "a", "10.96.0.1");
        add_slice(m, "a", "10.0.0.1");
        add_service(m, "b", "10.96.0.2");
        add_slice(m, "b", "10.0.0.2");
        CHECK(render_params_init(&p, 4, &cfg, "n", NULL, &host, NULL) == 0);

        /* Full: both services' chains written, 2 SVC + 2 SEP active. */
        struct render_ipt_sync s = {.existing = &existing, .active = &active};
        CHECK(render_iptables(m, &p, &s, &out) == 0);
        CHECK(count(out.data, ":KUBE-SVC-") == 2 && count(out.data, ":KUBE-SEP-") == 2);
        CHECK(count(active.data, "\n") == 4);
        /* KUBE-FIREWALL + three KUBE-FORWARD rules. */
        CHECK(s.n_nat_rules > 0 && s.n_filter_rules == 4);

        /* Everything active now exists in the kernel. */
        char *names = buf_steal(&active);
        for (char *q = names; *q;) {
                char *nl = strchr(q, '\n');
                *nl = '\0';
                hmap_put(&existing, q, NULL);
                q = nl + 1;
        }

        /* b's endpoint moves; a is unchanged: only b's chains are written, the
         * old SEP of b is deleted, a's chains are neither written nor deleted. */
        add_slice(m, "b", "10.0.0.3");
        hmap_put(&changed, "ns/b", (void *) "ns/b");
        buf_clear(&out);
        s = (struct render_ipt_sync) {.changed = &changed, .existing = &existing, .active = &active};
        CHECK(render_iptables(m, &p, &s, &out) == 0);
        CHECK(count(out.data, "ns/a:p -> ") == 0);
        CHECK(count(out.data, "ns/b:p -> 10.0.0.3:8080") == 1);
        CHECK(count(out.data, "\n-X KUBE-SEP-") == 1);
        CHECK(count(out.data, "\n-X ") == 1);
        /* a's cluster-IP rule in KUBE-SERVICES is always rewritten. */
        CHECK(count(out.data, "\"ns/a:p cluster IP\" -m tcp -p tcp -d 10.96.0.1 --dport 80 -j KUBE-SVC-") == 1);
        CHECK(count(active.data, "\n") == 4);
        /* The nat total counts the unchanged chains too: it equals a full render's. */
        {
                struct buf full = BUF_INIT;
                struct render_ipt_sync fs = {0};
                CHECK(render_iptables(m, &p, &fs, &full) == 0);
                CHECK(s.n_nat_rules < fs.n_nat_rules);
                CHECK(s.n_nat_rules_total == fs.n_nat_rules);
                buf_done(&full);
        }

        /* a is deleted: its chains go. */
        CHECK(model_service_delete(m, "ns/a") == 0);
        buf_clear(&out);
        buf_clear(&active);
        hmap_done(&changed);
        hmap_put(&changed, "ns/a", (void *) "ns/a");
        CHECK(render_iptables(m, &p, &s, &out) == 0);
        CHECK(count(out.data, "\n-X KUBE-SVC-") == 1);
        CHECK(count(out.data, "\n-X KUBE-SEP-") == 2);   /* a's, and b's old one still listed as existing */

        free(names);
        hmap_done(&existing);
        hmap_done(&changed);
        buf_done(&out);
        buf_done(&active);
        render_params_done(&p);
        model_free(m);
        config_done(&cfg);
}

int main(void) {
        TEST_RUN(test_partial_and_stale);
        TEST_DONE();
}
