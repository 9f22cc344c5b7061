/* SPDX-License-Identifier: Apache-2.0 */
/* The sync loop against a fake backend: when it syncs (not before every
 * initial list, never sooner than min-sync-period after the last one, a
 * retry after the sync period), and how much (partial with the changed
 * services, resync, or full when the kernel cannot be trusted). The loop
 * runs on the real event loop; nothing waits for a fixed time: each step
 * runs the loop until the fake has seen the syncs it expects, with a guard
 * timer that fails the test instead of hanging it. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

#include "config/config.h"
#include "ev/ev.h"
#include "host/host.h"
#include "model/model.h"
#include "proxy/backend.h"
#include "proxy/proxier.h"
#include "util/cleanup.h"
#include "util/hmap.h"
#include "test.h"

#define MIN_SYNC_MS 100
#define SYNC_MS 300
#define GUARD_MS 20000

struct call {
        uint8_t family;
        enum backend_sync_kind kind;
        bool all_changed;
        char changed[256];      /* sorted keys, comma-separated */
        bool has_a;             /* default/a is in the model */
        uint64_t at_ms;
};

static struct fake {
        struct backend_env env;
        struct call calls[64];
        size_t n_calls;
        size_t stop_after;      /* ev_stop() when n_calls reaches it */
        int fail_next;          /* syncs to fail */
        bool recheck_next;      /* report others' changes during the next sync */
        bool changed_in_next;   /* call env.changed() during the next sync */
        bool flushed;           /* the next check finds the kernel changed */
        size_t n_checks;
        int destroyed;
} fake;

struct fake_backend {
        struct backend base;
        struct fake *f;
};

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

static void format_changed(const struct hmap *m, char *out, size_t size) {
        const char *keys[32], *k;
        size_t n = 0;
        void *v;
        for (size_t it = 0; n < 32 && hmap_next(m, &it, &k, &v);)
                keys[n++] = k;
        qsort(keys, n, sizeof *keys, cmp_str);
        out[0] = '\0';
        for (size_t i = 0; i < n; i++) {
                strncat(out, i ? "," : "", size - strlen(out) - 1);
                strncat(out, keys[i], size - strlen(out) - 1);
        }
}

static int fake_create(const struct backend_env *env, struct backend **ret) {
        static struct fake_backend b = {.f = &fake};
        fake.env = *env;
        *ret = &b.base;
        return 0;
}

static struct backend *fake_destroy(struct backend *b) {
        (void) b;
        fake.destroyed++;
        return NULL;
}

static int fake_sync(struct backend *b, uint8_t family, const struct backend_sync *s, struct backend_stats *ret) {
        struct fake *f = BACKEND_MODE(b, struct fake_backend)->f;
        struct call *c = &f->calls[f->n_calls < 64 ? f->n_calls : 63];

        *c = (struct call) {
                .family = family,
                .kind = s->kind,
                .all_changed = s->all_changed,
                .has_a = model_service_get(s->model, "default/a") != NULL,
                .at_ms = ev_now_ms(f->env.loop),
        };
        format_changed(s->changed, c->changed, sizeof c->changed);
        f->n_calls++;
        if (f->n_calls == f->stop_after)
                ev_stop(f->env.loop);
        *ret = (struct backend_stats) {.no_local_internal = 0};
        if (f->changed_in_next) {
                f->changed_in_next = false;
                f->env.changed(f->env.core, family, "a test changed the kernel during the sync");
        }
        if (f->recheck_next) {
                f->recheck_next = false;
                ret->recheck = true;
        }
        if (f->fail_next > 0) {
                f->fail_next--;
                ret->kernel_refused = true;
                return -EIO;
        }
        return 0;
}

static void fake_check(struct backend *b) {
        struct fake *f = BACKEND_MODE(b, struct fake_backend)->f;
        f->n_checks++;
        if (f->flushed) {
                f->flushed = false;
                f->env.changed(f->env.core, 4, "a test flushed the tables");
        }
}

static bool fake_leftovers(const struct host_facts *h, bool running) {
        (void) h;
        (void) running;
        return false;
}

static int fake_remove_leftovers(const struct host_facts *h, bool running) {
        (void) h;
        (void) running;
        return 0;
}

static const struct backend_ops fake_ops = {
        .name = "fake",
        .create = fake_create,
        .destroy = fake_destroy,
        .sync = fake_sync,
        .check = fake_check,
        .leftovers = fake_leftovers,
        .remove_leftovers = fake_remove_leftovers,
};

static void on_guard(struct ev_loop *l, void *userdata) {
        *(bool *) userdata = true;
        ev_stop(l);
}

