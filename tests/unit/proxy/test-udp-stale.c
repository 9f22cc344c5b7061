/* SPDX-License-Identifier: Apache-2.0 */
/* What the stale-UDP reconcile asks conntrack to check: every UDP frontend
 * of the family (cluster IP, external and load-balancer IPs, node port)
 * with its serving endpoints; a frontend without any, with none valid
 * (#139629); frontends of replaced or deleted versions, with none of their
 * own, until cleared (#141371). Conntrack itself is replaced by a recorder. */
#include <jansson.h>
#include <stdlib.h>

#include "apply/conntrack.h"
#include "kube/intake.h"
#include "model/model.h"
#include "proxy/udp-stale.h"
#include "util/inet.h"
#include "test.h"

/* One recorded frontend: "ip:port[/np]=ep,ep" (backends sorted as given). */
static char seen[32][160];
static size_t n_seen;
static int calls;

static int record(uint8_t family, const struct ct_frontend *fr, size_t n) {
        (void) family;
        calls++;
        n_seen = 0;
        for (size_t i = 0; i < n && n_seen < 32; i++) {
                char ip[INET_ADDR_STRLEN], *o = seen[n_seen++];
                size_t len = (size_t) snprintf(o, 160, "%s:%u%s=", inet_addr_format(&fr[i].ip, ip), fr[i].port,
                                               fr[i].node_port ? "/np" : "");
                for (size_t k = 0; k < fr[i].n_backends && len < 150; k++)
                        len += (size_t) snprintf(o + len, 160 - len, "%s%s:%u", k ? "," : "",
                                                 inet_addr_format(&fr[i].backends[k].ip, ip),
                                                 fr[i].backends[k].port);
        }
        return 0;
}

static bool has(const char *want) {
        for (size_t i = 0; i < n_seen; i++)
                if (strcmp(seen[i], want) == 0)
                        return true;
        fprintf(stderr, "missing frontend %s\n", want);
        return false;
}

static void put(struct intake *in, enum intake_source src, const char *key, const char *text) {
        json_error_t e;
        json_t *j = text ? json_loads(text, 0, &e) : NULL;
        if (text && !j)
                fprintf(stderr, "bad test JSON: %s\n", e.text);
        intake_object(in, src, key, j);
        json_decref(j);
}

static void on_replacing(void *ctx, const struct svc *old) {
        udp_stale_remember(ctx, old);
}

#define DNS                                                                                                     \
        "{\"kind\":\"Service\",\"metadata\":{\"name\":\"dns\",\"namespace\":\"kube-system\"},"                \
        "\"spec\":{\"type\":\"LoadBalancer\",\"clusterIP\":\"10.96.0.10\",\"clusterIPs\":[\"10.96.0.10\"],"   \
        "\"externalIPs\":[\"192.0.2.5\",\"2001:db8::5\"],"                                                     \
        "\"ports\":[{\"name\":\"dns\",\"protocol\":\"UDP\",\"port\":53,\"nodePort\":30053},"                   \
        "{\"name\":\"dns-tcp\",\"protocol\":\"TCP\",\"port\":53}]},"                                             \
        "\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"203.0.113.9\"}]}}}"

#define DNS_SLICE                                                                                               \
        "{\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":\"dns-1\",\"namespace\":\"kube-system\","          \
        "\"labels\":{\"kubernetes.io/service-name\":\"dns\"}},\"addressType\":\"IPv4\","                        \
        "\"endpoints\":[{\"addresses\":[\"10.1.0.2\"]},"                                                        \
        "{\"addresses\":[\"10.1.0.3\"],\"conditions\":{\"ready\":false,\"serving\":false}},"                   \
        "{\"addresses\":[\"10.1.0.4\"],\"conditions\":{\"ready\":false,\"serving\":true,\"terminating\":true}}]," \
        "\"ports\":[{\"name\":\"dns\",\"protocol\":\"UDP\",\"port\":5353},"                                     \
        "{\"name\":\"dns-tcp\",\"protocol\":\"TCP\",\"port\":5353}]}"

