/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A proxy mode, as the sync loop sees it: one small set of operations that
 * every mode implements (iptables, nftables, and the modes to come), picked
 * from one table (proxy/backends.h, the only place that names them).
 * The sync loop (proxy/proxier.h) keeps the model, the changed set, the
 * schedule, metrics and health, and never asks which mode it runs; a mode
 * keeps whatever it knows about what it wrote, and reaches back only
 * through struct backend_env.
 *
 *   core ──sync(kind, model, changed)──▶ backend ──▶ kernel
 *   core ◀──changed(family, why)──────── backend (canary, change monitor)
 *
 * Adding a mode: its files (the object, and backend-<mode>.c filling a
 * struct backend_ops), one row in the table, its name in config.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf;
struct ev_loop;
struct hmap;
struct host_facts;
struct inet_cidr;
struct kproxy_config;
struct model;
struct render_params;

/* What the core holds of a mode's object. Each mode's object has a type
 * of its own (struct iptables_mode, struct nftables_mode, ...) that starts
 * with this as its member "base"; the mode's operations get their object
 * back with BACKEND_MODE(b, struct iptables_mode). */
struct backend {
        const struct backend_ops *ops;
};

#define BACKEND_MODE(b, type) ((type *) (void *) ((char *) (b) - offsetof(type, base)))

/* What the core lends a backend for its lifetime. */
struct backend_env {
        struct ev_loop *loop;
        const struct kproxy_config *config;
        const struct host_facts *host;
        const uint8_t *families;        /* the IP families to program: 4, and 6 if usable */
        size_t n_families;
        /* The kernel no longer holds what the backend last wrote (someone
         * flushed a table, changed a chain, or notifications were lost):
         * the next sync of family (0: every family) must trust nothing.
         * why completes "IPv4 <why>, resyncing everything" in the log (the
         * core logs it once per finding). May be called from the
         * backend's own event handlers at any time, also during a sync. */
        void (*changed)(void *core, uint8_t family, const char *why);
        /* The backend handed what serves the node to a successor process
         * (userspace mode's sockets: docs/userspace.md). The core stops
         * syncing and serving (API, health, metrics), so the successor can
         * take over, and the process exits once busy() is 0. */
        void (*handed_over)(void *core);
        /* A successor process has announced itself (starting true) and will
         * take over at its first sync, or went away (false): meanwhile this
         * process serves on but must not pass a readiness probe (the core
         * makes /healthz not ready). */
        void (*replacing)(void *core, bool starting);
        void *core;
};

enum backend_sync_kind {
        BACKEND_SYNC_PARTIAL,   /* the changed services only */
        BACKEND_SYNC_RESYNC,    /* everything, trusting what the backend knows it wrote */
        BACKEND_SYNC_FULL,      /* everything, trusting nothing: the backend forgets what it
                                 * knew of the kernel, and reads or rewrites it */
        _BACKEND_SYNC_KIND_MAX,
};

const char *backend_sync_kind_to_string(enum backend_sync_kind k);

struct backend_sync {
        enum backend_sync_kind kind;
        const struct model *model;
        const struct render_params *params;     /* the family's */
        /* Service keys ("ns/name") changed since the last successful sync,
         * whatever the kind; services no longer in the model are gone. */
        const struct hmap *changed;
        /* Every service may have changed beyond the changed set (the first
         * sync, a Node change): counts kept per service are redone. */
        bool all_changed;
        const struct inet_cidr *service_cidrs;  /* ServiceCIDRs (modes that drop unallocated IPs) */
        size_t n_service_cidrs;
};

/* What a sync did, in the core's terms (metrics, health, scheduling). */
struct backend_stats {
        bool kernel_refused;            /* a failure was the kernel refusing what was sent */
        bool recheck;                   /* others changed the kernel during the sync: trust nothing, soon */
        size_t no_local_internal;       /* service ports whose Local policy finds no local endpoint */
        size_t no_local_external;
        size_t n_tables;                /* rule counts where the mode has upstream's gauges of them */
        struct {
                const char *table;      /* "filter", "nat" */
                size_t total;           /* rules the table holds */
                size_t last;            /* rules this sync wrote */
        } tables[2];
};

