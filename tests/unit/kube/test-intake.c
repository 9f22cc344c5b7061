/* SPDX-License-Identifier: Apache-2.0 */
/* API objects into the model: what each one means (enum intake_effect),
 * which services it marks, what a malformed one leaves in place, and what
 * the hooks see. */
#include <jansson.h>
#include <stdlib.h>

#include "kube/intake.h"
#include "model/admit.h"
#include "model/model.h"
#include "util/hmap.h"
#include "util/inet.h"
#include "test.h"

struct seen {
        char replaced[256];     /* keys of replaced versions, in order */
        char marked[256];       /* keys marked, in order */
};

static void append(char *out, size_t size, const char *s) {
        strncat(out, *out ? "," : "", size - strlen(out) - 1);
        strncat(out, s, size - strlen(out) - 1);
}

static void on_replacing(void *ctx, const struct svc *old) {
        struct seen *s = ctx;
        append(s->replaced, sizeof s->replaced, old->key);
}

static void on_marked(void *ctx, const char *key) {
        struct seen *s = ctx;
        append(s->marked, sizeof s->marked, key);
}

static unsigned put(struct intake *i, enum intake_source src, const char *key, const char *text) {
        json_error_t e;
        json_t *j = text ? json_loads(text, 0, &e) : NULL;
        if (text && !j)
                fprintf(stderr, "bad test JSON: %s\n", e.text);
        unsigned fx = intake_object(i, src, key, j);
        json_decref(j);
        return fx;
}

#define SVC(name, port)                                                                                         \
        "{\"kind\":\"Service\",\"metadata\":{\"name\":\"" name "\",\"namespace\":\"default\"},"               \
        "\"spec\":{\"clusterIP\":\"10.96.0.1\",\"clusterIPs\":[\"10.96.0.1\"],\"ports\":[{\"port\":" port "}]}}"

#define SLICE(name, svc)                                                                                        \
        "{\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":\"" name "\",\"namespace\":\"default\","          \
        "\"labels\":{\"kubernetes.io/service-name\":\"" svc "\"},"                                             \
        "\"annotations\":{\"endpoints.kubernetes.io/last-change-trigger-time\":\"2026-11-27T09:00:00Z\"}},"   \
        "\"addressType\":\"IPv4\",\"endpoints\":[{\"addresses\":[\"10.1.0.1\"]}],\"ports\":[{\"port\":80}]}"

#define NODE(name, zone)                                                                                        \
        "{\"kind\":\"Node\",\"metadata\":{\"name\":\"" name "\","                                              \
        "\"labels\":{\"topology.kubernetes.io/zone\":\"" zone "\"}},"                                          \
        "\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.1\"}]}}"

static void changed_keys(const struct intake *i, char *out, size_t size) {
        const char *k;
        void *v;
        char *keys[16];
        size_t n = 0;
        for (size_t it = 0; n < 16 && hmap_next(intake_changed(i), &it, &k, &v);)
                keys[n++] = (char *) k;
        /* Sorted, for a stable comparison. */
        for (size_t a = 0; a < n; a++)
                for (size_t b = a + 1; b < n; b++)
                        if (strcmp(keys[a], keys[b]) > 0) {
                                char *t = keys[a];
                                keys[a] = keys[b];
                                keys[b] = t;
                        }
        out[0] = '\0';
        for (size_t a = 0; a < n; a++)
                append(out, size, keys[a]);
}