#define SVC(name, ip, proto)                                                                                    \
        "{\"kind\":\"Service\",\"metadata\":{\"name\":\"" name "\",\"namespace\":\"default\"},"               \
        "\"spec\":{\"clusterIP\":\"" ip "\",\"clusterIPs\":[\"" ip "\"],"                                      \
        "\"ports\":[{\"protocol\":\"" proto "\",\"port\":9000}]}}"

static void test_frontends(void) {
        struct udp_stale *u = udp_stale_new();
        struct intake_hooks hooks = {on_replacing, NULL, u};
        struct intake *in = NULL;

        CHECK(u && intake_new("n1", &hooks, &in) == 0);
        if (!u || !in)
                return;
        udp_stale_set_reconciler(u, record);
        put(in, INTAKE_SERVICES, "kube-system/dns", DNS);
        put(in, INTAKE_SLICES, "kube-system/dns-1", DNS_SLICE);
        put(in, INTAKE_SERVICES, "default/empty", SVC("empty", "10.96.0.20", "UDP"));
        put(in, INTAKE_SERVICES, "default/web", SVC("web", "10.96.0.30", "TCP"));
        CHECK(udp_stale_applies(model_service_get(intake_model(in), "kube-system/dns")));
        CHECK(!udp_stale_applies(model_service_get(intake_model(in), "default/web")));

        CHECK(udp_stale_reconcile(u, intake_model(in), 4, "n1") == 0);
        CHECK(calls == 1);
        /* Serving endpoints: the ready one and the terminating one that
         * still serves; not the one that does not. */
        const char *eps = "10.1.0.2:5353,10.1.0.4:5353";
        char want[160];
        snprintf(want, sizeof want, "10.96.0.10:53=%s", eps);
        CHECK(has(want));
        snprintf(want, sizeof want, "192.0.2.5:53=%s", eps);
        CHECK(has(want));
        snprintf(want, sizeof want, "203.0.113.9:53=%s", eps);
        CHECK(has(want));
        snprintf(want, sizeof want, "10.96.0.10:30053/np=%s", eps);
        CHECK(has(want));
        /* Without endpoints: reconciled with none valid. */
        CHECK(has("10.96.0.20:9000="));
        /* Nothing of the TCP service, of the TCP port, or of IPv6. */
        CHECK(n_seen == 5);

        /* A replaced version: its frontends no longer in the service are
         * checked once more with none valid; the rest keep theirs. */
        put(in, INTAKE_SERVICES, "kube-system/dns",
            "{\"kind\":\"Service\",\"metadata\":{\"name\":\"dns\",\"namespace\":\"kube-system\"},"
            "\"spec\":{\"clusterIP\":\"10.96.0.10\",\"clusterIPs\":[\"10.96.0.10\"],"
            "\"ports\":[{\"name\":\"dns\",\"protocol\":\"UDP\",\"port\":53}]}}");
        put(in, INTAKE_SERVICES, "default/empty", NULL);
        CHECK(udp_stale_reconcile(u, intake_model(in), 4, "n1") == 0);
        snprintf(want, sizeof want, "10.96.0.10:53=%s", eps);
        CHECK(has(want));
        CHECK(has("192.0.2.5:53="));
        CHECK(has("203.0.113.9:53="));
        CHECK(has("10.96.0.10:30053/np="));
        CHECK(has("10.96.0.20:9000="));
        /* The IPv6 external IP waits for the IPv6 reconcile. */
        CHECK(udp_stale_reconcile(u, intake_model(in), 6, "n1") == 0);
        CHECK(has("2001:db8::5:53="));

        /* Cleared once every family is done: then only what the model has. */
        udp_stale_clear(u);
        CHECK(udp_stale_reconcile(u, intake_model(in), 4, "n1") == 0);
        CHECK(n_seen == 1);
        calls = 0;
        CHECK(udp_stale_reconcile(u, intake_model(in), 6, "n1") == 0);
        CHECK(calls == 0);      /* nothing of the family: conntrack is not asked */
        intake_free(in);
        udp_stale_free(u);
}

int main(void) {
        TEST_RUN(test_frontends);
        TEST_DONE();
}
