/* SPDX-License-Identifier: Apache-2.0 */
#include "kube/intake.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "kube/decode.h"
#include "model/admit.h"
#include "model/model.h"
#include "model/servicecidrs.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/hmap.h"
#include "util/inet.h"
#include "util/log.h"

struct trigger {
        double time;
        uint8_t family;
};

struct intake {
        char *node_name;
        struct intake_hooks hooks;
        struct model *model;
        struct service_cidrs *service_cidrs;
        struct hmap changed;            /* service keys (owned) */
        struct trigger *triggers;
        size_t n_triggers;
        bool node_deleted;              /* the API has no Node of ours (its last version is kept) */
        const struct admit_policy *admit;       /* NULL: every claimed address admitted */
};

static void replacing(struct intake *i, const char *key) {
        const struct svc *old = model_service_get(i->model, key);
        if (old && i->hooks.replacing)
                i->hooks.replacing(i->hooks.ctx, old);
}

static void mark(struct intake *i, const char *key) {
        if (!hmap_get(&i->changed, key)) {
                char *k = strdup(key);
                if (!k)
                        abort();
                hmap_put(&i->changed, k, k);
        }
        if (i->hooks.marked)
                i->hooks.marked(i->hooks.ctx, key);
}

/* ---- The addresses services claim (model/admit.h). ---- */

struct told {
        struct intake *i;
        const char *key;
        const struct svc *now;
};

static void told_refused(const struct svc_refusal *r, void *ctx) {
        struct told *t = ctx;
        struct buf line = BUF_INIT;

        admit_describe_refusal(t->key, r, &line);
        log_warning("%s", line.data);
        buf_done(&line);
        if (t->i->hooks.refusal)
                t->i->hooks.refusal(t->i->hooks.ctx, r, true);
}

static bool admitted_in(const struct svc *s, const struct svc_refusal *r) {
        if (r->list == ADMIT_EXTERNAL_IPS)
                return inet_addr_in(&r->addr, s->external_ips, s->n_external_ips);
        return inet_addr_in(&r->addr, s->lb_ips, s->n_lb_ips);
}

static void told_admitted(const struct svc_refusal *r, void *ctx) {
        struct told *t = ctx;
        char a[INET_ADDR_STRLEN];

        if (t->now && admitted_in(t->now, r))
                log_info("Service %s: programming its %s %s, which %s admits now", t->key,
                         admit_list_field(r->list), inet_addr_format(&r->addr, a), admit_list_flag(r->list));
        if (t->i->hooks.refusal)
                t->i->hooks.refusal(t->i->hooks.ctx, r, false);
}

/* The refusals that came or went between two versions of a service. */
static void tell(struct intake *i, const char *key, const struct svc *before, const struct svc *now) {
        struct told t = {i, key, now};
        if ((before && before->n_refused) || (now && now->n_refused))
                admit_diff(before, now, told_refused, told_admitted, &t);
}

struct claimants {
        const struct model *m;
        char **keys;            /* owned copies: replacing a service frees its key */
        size_t n;
};

static void collect_claimant(const char *key, void *ctx) {
        struct claimants *c = ctx;
        const struct svc *s = model_service_get(c->m, key);
        if (!s || !admit_claims(s))
                return;
        c->keys = xrealloc(c->keys, (c->n + 1) * sizeof *c->keys);
        c->keys[c->n++] = xstrdup(key);
}

