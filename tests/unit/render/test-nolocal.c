/* SPDX-License-Identifier: Apache-2.0 */
/* The tally of Local policies without a local endpoint
 * (kubeproxy_sync_proxy_rules_no_local_endpoints_total): counted as
 * upstream counts it, kept per service, and recounted for the changed
 * services only. */
#include <jansson.h>
#include <stdlib.h>

#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "kube/intake.h"
#include "model/model.h"
#include "render/nolocal.h"
#include "render/render.h"
#include "util/hmap.h"
#include "test.h"

static void put(struct intake *in, enum intake_source src, const char *key, const char *text) {
        json_error_t e;
        json_t *j = text ? json_loads(text, 0, &e) : NULL;
        if (text && !j)
                fprintf(stderr, "bad test JSON: %s\n", e.text);
        intake_object(in, src, key, j);
        json_decref(j);
}

/* A NodePort service with policies etp/itp and one endpoint on node. */
static void service(struct intake *in, const char *name, const char *ip, const char *etp, const char *itp,
                    const char *node) {
        char key[64], text[1024];
        snprintf(key, sizeof key, "default/%s", name);
        snprintf(text, sizeof text,
                 "{\"kind\":\"Service\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\"},"
                 "\"spec\":{\"type\":\"NodePort\",\"clusterIP\":\"%s\",\"clusterIPs\":[\"%s\"],"
                 "\"externalTrafficPolicy\":\"%s\",\"internalTrafficPolicy\":\"%s\","
                 "\"ports\":[{\"port\":80,\"nodePort\":%d}]}}",
                 name, ip, ip, etp, itp, 30000 + ip[strlen(ip) - 1]);
        put(in, INTAKE_SERVICES, key, text);
        if (!node)
                return;
        snprintf(key, sizeof key, "default/%s-1", name);
        snprintf(text, sizeof text,
                 "{\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":\"%s-1\",\"namespace\":\"default\","
                 "\"labels\":{\"kubernetes.io/service-name\":\"%s\"}},\"addressType\":\"IPv4\","
                 "\"endpoints\":[{\"addresses\":[\"10.1.0.%c\"],\"nodeName\":\"%s\"}],\"ports\":[{\"port\":8080}]}",
                 name, name, ip[strlen(ip) - 1], node);
        put(in, INTAKE_SLICES, key, text);
}

static void test_tally(void) {
        struct kproxy_config c;
        struct host_facts h = {0};
        struct render_params p;
        struct intake *in = NULL;
        struct nolocal *t = nolocal_new();
        struct hmap changed = HMAP_INIT;
        size_t internal, external;

        CHECK(config_init(&c) == 0 && intake_new("n1", NULL, &in) == 0 && t);
        if (!in || !t)
                goto out;
        CHECK(render_params_init(&p, 4, &c, "n1", NULL, &h, NULL) == 0);
        service(in, "ext", "10.96.0.1", "Local", "Cluster", "n2");      /* external: no local endpoint */
        service(in, "int", "10.96.0.2", "Cluster", "Local", "n2");      /* internal: none either */
        service(in, "both", "10.96.0.3", "Local", "Local", "n2");       /* both */
        service(in, "here", "10.96.0.4", "Local", "Local", "n1");       /* a local endpoint: none */
        service(in, "none", "10.96.0.5", "Local", "Local", NULL);       /* no endpoints at all: none */
        service(in, "plain", "10.96.0.6", "Cluster", "Cluster", "n2");  /* no Local policy */
        nolocal_update(t, intake_model(in), &p, NULL);
        nolocal_totals(t, &internal, &external);
        CHECK(internal == 2 && external == 2);

        /* "both" gets a local endpoint, "ext" loses its service: only they
         * are recounted. */
        service(in, "both", "10.96.0.3", "Local", "Local", "n1");
        put(in, INTAKE_SERVICES, "default/ext", NULL);
        hmap_put(&changed, "default/both", (void *) "default/both");
        hmap_put(&changed, "default/ext", (void *) "default/ext");
        nolocal_update(t, intake_model(in), &p, &changed);
        nolocal_totals(t, &internal, &external);
        CHECK(internal == 1 && external == 0);

        /* A change the changed set does not name is not seen until a
         * whole recount (the proxier's after a Node change). */
        service(in, "int", "10.96.0.2", "Cluster", "Local", "n1");
        hmap_done(&changed);
        nolocal_update(t, intake_model(in), &p, &changed);
        nolocal_totals(t, &internal, &external);
        CHECK(internal == 1);
        nolocal_update(t, intake_model(in), &p, NULL);
        nolocal_totals(t, &internal, &external);
        CHECK(internal == 0 && external == 0);
        render_params_done(&p);
out:
        hmap_done(&changed);
        nolocal_free(t);
        intake_free(in);
        config_done(&c);
}

int main(void) {
        TEST_RUN(test_tally);
        TEST_DONE();
}
