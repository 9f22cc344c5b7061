/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket load balancing's loader and map writer (see sockbpf.h). The
 * programs come embedded as a libbpf skeleton generated at build time from
 * sock.bpf.c: no compiler at run time.
 */
#include "sockbpf/sockbpf.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sock.skel.h"
#include "sockbpf/maps.h"
#include "util/cleanup.h"
#include "util/log.h"

/* The maps, by the name they are pinned under. */
static const char *const map_names[] = {
        "socklb_services", "socklb_slots", "socklb_revnat", "socklb_affinity", "socklb_translations",
};

/* The hooks, by the name of their pinned link; in the order of progs(). */
static const char *const link_names[] = {
        "connect4", "connect6", "sendmsg4", "sendmsg6", "recvmsg4", "recvmsg6", "getpeername4", "getpeername6",
};
#define N_LINKS (sizeof link_names / sizeof *link_names)

/* Writes held for bpf_map_update_batch() (sockbpf_batch_begin()): whole
 * services, each one's slots before its entry. */
#define BATCH_SLOTS 65536
struct pending {
        struct socklb_slot_key *slot_keys;
        struct socklb_backend *slots;
        size_t n_slots, cap_slot_keys, cap_slots;
        struct socklb_service_key *svc_keys;
        struct socklb_service *svcs;
        size_t n_svcs, cap_svc_keys, cap_svcs;
        struct {
                uint32_t id, from, to;  /* slots to delete once the counts are written */
        } *drops;
        size_t n_drops, cap_drops;
        size_t added_slots, added_svcs; /* what the counters gain when it is written */
};

struct sockbpf {
        struct sock *skel;
        char *pin_dir;
        int services_fd, slots_fd, revnat_fd, translations_fd;
        uint32_t next_id;
        size_t n_services, n_slots;
        bool batching;
        struct pending p;
        int batch_err;                  /* the first failure since sockbpf_batch_begin() */
};

static void progs(struct sock *k, struct bpf_program *ret[N_LINKS]) {
        ret[0] = k->progs.socklb_connect4;
        ret[1] = k->progs.socklb_connect6;
        ret[2] = k->progs.socklb_sendmsg4;
        ret[3] = k->progs.socklb_sendmsg6;
        ret[4] = k->progs.socklb_recvmsg4;
        ret[5] = k->progs.socklb_recvmsg6;
        ret[6] = k->progs.socklb_getpeername4;
        ret[7] = k->progs.socklb_getpeername6;
}

/* libbpf's own messages (the verifier's log among them) go to our log. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
        __attribute__((format(printf, 2, 0)));
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap) {
        char line[4096];

        if (level == LIBBPF_DEBUG)
                return 0;
        vsnprintf(line, sizeof line, fmt, ap);
        /* One log line each (the verifier's log comes in one piece). */
        for (char *c = line; *c; c++)
                if (*c == '\n')
                        *c = c[1] ? ' ' : 0;
        if (level == LIBBPF_WARN)
                log_warning("libbpf: %s", line);
        else
                log_v(2, "libbpf: %s", line);
        return 0;
}

static void pin_path(char *buf, size_t size, const char *dir, const char *name) {
        snprintf(buf, size, "%s/%s", dir, name);
}

/* What a reused services map holds: the largest id, so new ones do not
 * collide, and the counts. */
static void scan(struct sockbpf *s) {
        struct socklb_service_key k, next;
        struct socklb_service v;
        void *prev = NULL;

        while (bpf_map_get_next_key(s->services_fd, prev, &next) == 0) {
                if (bpf_map_lookup_elem(s->services_fd, &next, &v) == 0) {
                        if (v.id >= s->next_id)
                                s->next_id = v.id + 1;
                        s->n_services++;
                        s->n_slots += v.count;
                }
                k = next;
                prev = &k;
        }
}