static void test_services(void) {
        struct seen seen = {{0}};
        struct intake_hooks hooks = {on_replacing, on_marked, &seen};
        struct intake *i = NULL;
        char keys[256];

        CHECK(intake_new("n1", &hooks, &i) == 0);
        if (!i)
                return;
        CHECK(put(i, INTAKE_SERVICES, "default/a", SVC("a", "80")) == INTAKE_SERVICE_CHANGE);
        CHECK_STREQ(seen.replaced, "");
        CHECK_STREQ(seen.marked, "default/a");
        /* A new version: the old one is seen before it goes. */
        CHECK(put(i, INTAKE_SERVICES, "default/a", SVC("a", "81")) == INTAKE_SERVICE_CHANGE);
        CHECK_STREQ(seen.replaced, "default/a");
        CHECK(model_service_get(intake_model(i), "default/a")->ports[0].port == 81);
        /* A malformed one changes nothing, and the good one stays. */
        CHECK(put(i, INTAKE_SERVICES, "default/a", SVC("a", "\"http\"")) == 0);
        CHECK(model_service_get(intake_model(i), "default/a")->ports[0].port == 81);
        CHECK_STREQ(seen.replaced, "default/a");
        /* So does a malformed new one, which is not taken in at all. */
        CHECK(put(i, INTAKE_SERVICES, "default/b", SVC("b", "-1")) == 0);
        CHECK(!model_service_get(intake_model(i), "default/b"));
        changed_keys(i, keys, sizeof keys);
        CHECK_STREQ(keys, "default/a");
        intake_applied(i);
        changed_keys(i, keys, sizeof keys);
        CHECK_STREQ(keys, "");
        /* Deleted: marked, and gone from the model; a second delete is nothing. */
        CHECK(put(i, INTAKE_SERVICES, "default/a", NULL) == INTAKE_SERVICE_CHANGE);
        CHECK(!model_service_get(intake_model(i), "default/a"));
        CHECK(put(i, INTAKE_SERVICES, "default/a", NULL) == 0);
        changed_keys(i, keys, sizeof keys);
        CHECK_STREQ(keys, "default/a");
        intake_free(i);
}

static void on_trigger(uint8_t family, double time, void *ctx) {
        (void) time;
        *(unsigned *) ctx += family;
}

static void test_slices(void) {
        struct seen seen = {{0}};
        struct intake_hooks hooks = {on_replacing, on_marked, &seen};
        struct intake *i = NULL;
        char keys[256];
        unsigned triggers = 0;

        CHECK(intake_new("n1", &hooks, &i) == 0);
        if (!i)
                return;
        CHECK(put(i, INTAKE_SLICES, "default/s1", SLICE("s1", "a")) == INTAKE_ENDPOINTS_CHANGE);
        CHECK(model_n_slices(intake_model(i)) == 1);
        intake_triggers(i, on_trigger, &triggers);
        CHECK(triggers == 4);
        intake_applied(i);
        triggers = 0;
        intake_triggers(i, on_trigger, &triggers);
        CHECK(triggers == 0);
        /* A slice moved to another service changes both. */
        CHECK(put(i, INTAKE_SLICES, "default/s1", SLICE("s1", "b")) == INTAKE_ENDPOINTS_CHANGE);
        changed_keys(i, keys, sizeof keys);
        CHECK_STREQ(keys, "default/a,default/b");
        intake_applied(i);
        /* Malformed: the previous version stays. */
        CHECK(put(i, INTAKE_SLICES, "default/s1",
                  "{\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":\"s1\",\"namespace\":\"default\","
                  "\"labels\":{\"kubernetes.io/service-name\":\"b\"}},\"addressType\":\"IPv4\","
                  "\"endpoints\":[{\"addresses\":[\"not-an-ip\"]}]}") == 0);
        CHECK(model_n_slices(intake_model(i)) == 1);
        CHECK(put(i, INTAKE_SLICES, "default/s1", NULL) == INTAKE_ENDPOINTS_CHANGE);
        CHECK(model_n_slices(intake_model(i)) == 0);
        changed_keys(i, keys, sizeof keys);
        CHECK_STREQ(keys, "default/b");
        intake_free(i);
}

static void count_key(const char *key, void *ctx) {
        (void) key;
        (*(int *) ctx)++;
}

static void test_node(void) {
        struct intake *i = NULL;
        int n = 0;

        CHECK(intake_new("n1", NULL, &i) == 0);
        if (!i)
                return;
        /* Another node's object is none of ours. */
        CHECK(put(i, INTAKE_NODE, "n2", NODE("n2", "z1")) == 0);
        CHECK(put(i, INTAKE_NODE, "n1", NODE("n1", "z1")) == (INTAKE_NODE_ELIGIBLE | INTAKE_ALL_CHANGED));
        CHECK(put(i, INTAKE_NODE, "n1", NODE("n1", "z1")) == INTAKE_NODE_ELIGIBLE);
        CHECK(put(i, INTAKE_NODE, "n1", NODE("n1", "z2")) == (INTAKE_NODE_ELIGIBLE | INTAKE_ALL_CHANGED));
        /* Deleted: ineligible, its last version kept for the rules, but
         * not reported as held (a relist would delete it again). */
        CHECK(put(i, INTAKE_NODE, "n1", NULL) == INTAKE_NODE_INELIGIBLE);
        CHECK(model_node(intake_model(i)) != NULL);
        intake_keys(i, INTAKE_NODE, count_key, &n);
        CHECK(n == 0);
        CHECK(put(i, INTAKE_NODE, "n1", NODE("n1", "z2")) == INTAKE_NODE_ELIGIBLE);
        intake_keys(i, INTAKE_NODE, count_key, &n);
        CHECK(n == 1);
        intake_free(i);
}