/* Runs the loop until the fake has seen n syncs in all. */
static bool run_until(struct ev_loop *l, size_t n) {
        bool expired = false;
        if (fake.n_calls >= n)
                return true;
        fake.stop_after = n;
        struct ev_timer *guard = ev_timer_add(l, GUARD_MS, on_guard, &expired);
        ev_run(l);
        if (!expired)
                ev_timer_cancel(l, guard);
        return fake.n_calls >= n;
}

static void on_stop(struct ev_loop *l, void *userdata) {
        (void) userdata;
        ev_stop(l);
}

/* Runs every timer due now: a sync requested without delay runs before a
 * timer added after it with a later due time. */
static void run_due(struct ev_loop *l) {
        ev_timer_add(l, 20, on_stop, NULL);
        ev_run(l);
}

static void object(struct proxier *p, enum intake_source src, const char *key, const char *text) {
        json_error_t e;
        json_t *j = text ? json_loads(text, 0, &e) : NULL;
        if (text && !j)
                fprintf(stderr, "bad test JSON: %s\n", e.text);
        proxier_object(p, src, key, j);
        json_decref(j);
}

static void service(struct proxier *p, const char *name, const char *ip, int port) {
        char key[64], text[512];
        snprintf(key, sizeof key, "default/%s", name);
        snprintf(text, sizeof text,
                 "{\"kind\":\"Service\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\"},"
                 "\"spec\":{\"type\":\"ClusterIP\",\"clusterIP\":\"%s\",\"clusterIPs\":[\"%s\"],"
                 "\"ports\":[{\"port\":%d,\"protocol\":\"TCP\"}]}}",
                 name, ip, ip, port);
        object(p, INTAKE_SERVICES, key, text);
}

static void node(struct proxier *p, const char *zone) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"labels\":{\"topology.kubernetes.io/zone\":\"%s\"}},"
                 "\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.1\"}]}}",
                 zone);
        object(p, INTAKE_NODE, "n1", text);
}

static const struct call *last(void) {
        return fake.n_calls ? &fake.calls[fake.n_calls - 1] : NULL;
}

static void test_sync_loop(void) {
        struct ev_loop *l = ev_loop_new();
        struct kproxy_config c;
        struct host_facts h = {0};
        struct proxier *p = NULL;
        char *args[] = {"--iptables-min-sync-period=100ms", "--iptables-sync-period=300ms"};
        char **rest = NULL;
        size_t n_rest = 0;
        const struct call *k;

        memset(&fake, 0, sizeof fake);
        CHECK(config_init(&c) == 0);
        CHECK(config_parse_args(&c, (int) ELEMENTSOF(args), args, NULL, 0, NULL, &rest, &n_rest) == 0);
        free(rest);
        CHECK(config_finish(&c) == 0);
        CHECK(config_mode_sync(&c)->min_sync_period_ms == MIN_SYNC_MS);
        struct proxier_opts o = {.config = &c, .backend = &fake_ops, .host = &h, .node_name = "n1"};
        CHECK(proxier_new(l, &o, &p) == 0);
        if (!p)
                goto out;

        /* Nothing is written before every initial list has completed. */
        service(p, "a", "10.96.0.1", 80);
        node(p, "z1");
        proxier_synced(p, INTAKE_SERVICES);
        proxier_synced(p, INTAKE_NODE);
        run_due(l);
        CHECK(fake.n_calls == 0);
        proxier_synced(p, INTAKE_SLICES);

        /* The first sync trusts nothing and counts everything anew. */
        CHECK(run_until(l, 1));
        k = last();
        CHECK(k->family == 4 && k->kind == BACKEND_SYNC_FULL && k->all_changed && k->has_a);
        CHECK_STREQ(k->changed, "default/a");
        CHECK(proxier_syncs(p) == 1);

        /* Two changes in a row: one partial sync with both, no sooner
         * than min-sync-period after the last one began. */
        uint64_t prev = k->at_ms;
        service(p, "b", "10.96.0.2", 80);
        service(p, "a", "10.96.0.1", 81);
        CHECK(run_until(l, 2));
        k = last();
        CHECK(k->kind == BACKEND_SYNC_PARTIAL && !k->all_changed);
        CHECK_STREQ(k->changed, "default/a,default/b");
        CHECK(k->at_ms >= prev + MIN_SYNC_MS);

        /* An invalid version keeps the previous one; nothing to sync. */
        object(p, INTAKE_SERVICES, "default/a",
               "{\"kind\":\"Service\",\"metadata\":{\"name\":\"a\",\"namespace\":\"default\"},"
               "\"spec\":{\"clusterIP\":\"10.96.0.1\",\"ports\":[{\"port\":\"http\"}]}}");
        run_due(l);
        CHECK(fake.n_calls == 2);

        /* A failed sync is retried after the sync period, trusting
         * nothing, with the changes it did not apply. */
        fake.fail_next = 1;
        prev = last()->at_ms;
        object(p, INTAKE_SERVICES, "default/b", NULL);
        CHECK(run_until(l, 3));
        CHECK(last()->kind == BACKEND_SYNC_PARTIAL);
        CHECK(proxier_failures(p) == 1 && proxier_syncs(p) == 2);
        prev = last()->at_ms;
        CHECK(run_until(l, 4));
        k = last();
        CHECK(k->kind == BACKEND_SYNC_FULL && k->at_ms >= prev + SYNC_MS);
        CHECK_STREQ(k->changed, "default/b");
        CHECK(proxier_syncs(p) == 3);

        /* A Node label change: every service, trusting what was written. */
        node(p, "z2");
        CHECK(run_until(l, 5));
        k = last();
        CHECK(k->kind == BACKEND_SYNC_RESYNC && k->all_changed);
        /* The same Node again changes nothing. */
        node(p, "z2");
        run_due(l);
        CHECK(fake.n_calls == 5);

        /* The periodic check finds the kernel changed: a full sync. */
        fake.flushed = true;
        CHECK(run_until(l, 6));
        k = last();
        CHECK(fake.n_checks >= 1 && k->kind == BACKEND_SYNC_FULL && !k->all_changed);

        /* Others committed during a full sync: it succeeds, and another
         * full sync checks again a sync period later. */
        fake.recheck_next = true;
        fake.env.changed(fake.env.core, 4, "a test changed the kernel");
        CHECK(run_until(l, 7));
        CHECK(last()->kind == BACKEND_SYNC_FULL);
        prev = last()->at_ms;
        CHECK(run_until(l, 8));
        k = last();
        CHECK(k->kind == BACKEND_SYNC_FULL && k->at_ms >= prev + SYNC_MS);

        /* The kernel changed while a partial sync ran: a full sync follows
         * (not the hourly one, which would trip the guard). */
        fake.changed_in_next = true;
        service(p, "c", "10.96.0.3", 80);
        CHECK(run_until(l, 9));
        CHECK(last()->kind == BACKEND_SYNC_PARTIAL);
        CHECK_STREQ(last()->changed, "default/c");
        CHECK(run_until(l, 10));
        k = last();
        CHECK(k->kind == BACKEND_SYNC_FULL);
        CHECK_STREQ(k->changed, "");
out:
        proxier_free(p);
        CHECK(fake.destroyed == 1);
        config_done(&c);
        ev_loop_free(l);
}

