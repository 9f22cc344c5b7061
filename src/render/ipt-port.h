/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * One service port's iptables rules (render/ipt-port.c), as render/ipt.c
 * calls for them: the state of one render, which both files write, and the
 * context of one service port. Only the iptables renderer includes this;
 * render.h is kproxy's interface to it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model/endpoints.h"
#include "render/chain.h"
#include "util/buf.h"
#include "util/inet.h"

struct owned_chains;
struct render_ipt_sync;
struct render_params;
struct svc;
struct svc_port;

#define RENDER_IPT_SPN_MAX 340
#define RENDER_IPT_PROB_CACHE 128

struct render_ipt {
        const struct render_params *p;
        struct endpoints_masq masq;
        struct buf filter_chains, filter_rules;
        struct buf nat_chains, nat_rules;
        bool large;             /* large-cluster mode: no per-endpoint comments */
        const struct render_ipt_sync *sync;     /* may be NULL */
        /* With sync: what each service rendered now owns. */
        struct owned_chains *fresh;
        struct buf cur;                 /* the service being rendered: its chain names */
        uint32_t cur_rules, cur_names;
        size_t own_rules;               /* rules of the services' own chains, all written now */
        size_t no_local_internal, no_local_external;
        char prob[RENDER_IPT_PROB_CACHE][16];
};

/* One service port being rendered, with its plan and the names its rules
 * share. */
struct render_ipt_port {
        const struct svc *svc;
        const struct svc_port *port;
        const struct svc_port_endpoints *eps;
        struct endpoints_plan plan;
        char spn[RENDER_IPT_SPN_MAX];   /* "ns/name:port" or "ns/name" */
        const char *proto;              /* "tcp" */
        char cip[INET_ADDR_STRLEN];
        char hash[CHAIN_HASH_LEN + 1];
        char svc_chain[CHAIN_NAME_MAX], svl_chain[CHAIN_NAME_MAX];
        char ext_chain[CHAIN_NAME_MAX], fw_chain[CHAIN_NAME_MAX];
        char *sep_names;        /* KUBE-SEP names, CHAIN_NAME_MAX apart, one per eps->all: the caller's */
};

/* Sets up c for svc's port (of t->p's family, cluster IP cip) whose
 * endpoints eps holds: names, plan, and with own_chains the SEP chains'
 * names in c->sep_names (room for eps->n_all). */
void render_ipt_port_init(const struct render_ipt *t, struct render_ipt_port *c, const struct svc *svc,
                          const struct svc_port *port, const struct svc_port_endpoints *eps,
                          const struct inet_addr *cip, bool own_chains);
/* Writes c's rules into t's buffers (§7.1-7.5) and, with own_chains, its
 * own chains (§7.6-7.10), noting them in t->cur when t->sync is set. */
void render_ipt_port(struct render_ipt *t, const struct render_ipt_port *c, bool own_chains);

/* ":CHAIN - [0:0]" */
static inline void render_ipt_chain_line(struct buf *b, const char *chain) {
        buf_putc(b, ':');
        buf_puts(b, chain);
        buf_puts(b, " - [0:0]\n");
}

/* Rules ("-A" lines) in b from offset from, which starts a line. */
static inline size_t render_ipt_count_rules(const struct buf *b, size_t from) {
        size_t n = 0;
        const char *p = b->data + from, *end = b->data + b->len;
        while (p < end) {
                if (end - p >= 2 && p[0] == '-' && p[1] == 'A')
                        n++;
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                if (!nl)
                        break;
                p = nl + 1;
        }
        return n;
}