/* The allow-lists in the intake: a service is decided as it comes, and
 * again when the API server's endpoints or the Node's addresses change;
 * the refusals' hook sees each come and go once. */
struct refusals {
        int now, came, went;
};

static void on_refusal(void *ctx, const struct svc_refusal *r, bool refused) {
        struct refusals *f = ctx;
        (void) r;
        f->now += refused ? 1 : -1;
        *(refused ? &f->came : &f->went) += 1;
}

#define CLAIMANT(name, ext)                                                                                     \
        "{\"kind\":\"Service\",\"metadata\":{\"name\":\"" name "\",\"namespace\":\"shop\"},"                  \
        "\"spec\":{\"clusterIP\":\"10.96.7.7\",\"clusterIPs\":[\"10.96.7.7\"],\"ports\":[{\"port\":80}],"      \
        "\"externalIPs\":[" ext "]}}"

#define API_SLICE(ip)                                                                                           \
        "{\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":\"kubernetes\",\"namespace\":\"default\","       \
        "\"labels\":{\"kubernetes.io/service-name\":\"kubernetes\"}},\"addressType\":\"IPv4\","                 \
        "\"endpoints\":[{\"addresses\":[\"" ip "\"]}],\"ports\":[{\"name\":\"https\",\"port\":6443}]}"

static uint32_t n_ext(const struct intake *i, const char *key) {
        const struct svc *s = model_service_get(intake_model(i), key);
        return s ? s->n_external_ips : 99;
}

