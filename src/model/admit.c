/* SPDX-License-Identifier: Apache-2.0 */
#include "model/admit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "util/alloc.h"
#include "util/buf.h"

int admit_policy_set(struct admit_policy *p, enum admit_list l, char *const *values, size_t n) {
        struct admit_cidrs *a = &p->lists[l];

        free(a->cidrs);
        *a = (struct admit_cidrs) {0};
        if (n == 0)
                return 0;
        a->on = true;
        if (n == 1 && strcmp(values[0], "none") == 0)
                return 0;
        a->cidrs = xcalloc(n, sizeof *a->cidrs);
        for (size_t i = 0; i < n; i++)
                if (inet_cidr_parse(values[i], &a->cidrs[a->n++]) < 0)
                        return -EINVAL;
        return 0;
}

bool admit_policy_on(const struct admit_policy *p) {
        if (!p)
                return false;
        for (size_t l = 0; l < _ADMIT_LIST_MAX; l++)
                if (p->lists[l].on)
                        return true;
        return false;
}

void admit_policy_done(struct admit_policy *p) {
        for (size_t l = 0; l < _ADMIT_LIST_MAX; l++)
                free(p->lists[l].cidrs);
        *p = (struct admit_policy) {0};
}

/* ---- The addresses no service takes unless named one by one. ---- */

static bool is_link_local(const struct inet_addr *a) {
        if (a->family == 4)
                return a->bytes[0] == 169 && a->bytes[1] == 254;
        return a->bytes[0] == 0xfe && (a->bytes[1] & 0xc0) == 0x80;
}

static bool is_multicast(const struct inet_addr *a) {
        if (a->family == 4)
                return (a->bytes[0] & 0xf0) == 224;
        return a->bytes[0] == 0xff;
}

static bool is_api_server(const struct model *m, const struct inet_addr *a) {
        const struct svc *k = model_service_get(m, ADMIT_API_SERVER_SERVICE);
        bool found = false;

        for (size_t i = 0; k && i < k->n_cluster_ips; i++)
                if (inet_addr_equal(&k->cluster_ips[i], a))
                        return true;
        size_t n = 0;
        const struct slice **slices = model_service_slices(m, ADMIT_API_SERVER_SERVICE, &n);
        for (size_t i = 0; i < n && !found; i++) {
                const struct slice *s = slices[i];
                if (s->family != a->family)
                        continue;
                for (size_t e = 0; e < s->n_endpoints && !found; e++) {
                        struct inet_addr ea = slice_endpoint_addr(s, e);
                        found = inet_addr_equal(&ea, a);
                }
        }
        free(slices);
        return found;
}

static bool is_node(const struct model *m, const struct inet_addr *a) {
        const struct node *n = model_node(m);

        for (size_t i = 0; n && i < n->n_addrs; i++)
                if (inet_addr_equal(&n->addrs[i].addr, a))
                        return true;
        return false;
}

static bool listed_alone(const struct admit_cidrs *c, const struct inet_addr *a) {
        uint8_t full = a->family == 4 ? 32 : 128;
        for (size_t i = 0; i < c->n; i++)
                if (c->cidrs[i].prefix == full && inet_addr_equal(&c->cidrs[i].addr, a))
                        return true;
        return false;
}

/* The never-claimable kinds of address, of a (IPv4 or IPv6). */
static enum admit_reason special(const struct model *m, const struct inet_addr *a) {
        if (is_api_server(m, a))
                return ADMIT_API_SERVER;
        if (is_node(m, a))
                return ADMIT_NODE;
        if (inet_addr_is_loopback(a))
                return ADMIT_LOOPBACK;
        if (is_link_local(a))
                return ADMIT_LINK_LOCAL;
        if (is_multicast(a))
                return ADMIT_MULTICAST;
        if (inet_addr_is_unspecified(a))
                return ADMIT_UNSPECIFIED;
        return ADMIT_OK;
}

/* An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is its IPv4 address to a
 * dual-stack socket (userspace mode's frontends): the special kinds are
 * those of the IPv4 address too. */
static bool mapped_ipv4(const struct inet_addr *a, struct inet_addr *ret) {
        static const uint8_t prefix[12] = {[10] = 0xff, [11] = 0xff};
        if (a->family != 6 || memcmp(a->bytes, prefix, sizeof prefix) != 0)
                return false;
        *ret = (struct inet_addr) {.family = 4};
        memcpy(ret->bytes, a->bytes + 12, 4);
        return true;
}