int sockbpf_open(const char *pin_dir, struct sockbpf **ret) {
        struct bpf_map *maps[ELEMENTSOF(map_names)];
        char path[4096];
        struct sockbpf *s;
        int r = 0;

        libbpf_set_print(libbpf_print);
        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->next_id = 1;
        s->pin_dir = strdup(pin_dir);
        s->skel = sock__open();
        if (!s->pin_dir || !s->skel) {
                r = s->skel ? -ENOMEM : -errno;
                goto fail;
        }
        maps[0] = s->skel->maps.socklb_services;
        maps[1] = s->skel->maps.socklb_slots;
        maps[2] = s->skel->maps.socklb_revnat;
        maps[3] = s->skel->maps.socklb_affinity;
        maps[4] = s->skel->maps.socklb_translations;
        for (size_t i = 0; i < ELEMENTSOF(maps) && r == 0; i++) {
                pin_path(path, sizeof path, pin_dir, map_names[i]);
                r = bpf_map__set_pin_path(maps[i], path);
        }
        if (r < 0)
                goto fail;
        r = sock__load(s->skel);
        if (r < 0) {
                log_error_errno(r, "Failed to load the socket load-balancing programs (libbpf's reason is above)");
                goto fail;
        }
        s->services_fd = bpf_map__fd(s->skel->maps.socklb_services);
        s->slots_fd = bpf_map__fd(s->skel->maps.socklb_slots);
        s->revnat_fd = bpf_map__fd(s->skel->maps.socklb_revnat);
        s->translations_fd = bpf_map__fd(s->skel->maps.socklb_translations);
        scan(s);
        *ret = s;
        return 0;
fail:
        sockbpf_close(s);
        return r < 0 ? r : -EINVAL;
}

static int attach_one(struct sockbpf *s, struct bpf_program *prog, const char *name, int cgroup_fd) {
        char path[4096];
        struct bpf_link *link;
        int r;

        pin_path(path, sizeof path, s->pin_dir, name);
        link = access(path, F_OK) == 0 ? bpf_link__open(path) : NULL;
        if (link) {
                /* A link kproxy pinned before: the new program in place. */
                r = bpf_link__update_program(link, prog);
                bpf_link__destroy(link);
                if (r < 0)
                        return log_error_errno(r, "Failed to update the pinned %s link", name);
                return 0;
        }
        link = bpf_program__attach_cgroup(prog, cgroup_fd);
        if (!link)
                return log_error_errno(-errno, "Failed to attach program %s", name);
        r = bpf_link__pin(link, path);
        if (r < 0)
                log_error_errno(r, "Failed to pin the %s link at %s", name, path);
        bpf_link__destroy(link);        /* the pin keeps it attached */
        return r;
}