struct backend_ops {
        const char *name;               /* "iptables": logs ("Syncing iptables rules"), /proxyMode */
        bool service_cidrs;             /* uses ServiceCIDRs: the core watches them */
        /* Its traffic goes through conntrack's NAT: the node's conntrack
         * set-up applies (daemon/setup.h), and UDP entries to endpoints that
         * left are deleted after each sync (proxy/udp-stale.h). */
        bool conntrack;
        /* What keeps serving once the process has exited, for the log line
         * of a stop ("exiting; <stopped>"). */
        const char *stopped;
        /* The capabilities it cannot run without (1 << CAP_...): checked
         * at start-up, before the node is touched, so a unit or a pod that
         * grants too little is refused with a message naming what is
         * missing. CAP_BPF and CAP_PERFMON stand for CAP_SYS_ADMIN on a
         * kernel older than them (5.8). */
        uint64_t caps;
        /* Its sockets pass to a successor process started beside it
         * (userspace mode): the health server's port is shared with the
         * successor (SO_REUSEPORT), so each answers its own readiness. */
        bool hands_over;

        /* The node set-up of the mode, before the first sync and with
         * --init-only (after the host probe: see daemon/setup.h). Returns 0,
         * or -errno for a failure other than not being permitted (logged). */
        int (*setup)(const struct kproxy_config *c, struct host_facts *host, const char *node_name,
                     const char *root);
        /* The families this host can program in this mode: 4 always, 6 when
         * the mode's tools and the kernel allow it. */
        bool (*ipv6_usable)(const struct host_facts *host);

        /* Returns 0 or -errno (logged). */
        int (*create)(const struct backend_env *env, struct backend **ret);
        /* Accepts NULL; returns NULL. */
        struct backend *(*destroy)(struct backend *b);

        /* Makes the family's rules equal to the model. Returns 0, or -errno
         * when nothing (or only part) of it reached the kernel: the kernel
         * keeps working rules, and the next sync will be FULL. */
        int (*sync)(struct backend *b, uint8_t family, const struct backend_sync *s, struct backend_stats *ret);
        /* The periodic check (every sync period) that the kernel still holds
         * what was written; a finding goes to env->changed(). */
        void (*check)(struct backend *b);

        /* Mode switching and --cleanup (no backend object needed). Whether
         * this mode's rules are on the host beyond what the running backend
         * manages (running: this is the running mode, so only what it does
         * not own, such as another iptables backend's chains). Unsure is
         * true. */
        bool (*leftovers)(const struct host_facts *host, bool running);
        /* Removes them. Returns 0 or -errno (logged). */
        int (*remove_leftovers)(const struct host_facts *host, bool running);
        /* --cleanup: everything of this mode on the host, and what it kept
         * in --state-dir. Returns 0 or -errno (logged). */
        int (*cleanup)(const struct kproxy_config *c, const struct host_facts *host);

        /* `kproxy render`: the first full sync's input for one family, as
         * text (or, with netlink, the bytes the daemon would send, where the
         * mode has such a form; the text otherwise). */
        int (*render)(const struct model *m, const struct render_params *p, const struct inet_cidr *service_cidrs,
                      size_t n_service_cidrs, bool netlink, struct buf *out);

        /* Optional. The mode's own metric families, in the Prometheus text
         * format, appended to /metrics. */
        void (*expose)(struct backend *b, struct buf *out);
        /* Optional. What the mode serves now, as text: /debug/backend on
         * the metrics server (for operators and tests). */
        void (*describe)(struct backend *b, struct buf *out);
        /* Optional. Connections the process itself still carries (userspace
         * mode's TCP connections; after a hand-over also its UDP datagrams
         * awaiting a reply), which a stopping process, or one that handed
         * over, waits for. */
        size_t (*busy)(struct backend *b);
        /* Optional. The process is stopping (SIGTERM): take no new
         * connections, keep the open ones. */
        void (*quiesce)(struct backend *b);
};
