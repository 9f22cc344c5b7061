/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A reflector's list phase, above its bookkeeping (kube/reflector.h): the
 * URL of the next list request, and what its response leads to. Private
 * to src/kube/client*.c.
 */
#include <stdbool.h>
#include <stddef.h>

#include "kube/reflector.h"

struct buf;

/* The URL of the list request to make now (the next page, or a new list
 * as w->list_rv says), into url; false when client-go's rate limit makes
 * it wait (the retry timer resumes it). */
bool client_list_url(struct kube_watch *w, struct buf *url);
/* A response's bytes. */
bool client_list_data(struct kube_watch *w, const char *data, size_t n);
/* The list request ended: its items reported, and what comes next. */
enum reflector_next client_list_done(struct kube_watch *w, enum kube_request_end end, const char *error);