static void test_admission(void) {
        struct refusals f = {0};
        struct intake_hooks hooks = {.refusal = on_refusal, .ctx = &f};
        struct intake *i = NULL;
        struct admit_policy p = {0};
        char *cidrs[] = {"10.0.0.0/8"};
        char changed[256];

        CHECK(admit_policy_set(&p, ADMIT_EXTERNAL_IPS, cidrs, 1) == 0);
        CHECK(intake_new("n1", &hooks, &i) == 0);
        if (!i)
                return;
        intake_set_admission(i, &p);
        /* Services first, as a start lists them: 10.0.0.1 is nobody's yet. */
        CHECK(put(i, INTAKE_SERVICES, "shop/a", CLAIMANT("a", "\"10.0.0.1\",\"203.0.113.1\"")) ==
              INTAKE_SERVICE_CHANGE);
        CHECK(put(i, INTAKE_SERVICES, "shop/b", CLAIMANT("b", "\"10.0.0.2\"")) == INTAKE_SERVICE_CHANGE);
        CHECK(put(i, INTAKE_SERVICES, "shop/c", SVC("c", "80")) == INTAKE_SERVICE_CHANGE);
        CHECK(n_ext(i, "shop/a") == 1 && n_ext(i, "shop/b") == 1);
        CHECK(f.now == 1 && f.came == 1);
        intake_applied(i);

        /* The API server turns out to be 10.0.0.1: shop/a loses it, and only
         * shop/a (with the API server's own service) is marked. */
        CHECK(put(i, INTAKE_SLICES, "default/kubernetes", API_SLICE("10.0.0.1")) ==
              (INTAKE_ENDPOINTS_CHANGE | INTAKE_SERVICE_CHANGE));
        CHECK(n_ext(i, "shop/a") == 0 && n_ext(i, "shop/b") == 1);
        changed_keys(i, changed, sizeof changed);
        CHECK_STREQ(changed, "default/kubernetes,shop/a");
        CHECK(f.now == 2 && f.came == 2);
        intake_applied(i);

        /* An unchanged API server decides nothing again. */
        CHECK(put(i, INTAKE_SLICES, "default/kubernetes", API_SLICE("10.0.0.1")) == INTAKE_ENDPOINTS_CHANGE);
        intake_applied(i);

        /* The Node owns 10.0.0.2: shop/b loses it. */
        const char *node = "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"},\"status\":{\"addresses\":"
                           "[{\"type\":\"InternalIP\",\"address\":\"10.0.0.2\"}]}}";
        CHECK(put(i, INTAKE_NODE, "n1", node) ==
              (INTAKE_NODE_ELIGIBLE | INTAKE_ALL_CHANGED | INTAKE_SERVICE_CHANGE));
        CHECK(n_ext(i, "shop/b") == 0);
        changed_keys(i, changed, sizeof changed);
        CHECK_STREQ(changed, "shop/b");
        CHECK(f.now == 3);
        intake_applied(i);

        /* The API server moves away: shop/a has its address again, at its place. */
        CHECK(put(i, INTAKE_SLICES, "default/kubernetes", API_SLICE("10.0.0.9")) ==
              (INTAKE_ENDPOINTS_CHANGE | INTAKE_SERVICE_CHANGE));
        const struct svc *a = model_service_get(intake_model(i), "shop/a");
        CHECK(a && a->n_external_ips == 1 && a->n_refused == 1 && a->refused[0].index == 1);
        CHECK(f.now == 2 && f.went == 1);

        /* Deleted services take their refusals with them. */
        CHECK(put(i, INTAKE_SERVICES, "shop/a", NULL) == INTAKE_SERVICE_CHANGE);
        CHECK(put(i, INTAKE_SERVICES, "shop/b", NULL) == INTAKE_SERVICE_CHANGE);
        CHECK(f.now == 0);
        intake_free(i);

        /* Lists first, the decision after (render and explain's snapshot):
         * what is held is decided at once and marked. */
        f = (struct refusals) {0};
        CHECK(intake_new("n1", &hooks, &i) == 0);
        if (!i)
                return;
        CHECK(put(i, INTAKE_SERVICES, "shop/a", CLAIMANT("a", "\"10.0.0.1\",\"203.0.113.1\"")) ==
              INTAKE_SERVICE_CHANGE);
        CHECK(put(i, INTAKE_SERVICES, "shop/c", SVC("c", "80")) == INTAKE_SERVICE_CHANGE);
        intake_applied(i);
        CHECK(n_ext(i, "shop/a") == 2);
        CHECK(intake_set_admission(i, &p) == INTAKE_SERVICE_CHANGE);
        CHECK(n_ext(i, "shop/a") == 1 && f.now == 1);
        changed_keys(i, changed, sizeof changed);
        CHECK_STREQ(changed, "shop/a");
        CHECK(intake_set_admission(i, &p) == 0);       /* decided already */
        intake_free(i);
        admit_policy_done(&p);
}

static void test_service_cidrs(void) {
        struct intake *i = NULL;
        size_t n;
        const char *cidr = "{\"kind\":\"ServiceCIDR\",\"metadata\":{\"name\":\"kubernetes\"},"
                           "\"spec\":{\"cidrs\":[\"10.96.0.0/16\"]}}";

        CHECK(intake_new("n1", NULL, &i) == 0);
        if (!i)
                return;
        CHECK(put(i, INTAKE_SERVICE_CIDRS, "kubernetes", cidr) == INTAKE_SERVICE_CIDRS_CHANGED);
        CHECK(intake_service_cidrs(i, &n) && n == 1);
        CHECK(put(i, INTAKE_SERVICE_CIDRS, "kubernetes", cidr) == 0);
        CHECK(put(i, INTAKE_SERVICE_CIDRS, "kubernetes",
                  "{\"kind\":\"ServiceCIDR\",\"metadata\":{\"name\":\"kubernetes\"},\"spec\":{\"cidrs\":[\"x\"]}}") == 0);
        intake_service_cidrs(i, &n);
        CHECK(n == 1);
        CHECK(put(i, INTAKE_SERVICE_CIDRS, "kubernetes", NULL) == INTAKE_SERVICE_CIDRS_CHANGED);
        intake_service_cidrs(i, &n);
        CHECK(n == 0);
        intake_free(i);
}

int main(void) {
        TEST_RUN(test_services);
        TEST_RUN(test_slices);
        TEST_RUN(test_node);
        TEST_RUN(test_service_cidrs);
        TEST_RUN(test_admission);
        TEST_DONE();
}
