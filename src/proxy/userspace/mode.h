/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Userspace mode's object (struct userspace_mode), private to
 * proxy/userspace/: the object and the sync (backend.c), shared with its
 * restart half (restart.c: sockets handed to and taken from another
 * process, the stop) and its counters (stats.c: /metrics, /debug/backend).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/backend.h"
#include "userspace/fwd-tcp.h"
#include "userspace/fwd-udp.h"
#include "userspace/handover.h"
#include "userspace/plan.h"
#include "util/buf.h"
#include "util/hmap.h"

struct nolocal;

#define USERSPACE_LINK "kube-proxy0"
#define CONNECT_TIMEOUT_MS 2000
#define UDP_IDLE_DEFAULT_MS 30000       /* the kernel's UDP conntrack timeout */
#define PIPE_SIZE (1 << 20)             /* 1 MiB: a third less CPU per GB (docs/userspace.md) */
#define SPARE_PIPES 256
#define HANDOVER_SOCK "userspace.sock"
#define HANDOVER_WAIT_MS 2000           /* per message, from a predecessor handing over */
#define UDP_REPLY_WAIT_MS 2000          /* after a hand-over, for replies to datagrams passed on */

struct frontend {
        char key[FWD_ADDR_STRLEN + 4];  /* the plan's: "tcp 10.96.0.10:80" */
        char *svc_key;                  /* the service it serves ("ns/name") */
        struct fwd_addr addr;           /* what it listens on */
        struct userspace_mode *b;
        struct frontend *next_draining;
        uint8_t family;
        int proto;
        struct picker *picker;
        struct fwd_tcp *tcp;
        struct fwd_udp *udp;
        struct buf line;                /* the plan's line, for /debug/backend */
        struct inet_cidr *sources;      /* the sources its socket's filter admits (none: all) */
        size_t n_sources;
        uint64_t gen;                   /* the sync that last wanted it */
        bool failed;                    /* could not bind: full syncs try again */
};

struct held_addr {
        char key[INET_ADDR_STRLEN];
        struct inet_addr a;
        uint32_t refs;                  /* services that want it */
};

/* The ClientIP affinity of one service port, shared by its frontends (as
 * the rules' recent lists are the endpoints', whichever way the client came). */
struct svc_affinity {
        char *key;                      /* "ns/name:port" */
        struct affinity *aff;           /* the map's reference */
};

/* The addresses one service wants, in one family: what a partial sync of
 * that service lets go of. */
struct svc_addrs {
        char *key;                      /* the service's */
        struct inet_addr *a;
        size_t n;
};

/* Counters of frontends already freed, so the totals only grow. */
struct gone {
        struct fwd_tcp_stats tcp;
        struct fwd_udp_stats udp;
};

struct userspace_mode {
        struct backend base;          /* the core's handle: BACKEND_MODE() */
        struct backend_env env;
        struct ifaddr *ia;
        struct fwd_pipes *pipes;
        struct hmap frontends;          /* key -> struct frontend */
        struct hmap addrs;              /* address text -> struct held_addr */
        struct hmap svc_addrs[2];       /* per family: service key -> struct svc_addrs */
        struct hmap affinities;         /* "ns/name:port" -> struct svc_affinity */
        struct frontend *draining;      /* TCP frontends no longer wanted, finishing their connections */
        struct gone gone;
        uint64_t gen;
        uint64_t tcp_idle_ms, udp_idle_ms;
        size_t n_sctp[2];               /* per family, as last logged */
        struct handover_sock *adopt;    /* handed over by a predecessor, until the first syncs adopt them */
        size_t n_adopt;
        int handover_fd;                /* listening for a successor; -1: none */
        int successor_fd;               /* a successor that announced itself; -1: none */
        int predecessor_fd;             /* the process this one replaces, announced to at start; -1: none */
        bool retired;                   /* handed over: syncs do nothing */
        bool handover_started;          /* the first sync took a predecessor's sockets */
        size_t out_of_fds;              /* frontends this sync could not open for want of descriptors */
        struct ev_timer *nat_flush;     /* after the first sync: a NAT mode's conntrack bindings go */
        bool nat_flushed;
        struct nolocal *nolocal[2];     /* per family: Local policies without local endpoints */
        bool link_ready;
        bool stopping;                  /* quiesced: the listeners refuse SYNs, then close */
        size_t listening;               /* stopping listeners still open (handshakes under way) */
};

/* backend.c */
void userspace_frontend_free(struct frontend *fe);
/* Closes fe's UDP forwarder and its sessions, keeping its counts. */
void userspace_udp_close(struct frontend *fe);

/* restart.c */
/* The handed-over socket for want, taken out of the list; -1: none. */
int userspace_adoptable(struct userspace_mode *b, const struct userspace_frontend *want);
/* After the family's first sync: the handed-over sockets it did not want close. */
void userspace_close_unadopted(struct userspace_mode *b, uint8_t family);
/* At start: a predecessor, if one runs, is told that this process will
 * replace it (it turns not-ready). */
void userspace_handover_announce(struct userspace_mode *b);
/* At the first sync: a predecessor's sockets taken, a successor listened for. */
void userspace_handover_start(struct userspace_mode *b);
/* Closes the hand-over's sockets (destroying the backend). */
void userspace_handover_close(struct userspace_mode *b);
void userspace_quiesce(struct userspace_mode *b);
/* Stopping: closes the listeners with no handshake under way; returns how
 * many stay open. */
size_t userspace_close_settled(struct userspace_mode *b);

/* switch.c: the node around the mode. The operations of
 * the same names in struct backend_ops. */
int userspace_setup(const struct kproxy_config *c, struct host_facts *host, const char *node_name, const char *root);
bool userspace_leftovers(const struct host_facts *h, bool running);
int userspace_remove_leftovers(const struct host_facts *h, bool running);
int userspace_cleanup(const struct kproxy_config *c, const struct host_facts *h);
/* Conntrack entries of the NAT mode switched from, once this mode serves. */
void userspace_on_nat_flush(struct ev_loop *l, void *userdata);

/* stats.c */
void userspace_add_tcp_stats(struct fwd_tcp_stats *t, const struct fwd_tcp_stats *s);
void userspace_add_udp_stats(struct fwd_udp_stats *t, const struct fwd_udp_stats *s);
void userspace_expose(struct userspace_mode *b, struct buf *out);
void userspace_describe(struct userspace_mode *b, struct buf *out);
size_t userspace_busy(struct userspace_mode *b);