/* Dual-stack: each family is synced in turn; a failure in the first stops
 * the sync, and the retry trusts neither. */
static void test_families(void) {
        struct ev_loop *l = ev_loop_new();
        struct kproxy_config c;
        struct host_facts h = {0};
        struct proxier *p = NULL;
        char *args[] = {"--iptables-min-sync-period=0", "--iptables-sync-period=100ms"};
        char **rest = NULL;
        size_t n_rest = 0;

        memset(&fake, 0, sizeof fake);
        CHECK(config_init(&c) == 0);
        CHECK(config_parse_args(&c, (int) ELEMENTSOF(args), args, NULL, 0, NULL, &rest, &n_rest) == 0);
        free(rest);
        CHECK(config_finish(&c) == 0);
        struct proxier_opts o = {.config = &c, .backend = &fake_ops, .host = &h, .node_name = "n1", .ipv6 = true};
        CHECK(proxier_new(l, &o, &p) == 0);
        if (!p)
                goto out;
        CHECK(fake.env.n_families == 2 && fake.env.families[0] == 4 && fake.env.families[1] == 6);
        proxier_synced(p, INTAKE_SERVICES);
        proxier_synced(p, INTAKE_SLICES);
        proxier_synced(p, INTAKE_NODE);
        CHECK(run_until(l, 2));
        CHECK(fake.calls[0].family == 4 && fake.calls[1].family == 6);
        CHECK(fake.calls[0].kind == BACKEND_SYNC_FULL && fake.calls[1].kind == BACKEND_SYNC_FULL);

        fake.fail_next = 1;
        service(p, "a", "10.96.0.1", 80);
        CHECK(run_until(l, 3));
        CHECK(last()->family == 4 && proxier_failures(p) == 1);
        CHECK(run_until(l, 5));
        CHECK(fake.calls[3].family == 4 && fake.calls[3].kind == BACKEND_SYNC_FULL);
        /* IPv6 was not synced at all, so it is trusted still: a resync. */
        CHECK(fake.calls[4].family == 6 && fake.calls[4].kind == BACKEND_SYNC_RESYNC);
        CHECK_STREQ(fake.calls[4].changed, "default/a");
out:
        proxier_free(p);
        config_done(&c);
        ev_loop_free(l);
}

int main(void) {
        TEST_RUN(test_sync_loop);
        TEST_RUN(test_families);
        TEST_DONE();
}