enum admit_reason admit_check(const struct admit_policy *p, const struct model *m, enum admit_list l,
                              const struct inet_addr *addr) {
        const struct admit_cidrs *c = p ? &p->lists[l] : NULL;
        struct inet_addr v4;
        enum admit_reason why;

        if (!c || !c->on || listed_alone(c, addr))
                return ADMIT_OK;
        why = special(m, addr);
        if (why == ADMIT_OK && mapped_ipv4(addr, &v4))
                why = special(m, &v4);
        if (why != ADMIT_OK)
                return why;
        for (size_t i = 0; i < c->n; i++)
                if (inet_cidr_contains(&c->cidrs[i], addr))
                        return ADMIT_OK;
        return ADMIT_NOT_LISTED;
}

/* ---- A service's addresses, decided again. ---- */

/* One list as the service gave it: its admitted addresses and its refused
 * ones merged back by index. */
struct claimed {
        const struct inet_addr *admitted;
        uint32_t n_admitted;
        const struct svc_refusal *refused;      /* the list's, in index order */
        uint32_t n_refused;
};

static struct claimed claimed_of(const struct svc *s, enum admit_list l) {
        struct claimed c = {
                .admitted = l == ADMIT_EXTERNAL_IPS ? s->external_ips : s->lb_ips,
                .n_admitted = l == ADMIT_EXTERNAL_IPS ? s->n_external_ips : s->n_lb_ips,
        };
        for (uint32_t i = 0; i < s->n_refused; i++) {
                if (s->refused[i].list != l)
                        continue;
                if (!c.refused)
                        c.refused = &s->refused[i];
                c.n_refused++;
        }
        return c;
}

/* Address k of the list as given. */
static const struct inet_addr *claimed_at(const struct claimed *c, uint32_t k, uint32_t *next_admitted,
                                          uint32_t *next_refused) {
        if (*next_refused < c->n_refused && c->refused[*next_refused].index == k)
                return &c->refused[(*next_refused)++].addr;
        return &c->admitted[(*next_admitted)++];
}

struct decided {
        struct inet_addr *admitted[_ADMIT_LIST_MAX];
        uint32_t n_admitted[_ADMIT_LIST_MAX];
        struct svc_refusal *refused;
        uint32_t n_refused;
};

static void decide(const struct admit_policy *p, const struct model *m, const struct svc *s, struct decided *d) {
        uint32_t total = s->n_external_ips + s->n_lb_ips + s->n_refused;

        d->refused = total ? xcalloc(total, sizeof *d->refused) : NULL;
        for (int l = 0; l < _ADMIT_LIST_MAX; l++) {
                struct claimed c = claimed_of(s, (enum admit_list) l);
                uint32_t n = c.n_admitted + c.n_refused, na = 0, nr = 0;

                d->admitted[l] = n ? xcalloc(n, sizeof *d->admitted[l]) : NULL;
                for (uint32_t k = 0; k < n; k++) {
                        const struct inet_addr *a = claimed_at(&c, k, &na, &nr);
                        enum admit_reason why = admit_check(p, m, (enum admit_list) l, a);
                        if (why == ADMIT_OK) {
                                d->admitted[l][d->n_admitted[l]++] = *a;
                                continue;
                        }
                        d->refused[d->n_refused++] = (struct svc_refusal) {
                                .addr = *a,
                                .list = (uint8_t) l,
                                .reason = (uint8_t) why,
                                .index = k,
                        };
                }
        }
}

static bool refusal_eq(const struct svc_refusal *a, const struct svc_refusal *b) {
        return inet_addr_equal(&a->addr, &b->addr) && a->list == b->list && a->reason == b->reason &&
               a->index == b->index;
}

static bool same(const struct svc *s, const struct decided *d) {
        if (d->n_admitted[ADMIT_EXTERNAL_IPS] != s->n_external_ips || d->n_admitted[ADMIT_LB_IPS] != s->n_lb_ips ||
            d->n_refused != s->n_refused)
                return false;
        for (uint32_t i = 0; i < d->n_refused; i++)
                if (!refusal_eq(&d->refused[i], &s->refused[i]))
                        return false;
        /* The same count admitted and the same refused at the same places:
         * the admitted addresses are the same ones. */
        return true;
}

struct svc *admit_service(const struct admit_policy *p, const struct model *m, const struct svc *s) {
        struct decided d = {0};
        struct svc *ret = NULL;

