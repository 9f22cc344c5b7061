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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sock.skel.h"
#include "sockbpf/maps.h"
#include "util/log.h"

/* The hooks, by program and the name of their pinned link. */
static const char *const link_names[] = {"connect4"};

struct sockbpf {
        struct sock *skel;
        char *pin_dir;
        int services_fd, slots_fd;
        uint32_t next_id;
};

/* libbpf's own messages (the verifier's log among them) go to our log. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap) {
        char line[1024];

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

/* The largest id in a reused services map, so new ids do not collide. */
static uint32_t max_id(int services_fd) {
        struct socklb_service_key k, next;
        struct socklb_service v;
        uint32_t m = 0;
        void *prev = NULL;

        while (bpf_map_get_next_key(services_fd, prev, &next) == 0) {
                if (bpf_map_lookup_elem(services_fd, &next, &v) == 0 && v.id > m)
                        m = v.id;
                k = next;
                prev = &k;
        }
        return m;
}

int sockbpf_open(const char *pin_dir, struct sockbpf **ret) {
        char path[4096];
        struct sockbpf *s;
        int r;

        libbpf_set_print(libbpf_print);
        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->pin_dir = strdup(pin_dir);
        s->skel = sock__open();
        if (!s->pin_dir || !s->skel) {
                r = s->skel ? -ENOMEM : -errno;
                goto fail;
        }
        pin_path(path, sizeof path, pin_dir, "socklb_services");
        r = bpf_map__set_pin_path(s->skel->maps.socklb_services, path);
        pin_path(path, sizeof path, pin_dir, "socklb_slots");
        if (r == 0)
                r = bpf_map__set_pin_path(s->skel->maps.socklb_slots, path);
        if (r < 0)
                goto fail;
        r = sock__load(s->skel);
        if (r < 0) {
                log_error_errno(r, "Failed to load the socket load-balancing programs (the kernel's reason is above)");
                goto fail;
        }
        s->services_fd = bpf_map__fd(s->skel->maps.socklb_services);
        s->slots_fd = bpf_map__fd(s->skel->maps.socklb_slots);
        s->next_id = max_id(s->services_fd) + 1;
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
                return log_error_errno(-errno, "Failed to attach %s", name);
        r = bpf_link__pin(link, path);
        if (r < 0)
                log_error_errno(r, "Failed to pin the %s link at %s", name, path);
        bpf_link__destroy(link);        /* the pin keeps it attached */
        return r;
}

int sockbpf_attach(struct sockbpf *s, const char *cgroup_dir) {
        struct bpf_program *progs[] = {s->skel->progs.socklb_connect4};
        int fd = open(cgroup_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int r = 0;

        if (fd < 0)
                return log_error_errno(-errno, "Failed to open cgroup %s", cgroup_dir);
        for (size_t i = 0; i < sizeof progs / sizeof *progs && r == 0; i++)
                r = attach_one(s, progs[i], link_names[i], fd);
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

int sockbpf_set_service(struct sockbpf *s, int protocol, const struct sockbpf_addr *service,
                        const struct sockbpf_addr *backends, size_t n) {
        struct socklb_service_key k;
        struct socklb_service v = {0};
        uint32_t old_count = 0;

        if ((protocol != IPPROTO_TCP && protocol != IPPROTO_UDP) || n > UINT32_MAX)
                return -EINVAL;
        key_make(&k, protocol, service);
        if (bpf_map_lookup_elem(s->services_fd, &k, &v) == 0)
                old_count = v.count;
        else
                v.id = s->next_id++;
        if (n == 0) {
                if (bpf_map_delete_elem(s->services_fd, &k) < 0 && errno != ENOENT)
                        return -errno;
        } else {
                /* Slots first, the count last: a connect() never reads a
                 * slot that is not written. */
                for (size_t i = 0; i < n; i++) {
                        struct socklb_slot_key sk = {.id = v.id, .slot = (uint32_t) i};
                        struct socklb_backend b = {.port = htons(backends[i].port)};

                        if (backends[i].ip.family != service->ip.family)
                                return -EINVAL;
                        memcpy(b.addr, backends[i].ip.bytes, backends[i].ip.family == 4 ? 4 : 16);
                        if (bpf_map_update_elem(s->slots_fd, &sk, &b, BPF_ANY) < 0)
                                return -errno;
                }
                v.count = (uint32_t) n;
                if (bpf_map_update_elem(s->services_fd, &k, &v, BPF_ANY) < 0)
                        return -errno;
        }
        /* Slots past the new count, once nothing can pick them. */
        for (uint32_t i = (uint32_t) n; i < old_count; i++) {
                struct socklb_slot_key sk = {.id = v.id, .slot = i};
                (void) bpf_map_delete_elem(s->slots_fd, &sk);
        }
        return 0;
}

void sockbpf_close(struct sockbpf *s) {
        if (!s)
                return;
        sock__destroy(s->skel);
        free(s->pin_dir);
        free(s);
}

int sockbpf_unpin(const char *pin_dir) {
        static const char *const maps[] = {"socklb_services", "socklb_slots"};
        char path[4096];
        int r = 0;

        for (size_t i = 0; i < sizeof link_names / sizeof *link_names; i++) {
                pin_path(path, sizeof path, pin_dir, link_names[i]);
                if (unlink(path) < 0 && errno != ENOENT && r == 0)
                        r = log_error_errno(-errno, "Failed to unpin %s", path);
        }
        for (size_t i = 0; i < sizeof maps / sizeof *maps; i++) {
                pin_path(path, sizeof path, pin_dir, maps[i]);
                if (unlink(path) < 0 && errno != ENOENT && r == 0)
                        r = log_error_errno(-errno, "Failed to unpin %s", path);
        }
        return r;
}