int sockbpf_attach(struct sockbpf *s, const char *cgroup_dir) {
        struct bpf_program *p[N_LINKS];
        int fd = open(cgroup_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int r = 0;

        if (fd < 0)
                return log_error_errno(-errno, "Failed to open cgroup %s", cgroup_dir);
        progs(s->skel, p);
        for (size_t i = 0; i < N_LINKS && r == 0; i++)
                r = attach_one(s, p[i], link_names[i], fd);
        close(fd);
        return r;
}

static void key_make(struct socklb_service_key *k, int protocol, const struct sockbpf_addr *a) {
        memset(k, 0, sizeof *k);
        k->family = a->ip.family;
        k->protocol = (uint8_t) protocol;
        k->port = htons(a->port);
        memcpy(k->addr, a->ip.bytes, a->ip.family == 4 ? 4 : 16);
}

static void backend_make(struct socklb_backend *b, const struct sockbpf_addr *a) {
        *b = (struct socklb_backend) {.port = htons(a->port)};
        memcpy(b->addr, a->ip.bytes, a->ip.family == 4 ? 4 : 16);
}

/* Deletes the slots [from, to) of a service. */
static void drop_slots(struct sockbpf *s, uint32_t id, uint32_t from, uint32_t to) {
        for (uint32_t i = from; i < to; i++) {
                struct socklb_slot_key sk = {.id = id, .slot = i};
                if (bpf_map_delete_elem(s->slots_fd, &sk) == 0 && s->n_slots > 0)
                        s->n_slots--;
        }
}

/* Writes n (keys, values) pairs, in batches where the kernel has them. */
static int update_many(int fd, const void *keys, size_t key_size, const void *values, size_t value_size, size_t n) {
        LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
        static bool no_batch;

        for (size_t at = 0; at < n;) {
                uint32_t count = (uint32_t) (n - at < BATCH_SLOTS ? n - at : BATCH_SLOTS);
                const char *k = (const char *) keys + at * key_size, *v = (const char *) values + at * value_size;
                if (!no_batch) {
                        if (bpf_map_update_batch(fd, k, v, &count, &opts) == 0) {
                                at += count;
                                continue;
                        }
                        if (errno != EINVAL && errno != ENOTSUP && errno != EOPNOTSUPP)
                                return -errno;
                        no_batch = true;        /* a kernel before 5.6: one at a time */
                        count = (uint32_t) (n - at < BATCH_SLOTS ? n - at : BATCH_SLOTS);
                }
                for (uint32_t i = 0; i < count; i++)
                        if (bpf_map_update_elem(fd, k + i * key_size, v + i * value_size, BPF_ANY) < 0)
                                return -errno;
                at += count;
        }
        return 0;
}

/* Writes what is pending: slots, then the services' entries (their
 * counts), then the slots past the new counts. */
static int flush(struct sockbpf *s) {
        struct pending *p = &s->p;
        int r = update_many(s->slots_fd, p->slot_keys, sizeof *p->slot_keys, p->slots, sizeof *p->slots, p->n_slots);
        if (r == 0) {
                s->n_slots += p->added_slots;
                r = update_many(s->services_fd, p->svc_keys, sizeof *p->svc_keys, p->svcs, sizeof *p->svcs,
                                p->n_svcs);
        }
        if (r == 0) {
                s->n_services += p->added_svcs;
                for (size_t i = 0; i < p->n_drops; i++)
                        drop_slots(s, p->drops[i].id, p->drops[i].from, p->drops[i].to);
        }
        p->n_slots = p->n_svcs = p->n_drops = p->added_slots = p->added_svcs = 0;
        if (r < 0 && s->batch_err == 0)
                s->batch_err = r;
        return r;
}

static bool grow(void **v, size_t *cap, size_t want, size_t size) {
        if (want <= *cap)
                return true;
        size_t c = *cap ? *cap : 64;
        while (c < want)
                c *= 2;
        void *n = reallocarray(*v, c, size);
        if (!n)
                return false;
        *v = n;
        *cap = c;
        return true;
}

/* Holds one service's writes (n slots) for the next flush. */
static int hold(struct sockbpf *s, const struct socklb_service_key *k, const struct socklb_service *v,
                const struct sockbpf_addr *backends, size_t n, uint32_t old_count, bool existed) {
        struct pending *p = &s->p;

        if (!grow((void **) &p->slot_keys, &p->cap_slot_keys, p->n_slots + n, sizeof *p->slot_keys) ||
            !grow((void **) &p->slots, &p->cap_slots, p->n_slots + n, sizeof *p->slots) ||
            !grow((void **) &p->svc_keys, &p->cap_svc_keys, p->n_svcs + 1, sizeof *p->svc_keys) ||
            !grow((void **) &p->svcs, &p->cap_svcs, p->n_svcs + 1, sizeof *p->svcs) ||
            !grow((void **) &p->drops, &p->cap_drops, p->n_drops + 1, sizeof *p->drops))
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                p->slot_keys[p->n_slots] = (struct socklb_slot_key) {.id = v->id, .slot = (uint32_t) i};
                backend_make(&p->slots[p->n_slots], &backends[i]);
                p->n_slots++;
        }
        p->added_slots += n > old_count ? n - old_count : 0;
        p->svc_keys[p->n_svcs] = *k;
        p->svcs[p->n_svcs++] = *v;
        p->added_svcs += !existed;
        if (old_count > n) {
                p->drops[p->n_drops].id = v->id;
                p->drops[p->n_drops].from = (uint32_t) n;
                p->drops[p->n_drops++].to = old_count;
        }
        return 0;
}

void sockbpf_batch_begin(struct sockbpf *s) {
        s->batching = true;
        s->batch_err = 0;
}

int sockbpf_batch_end(struct sockbpf *s) {
        flush(s);
        s->batching = false;
        return s->batch_err;
}

int sockbpf_set_service(struct sockbpf *s, int protocol, const struct sockbpf_addr *service,
                        const struct sockbpf_addr *backends, size_t n, uint32_t affinity_s) {
        struct socklb_service_key k;
        struct socklb_service v = {0};
        uint32_t old_count = 0;
        bool existed;
        int r;

        if ((protocol != IPPROTO_TCP && protocol != IPPROTO_UDP) || n > UINT32_MAX ||
            (service->ip.family != 4 && service->ip.family != 6))
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (backends[i].ip.family != service->ip.family)
                        return -EINVAL;
        key_make(&k, protocol, service);
        /* What is held could be this service's: written first. */
        if (s->batching && (n == 0 || s->p.n_slots + n > BATCH_SLOTS) && (s->p.n_svcs > 0 || s->p.n_drops > 0))
                flush(s);
        existed = bpf_map_lookup_elem(s->services_fd, &k, &v) == 0;
        if (existed)
                old_count = v.count;
        else
                v.id = s->next_id++;
        if (n == 0) {
                if (!existed)
                        return 0;
                if (bpf_map_delete_elem(s->services_fd, &k) < 0 && errno != ENOENT)
                        return -errno;
                s->n_services--;
                drop_slots(s, v.id, 0, old_count);
                return 0;
        }
        v.count = (uint32_t) n;
        v.affinity_s = affinity_s;
        r = hold(s, &k, &v, backends, n, old_count, existed);
        /* Unless batching, at once: slots first, the count last, so a
         * connect() never reads a slot that is not written. */
        return r < 0 || s->batching ? r : flush(s);
}

