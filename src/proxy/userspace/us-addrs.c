/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Service addresses on kube-proxy0 (us-addrs.h): added before a frontend
 * binds to one, removed once no service wants it.
 */
#include "proxy/userspace/us-addrs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/ifaddr.h"
#include "userspace/plan.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/inet.h"
#include "util/log.h"

struct us_held_addr {
        char key[INET_ADDR_STRLEN];
        struct inet_addr a;
        uint32_t refs;                  /* services that want it */
};

/* The addresses one service wants, in one family. */
struct us_svc_addrs {
        char *key;                      /* the service's */
        struct inet_addr *a;
        size_t n;
};

int us_addrs_init(struct us_addrs *a) {
        *a = (struct us_addrs) {
                .held = HMAP_INIT_KEY_ARRAY(struct us_held_addr, key),
                .svc = {HMAP_INIT_KEYED(struct us_svc_addrs, key), HMAP_INIT_KEYED(struct us_svc_addrs, key)},
        };
        int r = ifaddr_open(US_LINK, &a->ia);
        if (r < 0)
                return log_error_errno(r, "Failed to open rtnetlink");
        return 0;
}

static void svc_addrs_free(struct us_svc_addrs *sa) {
        free(sa->key);
        free(sa->a);
        free(sa);
}

static void svc_clear(struct us_addrs *a, uint8_t family) {
        struct hmap *m = &a->svc[family == 6];
        const char *k;
        void *v;

        for (size_t i = 0; hmap_next(m, &i, &k, &v);)
                svc_addrs_free(v);
        hmap_done(m);
}

void us_addrs_done(struct us_addrs *a) {
        const char *k;
        void *v;

        for (size_t i = 0; hmap_next(&a->held, &i, &k, &v);)
                free(v);
        hmap_done(&a->held);
        svc_clear(a, 4);
        svc_clear(a, 6);
        ifaddr_close(a->ia);
        a->ia = NULL;
}

int us_addrs_link_ensure(struct us_addrs *a) {
        int r = ifaddr_link_ensure(a->ia);
        if (r < 0)
                return log_error_errno(r, "Failed to set up interface " US_LINK);
        return 0;
}

bool us_addrs_link_present(struct us_addrs *a) {
        struct inet_addr *have = NULL;
        size_t n = 0;
        int r = ifaddr_list(a->ia, &have, &n);
        free(have);
        return r != -ENODEV;
}

/* One more service wants addr: added to the interface if it is the first. */
static int addr_ref(struct us_addrs *a, const struct inet_addr *addr) {
        char key[INET_ADDR_STRLEN];
        struct us_held_addr *h;

        inet_addr_format(addr, key);
        h = hmap_get(&a->held, key);
        if (!h) {
                int r = ifaddr_add(a->ia, addr);
                if (r < 0)
                        return log_error_errno(r, "Failed to add service address %s to " US_LINK, key);
                h = xcalloc(1, sizeof *h);
                memcpy(h->key, key, sizeof key);
                h->a = *addr;
                hmap_put(&a->held, h->key, h);
        }
        h->refs++;
        return 0;
}

static void addr_unref(struct us_addrs *a, const struct inet_addr *addr) {
        char key[INET_ADDR_STRLEN];
        struct us_held_addr *h = hmap_get(&a->held, inet_addr_format(addr, key));

        if (h && h->refs > 0)
                h->refs--;
}

void us_addrs_drop(struct us_addrs *a, uint8_t family, const char *key) {
        struct us_svc_addrs *sa = hmap_remove(&a->svc[family == 6], key);

        if (!sa)
                return;
        for (size_t i = 0; i < sa->n; i++)
                addr_unref(a, &sa->a[i]);
        svc_addrs_free(sa);
}

/* The plan's addresses (sorted by address, then service) referenced, and
 * remembered per service. */
int us_addrs_take(struct us_addrs *a, uint8_t family, const struct userspace_plan *pl) {
        struct hmap *m = &a->svc[family == 6];
        int err = 0;

        for (size_t i = 0; i < pl->n_addrs; i++) {
                const struct userspace_addr *ua = &pl->addrs[i];
                struct us_svc_addrs *sa = hmap_get(m, ua->svc_key);
                if (!sa) {
                        sa = xcalloc(1, sizeof *sa);
                        sa->key = xstrdup(ua->svc_key);
                        hmap_put(m, sa->key, sa);
                }
                sa->a = xrealloc(sa->a, (sa->n + 1) * sizeof *sa->a);
                sa->a[sa->n++] = ua->a;
                int r = addr_ref(a, &ua->a);
                if (r < 0 && !err)
                        err = r;
        }
        return err;
}

int us_addrs_prune(struct us_addrs *a, uint8_t family) {
        const char *k;
        void *v;
        int err = 0;

        for (size_t i = 0; hmap_next(&a->held, &i, &k, &v);) {
                struct us_held_addr *h = v;
                if (h->a.family != family || h->refs > 0)
                        continue;
                int r = ifaddr_del(a->ia, &h->a);
                if (r < 0) {
                        log_error_errno(r, "Failed to remove address %s from " US_LINK, h->key);
                        if (!err)
                                err = r;
                        continue;
                }
                hmap_remove(&a->held, h->key);
                free(h);
        }
        return err;
}

int us_addrs_read(struct us_addrs *a, uint8_t family) {
        struct inet_addr *have = NULL;
        size_t n = 0;
        const char *k;
        void *v;
        int r;

        for (size_t i = 0; hmap_next(&a->held, &i, &k, &v);) {
                struct us_held_addr *h = v;
                if (h->a.family == family) {
                        hmap_remove(&a->held, h->key);
                        free(h);
                }
        }
        r = ifaddr_list(a->ia, &have, &n);
        if (r < 0)
                return log_error_errno(r, "Failed to list the addresses of " US_LINK);
        for (size_t i = 0; i < n; i++) {
                if (have[i].family != family)
                        continue;
                struct us_held_addr *h = xcalloc(1, sizeof *h);
                inet_addr_format(&have[i], h->key);
                h->a = have[i];
                hmap_put(&a->held, h->key, h);
        }
        free(have);
        return 0;
}

void us_addrs_forget(struct us_addrs *a, uint8_t family) {
        const char *k;
        void *v;

        svc_clear(a, family);
        for (size_t i = 0; hmap_next(&a->held, &i, &k, &v);) {
                struct us_held_addr *h = v;
                if (h->a.family == family)
                        h->refs = 0;
        }
}

void us_addrs_describe(const struct us_addrs *a, struct buf *out) {
        const char *k;
        void *v;

        for (size_t i = 0; hmap_next(&a->held, &i, &k, &v);)
                buf_printf(out, "address %s\n", k);
}
