/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * When socket load balancing closes the connected UDP sockets whose
 * endpoint left (sockbpf/udpreap.h): a sweep after each sync that changed
 * a UDP service, coalesced (the families' syncs of one round make one),
 * run on a thread so the loop never waits for it; a change during a sweep
 * makes one more after it.
 */
#include <stdint.h>

struct ev_loop;
struct sockbpf;
struct socklb_reaper;

/* Borrows l and bpf (which must outlive it); copies cgroup_dir. Returns 0
 * or -errno. */
int socklb_reaper_new(struct ev_loop *l, struct sockbpf *bpf, const char *cgroup_dir, struct socklb_reaper **ret);
/* Waits for a sweep under way. Accepts NULL, returns NULL. */
struct socklb_reaper *socklb_reaper_free(struct socklb_reaper *r);
/* A UDP service changed: a sweep soon. */
void socklb_reaper_kick(struct socklb_reaper *r);
/* Sockets closed so far. */
uint64_t socklb_reaper_closed(const struct socklb_reaper *r);
