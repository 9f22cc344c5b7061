/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * explain's query from text (the command's flags, /debug/explain's URL
 * query), and the names of its enums.
 */
#include "explain/explain-types.h"

/* Sets one field of q from text: "source" (IP or IP:port, [IPv6]:port),
 * "destination" (IP:port), "protocol" (tcp, udp, sctp), "from" (pod,
 * node, external, or an interface name), "ct-state" (new, invalid).
 * Returns 0, or -EINVAL with the problem in err. */
int explain_query_set(struct explain_query *q, const char *field, const char *value, char err[EXPLAIN_ERRLEN]);
/* 0 when q has a source and a destination of one family, else -EINVAL
 * with the problem in err. */
int explain_query_check(const struct explain_query *q, char err[EXPLAIN_ERRLEN]);

const char *explain_verdict_to_string(enum explain_verdict v);
const char *explain_origin_to_string(enum explain_origin o);
const char *explain_entry_to_string(enum explain_entry e);
const char *explain_mode_to_string(enum explain_mode m);
