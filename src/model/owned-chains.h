/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The nat chains each service owns in iptables mode (its ports' KUBE-SVC-,
 * KUBE-SVL-, KUBE-EXT-, KUBE-FW- and KUBE-SEP- chains) and their rule
 * count, by service key. The iptables backend keeps one per family: the
 * chains as its last sync left them in the kernel. A sync's render reads
 * it (const) to find the chains a partial sync deletes, and hands back a
 * fresh one holding what it wrote; owned_chains_merge() folds that in.
 * Pure data: no I/O.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/cleanup.h"

struct hmap;
struct owned_chains;

/* One service's entry, borrowed from its container and valid until that
 * changes: n_names chain names, each NUL-terminated, back to back from
 * names (the next follows the previous one's NUL). */
struct owned_chains_entry {
        const char *names;
        uint32_t n_names, n_rules;
};

/* An empty container, or NULL on out of memory. */
struct owned_chains *owned_chains_new(void);
/* Accepts NULL; returns NULL. */
struct owned_chains *owned_chains_free(struct owned_chains *o);

/* Sets key's entry, replacing any: len bytes of names holding n_names
 * names as in struct owned_chains_entry. key and names are copied.
 * Returns 0, or -ENOMEM (o is then unchanged). */
int owned_chains_put(struct owned_chains *o, const char *key, const char *names, size_t len, uint32_t n_names,
                     uint32_t n_rules);
/* key's entry into *ret; false (ret untouched) when key has none. */
bool owned_chains_get(const struct owned_chains *o, const char *key, struct owned_chains_entry *ret);
/* Iteration in no particular order:
 * for (size_t i = 0; owned_chains_next(o, &i, &key, &entry);) */
bool owned_chains_next(const struct owned_chains *o, size_t *iter, const char **ret_key,
                       struct owned_chains_entry *ret);

/* Chains, and rules, held over all services (0 for NULL). */
size_t owned_chains_n_chains(const struct owned_chains *o);
size_t owned_chains_n_rules(const struct owned_chains *o);

/* Folds fresh, a render's (render.h: render_ipt_sync.fresh), into o and
 * frees it. changed NULL (a full sync): o becomes fresh. Otherwise (a
 * partial sync, whose render wrote the services of changed): each key of
 * changed loses its entry and takes fresh's, if fresh has one. fresh
 * may be NULL (nothing to fold); o may be NULL (fresh is only freed). */
void owned_chains_merge(struct owned_chains *o, struct owned_chains *fresh, const struct hmap *changed);

DEFINE_CLEANUP(struct owned_chains, owned_chains_free)