static int cmp_key(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The API server's endpoints or the Node's addresses changed: every
 * service that claims an address is decided again, in key order (the log's
 * order does not depend on the hash table's); those whose decision changed
 * are replaced and marked, as if the API had changed them. */
static unsigned readmit(struct intake *i) {
        struct claimants c = {.m = i->model};
        unsigned fx = 0;

        if (!admit_policy_on(i->admit))
                return 0;
        model_service_keys(i->model, collect_claimant, &c);
        if (c.n > 1)
                qsort(c.keys, c.n, sizeof *c.keys, cmp_key);
        for (size_t k = 0; k < c.n; k++) {
                const struct svc *s = model_service_get(i->model, c.keys[k]);
                struct svc *a = admit_service(i->admit, i->model, s);
                if (a) {
                        replacing(i, c.keys[k]);
                        tell(i, c.keys[k], s, a);
                        model_service_upsert(i->model, a);
                        mark(i, c.keys[k]);
                        fx |= INTAKE_SERVICE_CHANGE;
                }
                free(c.keys[k]);
        }
        free(c.keys);
        return fx;
}

unsigned intake_set_admission(struct intake *i, const struct admit_policy *p) {
        i->admit = p;
        return readmit(i);
}

static unsigned on_service(struct intake *i, const char *key, const json_t *obj) {
        char err[KUBE_ERRLEN];
        struct svc *s = NULL;

        if (!obj) {
                replacing(i, key);
                tell(i, key, model_service_get(i->model, key), NULL);
                if (model_service_delete(i->model, key) < 0)
                        return 0;
                mark(i, key);
                return INTAKE_SERVICE_CHANGE | (strcmp(key, ADMIT_API_SERVER_SERVICE) == 0 ? readmit(i) : 0);
        }
        int r = kube_decode_service(obj, &s, err);
        if (r < 0) {
                log_warning("Invalid Service %s: %s; %s", key, err,
                            model_service_get(i->model, key) ? "keeping its previous version" : "ignoring it");
                return 0;
        }
        replacing(i, key);
        if (r == KUBE_IGNORED) {
                log_v(2, "Ignoring Service %s: %s", key, err);
                tell(i, key, model_service_get(i->model, key), NULL);
                if (model_service_delete(i->model, key) < 0)
                        return 0;
                mark(i, key);
                return strcmp(key, ADMIT_API_SERVER_SERVICE) == 0 ? readmit(i) : 0;
        }
        struct svc *a = admit_service(i->admit, i->model, s);
        if (a) {
                svc_free(s);
                s = a;
        }
        tell(i, key, model_service_get(i->model, key), s);
        model_service_upsert(i->model, s);
        mark(i, key);
        /* The API server's cluster IP is never another service's. */
        return INTAKE_SERVICE_CHANGE | (strcmp(key, ADMIT_API_SERVER_SERVICE) == 0 ? readmit(i) : 0);
}

static void add_trigger(struct intake *i, const struct slice *s) {
        if (s->trigger_time <= 0)
                return;
        struct trigger *t = realloc(i->triggers, (i->n_triggers + 1) * sizeof *t);
        if (!t)
                abort();
        i->triggers = t;
        t[i->n_triggers++] = (struct trigger) {s->trigger_time, s->family};
}

/* A slice names its service; a slice moved to another service changes
 * both. */
static unsigned on_slice(struct intake *i, const char *key, const json_t *obj) {
        char err[KUBE_ERRLEN];
        struct slice *s = NULL;
        const struct slice *old = model_slice_get(i->model, key);
        _cleanup_free_ char *old_svc = old ? strdup(old->service_key) : NULL;

        if (old && !old_svc)
                abort();
        if (!obj) {
                if (model_slice_delete(i->model, key) < 0 || !old_svc)
                        return 0;
                mark(i, old_svc);
                return INTAKE_ENDPOINTS_CHANGE | (strcmp(old_svc, ADMIT_API_SERVER_SERVICE) == 0 ? readmit(i) : 0);
        }
        int r = kube_decode_slice(obj, &s, err);
        if (r < 0) {
                log_warning("Invalid EndpointSlice %s: %s; %s", key, err,
                            old ? "keeping its previous version" : "ignoring it");
                return 0;
        }
        if (r == KUBE_IGNORED) {
                log_v(4, "Ignoring EndpointSlice %s: %s", key, err);
                if (model_slice_delete(i->model, key) < 0 || !old_svc)
                        return 0;
                mark(i, old_svc);
                return strcmp(old_svc, ADMIT_API_SERVER_SERVICE) == 0 ? readmit(i) : 0;
        }
        _cleanup_free_ char *svc = strdup(s->service_key);
        if (!svc)
                abort();
        add_trigger(i, s);
        model_slice_upsert(i->model, s);
        if (old_svc && strcmp(old_svc, svc) != 0)
                mark(i, old_svc);
        mark(i, svc);
        /* The API server's endpoints are never another service's. */
        bool api = strcmp(svc, ADMIT_API_SERVER_SERVICE) == 0 ||
                   (old_svc && strcmp(old_svc, ADMIT_API_SERVER_SERVICE) == 0);
        return INTAKE_ENDPOINTS_CHANGE | (api ? readmit(i) : 0);
}

/* Labels (topology zone) and addresses change rules everywhere; the rest
 * of the Node does not. */
static bool node_same(const struct node *old, const struct node *n) {
        bool same = old && old->n_labels == n->n_labels && old->n_addrs == n->n_addrs &&
                    old->n_pod_cidrs == n->n_pod_cidrs &&
                    memcmp(old->addrs, n->addrs, n->n_addrs * sizeof *n->addrs) == 0 &&
                    memcmp(old->pod_cidrs, n->pod_cidrs, n->n_pod_cidrs * sizeof *n->pod_cidrs) == 0;
        for (size_t k = 0; same && k < n->n_labels; k++)
                same = strcmp(old->labels[k], n->labels[k]) == 0;
        return same;
}

static unsigned on_node(struct intake *i, const char *key, const json_t *obj) {
        char err[KUBE_ERRLEN];
        struct node *n = NULL;

        if (strcmp(key, i->node_name) != 0)
                return 0;
        if (!obj) {
                log_warning("Node %s was deleted", key);
                i->node_deleted = true;
                return INTAKE_NODE_INELIGIBLE;  /* its last addresses and labels stay */
        }
        i->node_deleted = false;
        if (kube_decode_node(obj, &n, err) < 0) {
                log_warning("Invalid Node %s: %s; keeping its previous version", key, err);
                return 0;
        }
        unsigned fx = n->leaving ? INTAKE_NODE_INELIGIBLE : INTAKE_NODE_ELIGIBLE;
        bool same = node_same(model_node(i->model), n);
        model_node_set(i->model, n);
        /* Nor are this node's addresses. */
        return same ? fx : fx | INTAKE_ALL_CHANGED | readmit(i);
}

static void log_service_cidrs(const struct intake *i) {
        size_t n_all;
        const struct inet_cidr *all = service_cidrs_all(i->service_cidrs, &n_all);
        struct buf b = BUF_INIT;
        for (size_t k = 0; k < n_all; k++) {
                char c[INET_ADDR_STRLEN + 4];
                buf_printf(&b, "%s%s", k ? "," : "", inet_cidr_format(&all[k], c));
        }
        log_v_kv(2, "ServiceCIDRs changed", KV_STR("cidrs", b.data ? b.data : ""));
        buf_done(&b);
}

/* A malformed object keeps its last good CIDRs. */
static unsigned on_service_cidr(struct intake *i, const char *key, const json_t *obj) {
        char err[KUBE_ERRLEN];
        _cleanup_free_ char *name = NULL;
        _cleanup_free_ struct inet_cidr *cidrs = NULL;
        size_t n = 0;

        if (obj && kube_decode_service_cidr(obj, &name, &cidrs, &n, err) < 0) {
                log_warning("Invalid ServiceCIDR %s: %s; keeping its previous version", key, err);
                return 0;
        }
        if (!service_cidrs_set(i->service_cidrs, key, cidrs, n))
                return 0;
        if (log_verbosity >= 2)
                log_service_cidrs(i);
        return INTAKE_SERVICE_CIDRS_CHANGED;
}

unsigned intake_object(struct intake *i, enum intake_source src, const char *key, const json_t *obj) {
        switch (src) {
        case INTAKE_SERVICES:
                return on_service(i, key, obj);
        case INTAKE_SLICES:
                return on_slice(i, key, obj);
        case INTAKE_NODE:
                return on_node(i, key, obj);
        case INTAKE_SERVICE_CIDRS:
                return on_service_cidr(i, key, obj);
        default:
                return 0;
        }
}

void intake_keys(const struct intake *i, enum intake_source src, void (*each)(const char *key, void *ctx),
                 void *ctx) {
        switch (src) {
        case INTAKE_SERVICES:
                model_service_keys(i->model, each, ctx);
                break;
        case INTAKE_SLICES:
                model_slice_keys(i->model, each, ctx);
                break;
        case INTAKE_NODE:
                /* Not a deleted one: each relist would report it gone again. */
                if (model_node(i->model) && !i->node_deleted)
                        each(model_node(i->model)->name, ctx);
                break;
        case INTAKE_SERVICE_CIDRS:
                service_cidrs_keys(i->service_cidrs, each, ctx);
                break;
        default:
                break;
        }
}

const struct model *intake_model(const struct intake *i) {
        return i->model;
}

const struct inet_cidr *intake_service_cidrs(const struct intake *i, size_t *ret_n) {
        return service_cidrs_all(i->service_cidrs, ret_n);
}

const struct hmap *intake_changed(const struct intake *i) {
        return &i->changed;
}

void intake_triggers(const struct intake *i, void (*each)(uint8_t family, double time, void *ctx), void *ctx) {
        for (size_t k = 0; k < i->n_triggers; k++)
                each(i->triggers[k].family, i->triggers[k].time, ctx);
}

static void changed_clear(struct intake *i) {
        const char *k;
        void *v;
        for (size_t it = 0; hmap_next(&i->changed, &it, &k, &v);)
                free(v);
        hmap_done(&i->changed);
}

void intake_applied(struct intake *i) {
        changed_clear(i);
        i->n_triggers = 0;
}

int intake_new(const char *node_name, const struct intake_hooks *hooks, struct intake **ret) {
        struct intake *i = calloc(1, sizeof *i);
        if (!i)
                return -ENOMEM;
        i->node_name = strdup(node_name);
        i->model = model_new();
        i->service_cidrs = service_cidrs_new();
        if (hooks)
                i->hooks = *hooks;
        if (!i->node_name || !i->model || !i->service_cidrs) {
                intake_free(i);
                return -ENOMEM;
        }
        *ret = i;
        return 0;
}

struct intake *intake_free(struct intake *i) {
        if (!i)
                return NULL;
        changed_clear(i);
        model_free(i->model);
        service_cidrs_free(i->service_cidrs);
        free(i->triggers);
        free(i->node_name);
        free(i);
        return NULL;
}