/* The socket's translation (revnat: cookie and endpoint -> service), then
 * the service's slots, looked up one by one: a service has a few. */
int sockbpf_stale(struct sockbpf *s, int protocol, uint64_t cookie, const struct sockbpf_addr *peer) {
        struct socklb_revnat_key rk;
        struct socklb_backend svc, b;
        struct socklb_service_key k = {0};
        struct socklb_service v;

        if (peer->ip.family != 4 && peer->ip.family != 6)
                return -EINVAL;
        memset(&rk, 0, sizeof rk);
        rk.cookie = cookie;
        backend_make(&rk.backend, peer);
        if (bpf_map_lookup_elem(s->revnat_fd, &rk, &svc) < 0)
                return errno == ENOENT ? 0 : -errno;
        memcpy(k.addr, svc.addr, sizeof k.addr);
        k.port = svc.port;
        k.protocol = (uint8_t) protocol;
        k.family = peer->ip.family;
        if (bpf_map_lookup_elem(s->services_fd, &k, &v) < 0)
                return errno == ENOENT ? 1 : -errno;
        for (uint32_t i = 0; i < v.count; i++) {
                struct socklb_slot_key sk = {.id = v.id, .slot = i};
                if (bpf_map_lookup_elem(s->slots_fd, &sk, &b) == 0 && memcmp(&b, &rk.backend, sizeof b) == 0)
                        return 0;
        }
        return 1;
}

int sockbpf_each_service(struct sockbpf *s,
                         void (*each)(struct sockbpf *s, int protocol, const struct sockbpf_addr *service, void *ctx),
                         void *ctx) {
        struct socklb_service_key *keys = NULL, k;
        size_t n = 0, cap = 0;
        void *prev = NULL;

        /* Keys first: each() may delete, which would upset the walk. */
        while (bpf_map_get_next_key(s->services_fd, prev, &k) == 0) {
                if (n == cap) {
                        size_t c = cap ? cap * 2 : 64;
                        struct socklb_service_key *v = reallocarray(keys, c, sizeof *v);
                        if (!v) {
                                free(keys);
                                return -ENOMEM;
                        }
                        keys = v;
                        cap = c;
                }
                keys[n++] = k;
                prev = &keys[n - 1];
        }
        for (size_t i = 0; i < n; i++) {
                struct sockbpf_addr a = {.ip = {.family = keys[i].family}, .port = ntohs(keys[i].port)};
                if (a.ip.family != 4 && a.ip.family != 6)
                        continue;
                memcpy(a.ip.bytes, keys[i].addr, a.ip.family == 4 ? 4 : 16);
                each(s, keys[i].protocol, &a, ctx);
        }
        free(keys);
        return 0;
}

int sockbpf_stats(struct sockbpf *s, struct sockbpf_stats *ret) {
        int ncpu = libbpf_num_possible_cpus();
        uint32_t zero = 0;

        *ret = (struct sockbpf_stats) {.services = s->n_services, .slots = s->n_slots};
        if (ncpu <= 0)
                return ncpu < 0 ? ncpu : -EINVAL;
        uint64_t *v = calloc((size_t) ncpu, sizeof *v);
        if (!v)
                return -ENOMEM;
        int r = bpf_map_lookup_elem(s->translations_fd, &zero, v) < 0 ? -errno : 0;
        for (int i = 0; r == 0 && i < ncpu; i++)
                ret->translations += v[i];
        free(v);
        return r;
}

void sockbpf_close(struct sockbpf *s) {
        if (!s)
                return;
        free(s->p.slot_keys);
        free(s->p.slots);
        free(s->p.svc_keys);
        free(s->p.svcs);
        free(s->p.drops);
        sock__destroy(s->skel);
        free(s->pin_dir);
        free(s);
}

int sockbpf_unpin(const char *pin_dir) {
        char path[4096];
        int r = 0;

        for (size_t i = 0; i < N_LINKS + ELEMENTSOF(map_names); i++) {
                const char *name = i < N_LINKS ? link_names[i] : map_names[i - N_LINKS];
                pin_path(path, sizeof path, pin_dir, name);
                if (unlink(path) < 0 && errno != ENOENT && r == 0)
                        r = log_error_errno(-errno, "Failed to unpin %s", path);
        }
        return r;
}
