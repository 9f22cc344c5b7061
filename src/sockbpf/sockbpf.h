/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Socket load balancing's kernel side (libbpf): the programs of sock.bpf.c
 * loaded, their maps and cgroup links pinned in a bpf filesystem directory
 * so translation goes on while kproxy is stopped, and services written into
 * the maps in place. A restarted kproxy reopens the pinned maps and swaps
 * its programs into the pinned links: no instant without translation.
 */
#include <stddef.h>
#include <stdint.h>

#include "util/inet.h"

struct sockbpf;

struct sockbpf_addr {
        struct inet_addr ip;
        uint16_t port;                  /* host order */
};

/* Loads the programs. Maps already pinned in pin_dir (an existing directory
 * in a bpf filesystem) are reused, with what they hold; missing ones are
 * created and pinned there. Returns 0 or -errno, with the reason logged
 * (the verifier's message for a program the kernel refuses). */
int sockbpf_open(const char *pin_dir, struct sockbpf **ret);

/* Attaches the hooks to a cgroup v2 directory: links already pinned in the
 * directory get the new programs in place; otherwise new links are pinned. */
int sockbpf_attach(struct sockbpf *s, const char *cgroup_dir);

/* Sets what service (protocol IPPROTO_TCP or IPPROTO_UDP) translates to,
 * with ClientIP affinity for affinity_s seconds (0: none); n == 0 removes
 * it (the packet filter then serves it). */
int sockbpf_set_service(struct sockbpf *s, int protocol, const struct sockbpf_addr *service,
                        const struct sockbpf_addr *backends, size_t n, uint32_t affinity_s);

/* Between these two, sockbpf_set_service() holds its writes and sends them
 * in batches (bpf_map_update_batch(), 64k slots at a time): whole services,
 * every slot before the entry that publishes its count; a removal first
 * writes what is held. set_service() then returns only its own failures
 * (arguments, memory, reading the entry); batch_end() writes the rest and
 * returns the first failure of the kernel's since batch_begin(). */
void sockbpf_batch_begin(struct sockbpf *s);
int sockbpf_batch_end(struct sockbpf *s);

/* Calls each() for every service in the maps (also those a previous run
 * wrote); each() may remove the one it is given. Returns 0 or -errno. */
int sockbpf_each_service(struct sockbpf *s,
                         void (*each)(struct sockbpf *s, int protocol, const struct sockbpf_addr *service, void *ctx),
                         void *ctx);

/* Whether the socket with this cookie, connected to peer (protocol
 * IPPROTO_TCP or IPPROTO_UDP), was sent there by a translation whose
 * service no longer has peer as an endpoint (or no longer translates):
 * returns 1, 0 when it still has or no translation of these maps sent it
 * there (a socket connected to a pod directly), or -errno. */
int sockbpf_stale(struct sockbpf *s, int protocol, uint64_t cookie, const struct sockbpf_addr *peer);

/* What the maps hold and did, for metrics. */
struct sockbpf_stats {
        size_t services;                /* with endpoints */
        size_t slots;
        uint64_t translations;          /* connect()s and sends translated, since the maps were made */
};
int sockbpf_stats(struct sockbpf *s, struct sockbpf_stats *ret);

/* Closes the process's handles; what is pinned stays. */
void sockbpf_close(struct sockbpf *s);

/* Unpins the links (which detaches them) and the maps of pin_dir. */
int sockbpf_unpin(const char *pin_dir);