        if (!admit_policy_on(p) && s->n_refused == 0)
                return NULL;
        decide(p, m, s, &d);
        if (!same(s, &d)) {
                struct svc tmp = *s;
                tmp.external_ips = d.admitted[ADMIT_EXTERNAL_IPS];
                tmp.n_external_ips = d.n_admitted[ADMIT_EXTERNAL_IPS];
                tmp.lb_ips = d.admitted[ADMIT_LB_IPS];
                tmp.n_lb_ips = d.n_admitted[ADMIT_LB_IPS];
                tmp.refused = d.refused;
                tmp.n_refused = d.n_refused;
                ret = svc_pack_copy(&tmp);
        }
        for (int l = 0; l < _ADMIT_LIST_MAX; l++)
                free(d.admitted[l]);
        free(d.refused);
        return ret;
}

bool admit_claims(const struct svc *s) {
        return s->n_external_ips + s->n_lb_ips + s->n_refused > 0;
}

static bool refused_in(const struct svc *s, const struct svc_refusal *r) {
        for (uint32_t i = 0; s && i < s->n_refused; i++)
                if (s->refused[i].list == r->list && s->refused[i].reason == r->reason &&
                    inet_addr_equal(&s->refused[i].addr, &r->addr))
                        return true;
        return false;
}

void admit_diff(const struct svc *before, const struct svc *now,
                void (*each)(const struct svc_refusal *r, void *ctx),
                void (*gone)(const struct svc_refusal *r, void *ctx), void *ctx) {
        for (uint32_t i = 0; each && now && i < now->n_refused; i++)
                if (!refused_in(before, &now->refused[i]))
                        each(&now->refused[i], ctx);
        for (uint32_t i = 0; gone && before && i < before->n_refused; i++)
                if (!refused_in(now, &before->refused[i]))
                        gone(&before->refused[i], ctx);
}

/* ---- Words. ---- */

const char *admit_list_flag(enum admit_list l) {
        return l == ADMIT_EXTERNAL_IPS ? "--external-ip-cidrs" : "--load-balancer-ip-cidrs";
}

const char *admit_list_field(enum admit_list l) {
        return l == ADMIT_EXTERNAL_IPS ? "externalIP" : "load-balancer IP";
}

const char *admit_list_label(enum admit_list l) {
        return l == ADMIT_EXTERNAL_IPS ? "externalIPs" : "loadBalancerIPs";
}

const char *admit_reason_name(enum admit_reason r) {
        static const char *const names[_ADMIT_REASON_MAX] = {
                [ADMIT_OK] = "allowed",
                [ADMIT_NOT_LISTED] = "not-allowed",
                [ADMIT_API_SERVER] = "api-server",
                [ADMIT_NODE] = "node-address",
                [ADMIT_LOOPBACK] = "loopback",
                [ADMIT_LINK_LOCAL] = "link-local",
                [ADMIT_MULTICAST] = "multicast",
                [ADMIT_UNSPECIFIED] = "unspecified",
        };
        return (unsigned) r < _ADMIT_REASON_MAX ? names[r] : "?";
}

void admit_describe(const struct svc_refusal *r, struct buf *out) {
        static const char *const what[_ADMIT_REASON_MAX] = {
                [ADMIT_API_SERVER] = "an address of the API server (" ADMIT_API_SERVER_SERVICE ")",
                [ADMIT_NODE] = "an address of this node",
                [ADMIT_LOOPBACK] = "a loopback address",
                [ADMIT_LINK_LOCAL] = "a link-local address",
                [ADMIT_MULTICAST] = "a multicast address",
                [ADMIT_UNSPECIFIED] = "the unspecified address",
        };
        const char *flag = admit_list_flag((enum admit_list) r->list);

        if (r->reason == ADMIT_NOT_LISTED)
                buf_printf(out, "not in %s", flag);
        else if (r->reason < _ADMIT_REASON_MAX && what[r->reason])
                buf_printf(out, "%s, which %s admits only when it lists it alone (/%u)", what[r->reason], flag,
                           r->addr.family == 4 ? 32 : 128);
        else
                buf_printf(out, "refused by %s", flag);
}

void admit_describe_refusal(const char *key, const struct svc_refusal *r, struct buf *out) {
        char a[INET_ADDR_STRLEN];
        buf_printf(out, "Service %s: not programming its %s %s: ", key, admit_list_field((enum admit_list) r->list),
                   inet_addr_format(&r->addr, a));
        admit_describe(r, out);
}
