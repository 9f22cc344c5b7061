/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One list of each resource the proxy watches, on an event loop of its
 * own that stops once every list has been reported (KUBE_EVENT_SYNCED) or
 * the time is up. What the daemon would have decoded, the intake decodes
 * and validates: a malformed object is skipped with the same warning.
 */
#include "cli/snapshot.h"

#include <errno.h>
#include <stdio.h>

#include "config/config.h"
#include "ev/ev.h"
#include "kube/client.h"
#include "kube/intake.h"
#include "kube/kubeconfig.h"
#include "kube/sources.h"
#include "util/cleanup.h"
#include "util/log.h"

struct snapshot {
        struct ev_loop *loop;
        struct intake *intake;
        unsigned synced;                /* bits of enum intake_source */
        unsigned wanted;
        bool timed_out;
};

struct source {
        struct snapshot *s;
        enum intake_source src;
};

static void on_event(void *userdata, enum kube_event ev, const char *key, const json_t *obj) {
        struct source *src = userdata;
        struct snapshot *s = src->s;
        if (ev == KUBE_EVENT_SYNCED) {
                s->synced |= 1u << src->src;
                if (s->synced == s->wanted)
                        ev_stop(s->loop);
                return;
        }
        intake_object(s->intake, src->src, key, ev == KUBE_EVENT_UPSERT ? obj : NULL);
}

static void on_timeout(struct ev_loop *l, void *userdata) {
        struct snapshot *s = userdata;
        s->timed_out = true;
        ev_stop(l);
}

int cli_snapshot(const struct kproxy_config *c, const char *node, const struct admit_policy *admit,
                 uint64_t timeout_ms, struct intake **ret) {
        _cleanup_(kube_conn_done) struct kube_conn conn = {0};
        struct snapshot s = {0};
        struct kube_client *client = NULL;
        struct source sources[_INTAKE_SOURCE_MAX];
        char err[KUBE_CONN_ERRLEN], field[300];
        int r;

        r = kube_conn_resolve(c->kubeconfig, c->master, &conn, err);
        if (r < 0) {
                log_error("Cannot configure the API connection: %s", err);
                return r;
        }
        s.loop = ev_loop_new();
        if (!s.loop)
                return -ENOMEM;
        r = intake_new(node, NULL, &s.intake);
        if (r < 0)
                goto out;
        r = kube_client_new(s.loop, &conn, &client);
        if (r < 0)
                goto out;
        kube_client_set_rate(client, c->qps, c->burst);
        r = kube_client_set_content_type(client, c->content_type, c->accept_content_types);
        if (r < 0)
                goto out;
        struct kube_watch_opts opts[_INTAKE_SOURCE_MAX];
        kube_sources(node, 0, NULL, field, opts);
        for (int i = 0; i < _INTAKE_SOURCE_MAX; i++) {
                sources[i] = (struct source) {&s, (enum intake_source) i};
                s.wanted |= 1u << i;
                r = kube_watch_start(client, &opts[i], on_event, &sources[i], NULL);
                if (r < 0)
                        goto out;
        }
        ev_timer_add(s.loop, timeout_ms, on_timeout, &s);
        r = ev_run(s.loop);
        if (r >= 0 && s.timed_out) {
                log_error("The API server did not answer every list within %llu ms", (unsigned long long) timeout_ms);
                r = -ETIMEDOUT;
        }
        if (r >= 0) {
                /* Decided once every list is in, as render decides a
                 * state's files: each refusal logged once, in key order. */
                intake_set_admission(s.intake, admit);
                *ret = s.intake;
                s.intake = NULL;
                r = 0;
        }
out:
        kube_client_free(client);
        intake_free(s.intake);
        ev_loop_free(s.loop);
        return r;
}
