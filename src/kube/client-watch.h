/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A reflector's watch phase, above its bookkeeping (kube/reflector.h):
 * the URL of a watch from the last resourceVersion, its events passed to
 * the consumer as they arrive, and what its end leads to. Private to
 * src/kube/client*.c.
 */
#include <stdbool.h>
#include <stddef.h>

#include "kube/reflector.h"

struct buf;

/* The URL of a watch from w->rv, into url; the watch phase begins. */
void client_watch_url(struct kube_watch *w, struct buf *url);
/* Its request started: silence for w->idle_ms restarts it. */
void client_watch_started(struct kube_watch *w);
/* The response's headers are in. */
void client_watch_headers(struct kube_watch *w);
/* A response's bytes: events, or an error's Status. Returns false when
 * the watch must stop. */
bool client_watch_data(struct kube_watch *w, const char *data, size_t n);
/* The watch ended: what comes next. */
enum reflector_next client_watch_done(struct kube_watch *w, enum kube_request_end end, const char *error);
